#include <arpa/inet.h>
#include <glog/logging.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "kit/log_capture.h"
#include "rpc/rpc_frame.h"
#include "tent/runtime/control_plane.h"

namespace mooncake::tent {
namespace {

constexpr int kTimeoutMs = 10000;

// The client's own address as the server sees it ("127.0.0.1:<port>").
std::string localName(int fd) {
    sockaddr_in addr{};
    socklen_t len = sizeof(addr);
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
    return "127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
}

// A ControlService answering with a SegmentManager's local descriptor.
struct Peer {
    explicit Peer(const std::string& attr)
        : manager(std::make_shared<SegmentManager>("", nullptr)),
          service(manager) {
        EXPECT_TRUE(service.start(0).ok());
        name = "127.0.0.1:" + std::to_string(service.port());
        EXPECT_TRUE(manager
                        ->updateLocal([&](SegmentDesc& d) {
                            d.name = name;
                            BufferDesc b;
                            b.addr = 0x7f0000001000ull;
                            b.length = 1ull << 33;
                            b.location = "cpu:1";
                            b.transports = {TCP, MPCOMM};
                            d.getMemory().buffers.push_back(b);
                            d.getMemory().transport_attrs[MPCOMM] = attr;
                            d.getMemory().transport_attrs[TCP] =
                                "127.0.0.1:4000";
                            return Status::OK();
                        })
                        .ok());
    }
    std::string name;
    std::shared_ptr<SegmentManager> manager;
    ControlService service;
};

int connectRaw(uint16_t port) {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    EXPECT_GE(fd, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)),
              0);
    return fd;
}

void sendRaw(int fd, const std::string& bytes) {
    ASSERT_EQ(::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(bytes.size()));
}

// A frame header written by hand: version 1, then the length.
std::string lengthPrefix(uint32_t n, uint8_t version = 1) {
    std::string s(5, '\0');
    s[0] = char(version);
    s[1] = char(n >> 24);
    s[2] = char(n >> 16);
    s[3] = char(n >> 8);
    s[4] = char(n);
    return s;
}

// Reads the server's error frame and then expects it to close the
// connection.
void expectErrorThenClose(int fd, const std::string& message) {
    std::string payload;
    ASSERT_TRUE(readFrame(fd, payload, kTimeoutMs, 1 << 20).ok());
    Json::Value reply;
    ASSERT_TRUE(decodeJsonObject(payload, reply).ok()) << payload;
    EXPECT_EQ(reply["status"].asString(), "error");
    EXPECT_EQ(reply["message"].asString(), message);
    // OK with no payload: the server closed the connection.
    EXPECT_EQ(readFrame(fd, payload, kTimeoutMs, 1 << 20), Status::OK());
    EXPECT_TRUE(payload.empty());
}

void expectServing(const Peer& peer) {
    P2PSegmentFetcher fetcher(kTimeoutMs);
    SegmentDesc desc;
    Status s = fetcher.fetch(peer.name, desc);
    ASSERT_TRUE(s.ok()) << s;
    EXPECT_EQ(desc.name, peer.name);
}

TEST(P2PMetadataTest, FetchesThePeersDescriptorByteExact) {
    Peer a("v1:127.0.0.1:13579");
    Peer b("v1:127.0.0.1:13580");
    ASSERT_NE(a.service.port(), b.service.port());
    EXPECT_GE(a.service.port(), ControlService::kPortRangeBegin);
    EXPECT_LE(b.service.port(), ControlService::kPortRangeEnd);

    P2PSegmentFetcher fetcher(kTimeoutMs);
    SegmentDesc got;
    ASSERT_TRUE(fetcher.fetch(b.name, got).ok());
    EXPECT_EQ(encodeJson(segmentToJson(got)),
              encodeJson(segmentToJson(*b.manager->getLocal())));
    EXPECT_EQ(got.getMemory().getTransportAttrs(MPCOMM), "v1:127.0.0.1:13580");
    ASSERT_EQ(got.getMemory().buffers.size(), 1u);
    EXPECT_EQ(got.getMemory().buffers[0].length, 1ull << 33);

    ASSERT_TRUE(fetcher.fetch(a.name, got).ok());
    EXPECT_EQ(got.getMemory().getTransportAttrs(MPCOMM), "v1:127.0.0.1:13579");

    // Later updates are served without any extra step.
    ASSERT_TRUE(b.manager
                    ->updateLocal([](SegmentDesc& d) {
                        d.getMemory().transport_attrs[MPCOMM] = "v1:10.1.1.1:1";
                        return Status::OK();
                    })
                    .ok());
    ASSERT_TRUE(fetcher.fetch(b.name, got).ok());
    EXPECT_EQ(got.getMemory().getTransportAttrs(MPCOMM), "v1:10.1.1.1:1");
}

TEST(P2PMetadataTest, SegmentManagerOpensThroughTheFetcher) {
    Peer peer("v1:127.0.0.1:1");
    SegmentManager mgr("me", std::make_shared<P2PSegmentFetcher>(kTimeoutMs));
    SegmentID id = 0;
    ASSERT_TRUE(mgr.openRemote(id, peer.name).ok());
    SegmentDescRef desc;
    ASSERT_TRUE(mgr.getRemoteCached(desc, id).ok());
    EXPECT_EQ(desc->getMemory().transport_attrs.at(MPCOMM), "v1:127.0.0.1:1");
}

TEST(P2PMetadataTest, ClosedPortIsAnErrorNamingTheSegment) {
    // A bound socket that never listens: connecting to it is refused, and
    // holding it keeps another process from taking the port meanwhile.
    int bound = ::socket(AF_INET, SOCK_STREAM, 0);
    ASSERT_GE(bound, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(::bind(bound, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)),
              0);
    std::string name = localName(bound);
    P2PSegmentFetcher fetcher(kTimeoutMs);
    SegmentDesc desc;
    Status s = fetcher.fetch(name, desc);
    EXPECT_TRUE(s.IsRpcServiceError()) << s;
    EXPECT_EQ(s.message(), "cannot fetch segment " + name +
                               " (timeout 10000 ms): connect failed: "
                               "Connection refused");
    ::close(bound);
}

TEST(P2PMetadataTest, BadSegmentNamesAreRejectedNamingTheValue) {
    P2PSegmentFetcher fetcher(kTimeoutMs);
    SegmentDesc desc;
    EXPECT_EQ(fetcher.fetch("nohost", desc),
              Status::InvalidArgument(
                  "invalid segment name \"nohost\": expected host:port"));
    EXPECT_EQ(fetcher.fetch("h:", desc),
              Status::InvalidArgument(
                  "invalid segment name \"h:\": port \"\" is not in 1..65535"));
    EXPECT_EQ(fetcher.fetch("h:99999", desc),
              Status::InvalidArgument("invalid segment name \"h:99999\": port "
                                      "\"99999\" is not in 1..65535"));
    EXPECT_EQ(fetcher.fetch(":80", desc),
              Status::InvalidArgument(
                  "invalid segment name \":80\": expected host:port"));
    EXPECT_EQ(
        fetcher.fetch("h:0", desc),
        Status::InvalidArgument(
            "invalid segment name \"h:0\": port \"0\" is not in 1..65535"));
}

TEST(P2PMetadataTest, GarbageJsonIsRefusedAndServingContinues) {
    Peer peer("v1:127.0.0.1:1");
    testing::LogCapture warnings;
    int fd = connectRaw(peer.service.port());
    std::string body = "{not json";
    sendRaw(fd, lengthPrefix(body.size()) + body);
    expectErrorThenClose(fd,
                         "invalid JSON: Line 1, Column 2: Missing '}' or "
                         "object member name");
    // The server logs before it answers, so the line is already there.
    EXPECT_EQ(warnings.linesAt(google::GLOG_WARNING),
              std::vector<std::string>{
                  "RpcServer: bad request from " + localName(fd) +
                  ": invalid JSON: Line 1, Column 2: Missing '}' or object "
                  "member name; closing the connection"});
    ::close(fd);
    expectServing(peer);
}

TEST(P2PMetadataTest, OversizedLengthPrefixIsRefused) {
    Peer peer("v1:127.0.0.1:1");
    int fd = connectRaw(peer.service.port());
    sendRaw(fd, lengthPrefix(0xFFFFFFFFu));
    // The request cap is GetSegmentDesc's real size, not the reply cap.
    expectErrorThenClose(fd,
                         "frame length 4294967295 exceeds the limit of "
                         "1024 bytes");
    ::close(fd);
    expectServing(peer);
}

TEST(P2PMetadataTest, AFrameOfAnotherVersionIsRefusedNamingBoth) {
    Peer peer("v1:127.0.0.1:1");
    testing::LogCapture warnings;
    int fd = connectRaw(peer.service.port());
    // A well-formed request in every other byte.
    std::string body = R"({"op":"GetSegmentDesc"})";
    sendRaw(fd, lengthPrefix(body.size(), 9) + body);
    expectErrorThenClose(fd, "rpc frame version 9, expected version 1");
    EXPECT_EQ(warnings.linesAt(google::GLOG_WARNING),
              std::vector<std::string>{
                  "RpcServer: bad request from " + localName(fd) +
                  ": rpc frame version 9, expected version 1; closing the "
                  "connection"});
    ::close(fd);
    expectServing(peer);
}

TEST(P2PMetadataTest, AReplyOfAnotherVersionIsRefusedNamingBoth) {
    // A hand-written server: it reads the request and answers a good
    // descriptor reply, but as a version 9 frame.
    int listen_fd = -1;
    uint16_t port = 0;
    ASSERT_TRUE(net::listenOn(0, listen_fd, port).ok());
    std::thread server([&] {
        // Bounded, so a client that never connects fails the test.
        struct pollfd pfd = {listen_fd, POLLIN, 0};
        ASSERT_EQ(::poll(&pfd, 1, kTimeoutMs), 1);
        int fd = ::accept(listen_fd, nullptr, nullptr);
        ASSERT_GE(fd, 0);
        std::string request;
        EXPECT_TRUE(readFrame(fd, request, kTimeoutMs, 1 << 20).ok());
        std::string body = R"({"status":"ok","segment":{}})";
        sendRaw(fd, lengthPrefix(body.size(), 9) + body);
        ::close(fd);
    });
    P2PSegmentFetcher fetcher(kTimeoutMs);
    SegmentDesc desc;
    const std::string name = "127.0.0.1:" + std::to_string(port);
    EXPECT_EQ(fetcher.fetch(name, desc),
              Status::InvalidArgument(
                  "cannot fetch segment " + name + " (timeout " +
                  std::to_string(kTimeoutMs) +
                  " ms): rpc frame version 9, expected version 1"));
    server.join();
    ::close(listen_fd);
}

TEST(P2PMetadataTest, ZeroLengthFrameIsRefused) {
    Peer peer("v1:127.0.0.1:1");
    int fd = connectRaw(peer.service.port());
    sendRaw(fd, lengthPrefix(0));
    expectErrorThenClose(fd, "zero-length frame");
    ::close(fd);
    expectServing(peer);
}

TEST(P2PMetadataTest, TruncatedFrameThenCloseIsDropped) {
    Peer peer("v1:127.0.0.1:1");
    testing::LogCapture warnings;
    int fd = connectRaw(peer.service.port());
    sendRaw(fd, lengthPrefix(100) + "{\"op\":\"Get");
    ::shutdown(fd, SHUT_WR);
    std::string payload;
    // Nothing can be answered to a request that never completed.
    // OK with no payload: the server closed the connection.
    EXPECT_EQ(readFrame(fd, payload, kTimeoutMs, 1 << 20), Status::OK());
    EXPECT_TRUE(payload.empty());
    EXPECT_EQ(warnings.linesAt(google::GLOG_WARNING),
              std::vector<std::string>{
                  "RpcServer: bad request from " + localName(fd) +
                  ": truncated frame (10 of 100 payload bytes); closing the "
                  "connection"});
    ::close(fd);
    expectServing(peer);
}

TEST(P2PMetadataTest, AStalledClientDoesNotBlockOthers) {
    Peer peer("v1:127.0.0.1:1");
    int stalled = connectRaw(peer.service.port());
    sendRaw(stalled, lengthPrefix(100) + "{");
    expectServing(peer);
    expectServing(peer);
    ::close(stalled);
}

TEST(P2PMetadataTest, SilentPeerTimesOutNamingTheSegment) {
    // A listener that never accepts: connect() completes through the
    // backlog, then no reply ever comes.
    int listener = ::socket(AF_INET, SOCK_STREAM, 0);
    ASSERT_GE(listener, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(
        ::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    ASSERT_EQ(::listen(listener, 4), 0);
    socklen_t len = sizeof(addr);
    ::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len);
    std::string name = "127.0.0.1:" + std::to_string(ntohs(addr.sin_port));

    P2PSegmentFetcher fetcher(200);
    SegmentDesc desc;
    Status s = fetcher.fetch(name, desc);
    EXPECT_EQ(s, Status::RpcServiceError("cannot fetch segment " + name +
                                         " (timeout 200 ms): recv timed "
                                         "out"));
    ::close(listener);
}

TEST(P2PMetadataTest, UnknownOrMissingOpIsRefused) {
    Peer peer("v1:127.0.0.1:1");
    int fd = connectRaw(peer.service.port());
    ASSERT_TRUE(writeFrame(fd, R"({"op":"Bogus"})", kTimeoutMs).ok());
    expectErrorThenClose(fd, "unknown op \"Bogus\"");
    ::close(fd);

    fd = connectRaw(peer.service.port());
    ASSERT_TRUE(writeFrame(fd, R"({"opx":1})", kTimeoutMs).ok());
    expectErrorThenClose(fd, "request has no string \"op\"");
    ::close(fd);

    fd = connectRaw(peer.service.port());
    ASSERT_TRUE(writeFrame(fd, "[1]", kTimeoutMs).ok());
    expectErrorThenClose(fd, "payload is not a JSON object");
    ::close(fd);
    expectServing(peer);
}

TEST(P2PMetadataTest, OneConnectionServesSeveralRequests) {
    Peer peer("v1:127.0.0.1:1");
    int fd = connectRaw(peer.service.port());
    for (int i = 0; i < 3; ++i) {
        ASSERT_TRUE(
            writeFrame(fd, R"({"op":"GetSegmentDesc"})", kTimeoutMs).ok());
        std::string payload;
        ASSERT_TRUE(readFrame(fd, payload, kTimeoutMs, 1 << 20).ok());
        Json::Value reply;
        ASSERT_TRUE(decodeJsonObject(payload, reply).ok());
        EXPECT_EQ(reply["status"].asString(), "ok");
        EXPECT_EQ(reply["segment"]["name"].asString(), peer.name);
    }
    ::close(fd);
}

TEST(P2PMetadataTest, NoSegmentManagerIsAnErrorReply) {
    ControlService service(nullptr);
    ASSERT_TRUE(service.start(0).ok());
    P2PSegmentFetcher fetcher(kTimeoutMs);
    SegmentDesc desc;
    std::string name = "127.0.0.1:" + std::to_string(service.port());
    Status s = fetcher.fetch(name, desc);
    EXPECT_EQ(s, Status::RpcServiceError(
                     "cannot fetch segment " + name +
                     " (timeout 10000 ms): peer refused GetSegmentDesc: "
                     "MetadataError: no local segment is published"));
}

TEST(P2PMetadataTest, TakenPortIsAnErrorNamingThePort) {
    ControlService first(nullptr);
    ASSERT_TRUE(first.start(0).ok());
    ControlService second(nullptr);
    Status s = second.start(first.port());
    EXPECT_EQ(s, Status::RpcServiceError("cannot listen on port " +
                                         std::to_string(first.port()) +
                                         ": Address already in use"));
    // Port 0 skips taken ports.
    ASSERT_TRUE(second.start(0).ok());
    EXPECT_NE(second.port(), first.port());
}

TEST(P2PMetadataTest, StopReturnsWithIdleClientsConnected) {
    ControlService service(nullptr);
    ASSERT_TRUE(service.start(0).ok());
    int idle = connectRaw(service.port());
    int partial = connectRaw(service.port());
    sendRaw(partial, lengthPrefix(50) + "{");
    service.stop();  // must not wait for the idle or frame deadlines
    // Closed either way: shut down if it had been accepted (a clean end of
    // stream), reset if it still sat in the listener's backlog.
    std::string payload;
    Status s = readFrame(idle, payload, kTimeoutMs, 1 << 20);
    EXPECT_TRUE(payload.empty());
    EXPECT_TRUE(s.ok() ||
                s.message() == "recv failed: Connection reset by peer")
        << s;
    ::close(idle);
    ::close(partial);
    // Restartable after stop.
    ASSERT_TRUE(service.start(0).ok());
}

TEST(P2PMetadataTest, DiscoverLocalHostnameIsIpv4) {
    std::string host = discoverLocalHostname();
    in_addr addr;
    EXPECT_EQ(inet_pton(AF_INET, host.c_str(), &addr), 1) << host;
}

}  // namespace
}  // namespace mooncake::tent
