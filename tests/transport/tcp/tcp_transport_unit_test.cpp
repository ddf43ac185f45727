// TcpTransport on its own, against peers the test controls byte by byte:
// published endpoint, key checks, malformed frames, hung and stale peers,
// uninstall with tasks in flight, a segment without an endpoint.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <thread>

#include "kit/log_capture.h"
#include "net/stream_server.h"
#include "tcp_test_support.h"
#include "tent/transport/tcp/tcp_transport.h"

namespace mooncake::tent {
namespace {

// A listener that accepts connections and never answers: a hung peer.
class SilentPeer {
 public:
    SilentPeer() {
        fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in addr{};
        addr.sin_family = AF_INET;
        addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        ::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
        ::listen(fd_, 16);
        socklen_t len = sizeof(addr);
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
        port_ = ntohs(addr.sin_port);
    }
    ~SilentPeer() { ::close(fd_); }
    int fd() const { return fd_; }
    std::string endpoint() const {
        return "127.0.0.1:" + std::to_string(port_);
    }

 private:
    int fd_ = -1;
    uint16_t port_ = 0;
};

int connectLoopback(uint16_t port) {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(port);
    EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)),
              0);
    return fd;
}

// Reads until EOF or `want` bytes; bounded by a receive timeout so a
// server that neither answers nor closes fails the test instead of
// hanging it.
std::string readUpTo(int fd, size_t want) {
    timeval tv{30, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    std::string out;
    char buf[256];
    while (out.size() < want) {
        ssize_t n =
            ::recv(fd, buf, std::min(sizeof(buf), want - out.size()), 0);
        if (n <= 0) break;
        out.append(buf, n);
    }
    return out;
}

using testing::DescriptorFetcher;

class TcpTransportUnitTest : public ::testing::Test {
 protected:
    void install(const std::string& peer_endpoint, int timeout_ms) {
        manager_ = std::make_shared<SegmentManager>(
            "127.0.0.1:1",
            DescriptorFetcher::fixedEndpoint(TCP, peer_endpoint));
        auto conf = std::make_shared<Config>();
        conf->set("transports/tcp/timeout_ms", timeout_ms);
        ASSERT_TRUE(testing::installTcp(transport_, manager_, conf).ok());
        ASSERT_TRUE(manager_->openRemote(peer_, "peer:1").ok());
    }

    Request toPeer(Request::OpCode op, void* local, uint64_t offset,
                   size_t length) {
        return testing::requestTo(peer_, op, local, offset, length);
    }

    // Registers `mem` with the transport (the target side of a test that
    // writes frames by hand); its descriptor.
    BufferDesc registerTarget(std::vector<unsigned char>& mem) {
        BufferDesc desc;
        desc.addr = reinterpret_cast<uint64_t>(mem.data());
        desc.length = mem.size();
        EXPECT_TRUE(transport_.addMemoryBuffer(desc, MemoryOptions()).ok());
        return desc;
    }

    void waitWhilePending(Transport::SubBatchRef batch, size_t task,
                          TransferStatus& st) {
        st = testing::waitWhilePending(transport_, batch,
                                       static_cast<int>(task), 30000);
    }

    TcpTransport transport_;
    std::shared_ptr<SegmentManager> manager_;
    SegmentID peer_ = 0;
};

TEST_F(TcpTransportUnitTest, PublishesEndpointAndCapabilities) {
    install("", 1000);
    EXPECT_EQ(manager_->getLocal()->getMemory().transport_attrs.at(TCP),
              "127.0.0.1:" + std::to_string(transport_.listenPort()));
    EXPECT_TRUE(transport_.capabilities().dram_to_dram);
#ifdef USE_CUDA
    // Device memory is staged through host buffers (tcp_stager.h).
    EXPECT_TRUE(transport_.capabilities().gpu_to_gpu);
#else
    EXPECT_FALSE(transport_.capabilities().gpu_to_gpu);
#endif
    BufferDesc desc;
    desc.addr = 0x1000;
    desc.length = 0x1000;
    ASSERT_TRUE(transport_.addMemoryBuffer(desc, MemoryOptions()).ok());
    EXPECT_EQ(desc.transports, std::vector<TransportType>{TCP});
    // A queued task is dropped at once (tent_engine_cancel_test).
    EXPECT_TRUE(transport_.supportsCancellation());
}

TEST_F(TcpTransportUnitTest, SendBufferKeyIsCheckedAndNamedWhenBad) {
    EXPECT_EQ(TcpTransport::Settings().send_buffer_bytes, 524288);
    testing::expectKeyRefused(
        "transports/tcp/send_buffer_bytes", {1, 65535, -1, (1 << 30) + 1},
        "must be 0 (the kernel's autotuning) or in [65536, 1073741824]");
    manager_ = std::make_shared<SegmentManager>(
        "127.0.0.1:1", DescriptorFetcher::fixedEndpoint(TCP, ""));
    for (int good : {0, 65536}) {
        auto conf = std::make_shared<Config>();
        conf->set("transports/tcp/send_buffer_bytes", good);
        TcpTransport transport;
        EXPECT_TRUE(testing::installTcp(transport, manager_, conf).ok())
            << good;
        EXPECT_EQ(transport.server().limits().send_buffer_bytes, good);
    }
}

TEST_F(TcpTransportUnitTest, MalformedFrameClosesOnlyThatConnection) {
    install("", 1000);
    std::vector<unsigned char> mem(4096, 0);
    const BufferDesc desc = registerTarget(mem);

    for (const std::string& bad :
         {testing::tcpHeader(0xdeadbeef, 2, desc.addr, 16),  // wrong magic
          testing::tcpHeader(0x54454e54, 9, desc.addr, 16),  // unknown op
          testing::tcpHeader(0x54454e54, 2, desc.addr,
                             1ull << 40)}) {  // over the cap
        int fd = connectLoopback(transport_.listenPort());
        ASSERT_EQ(::send(fd, bad.data(), bad.size(), 0),
                  static_cast<ssize_t>(bad.size()));
        EXPECT_EQ(readUpTo(fd, 1), "") << "connection should be closed";
        ::close(fd);
    }
    EXPECT_EQ(mem, std::vector<unsigned char>(4096, 0));

    // A well-formed WRITE on a fresh connection is still served.
    int fd = connectLoopback(transport_.listenPort());
    std::string good =
        testing::tcpHeader(0x54454e54, 2, desc.addr + 8, 4) + "abcd";
    ASSERT_EQ(::send(fd, good.data(), good.size(), 0),
              static_cast<ssize_t>(good.size()));
    std::string reply = readUpTo(fd, 16);
    ASSERT_EQ(reply.size(), 16u);
    EXPECT_EQ(reply.substr(0, 4), "TREP");
    // Version 1, code 0, length 0.
    EXPECT_EQ(reply.substr(4), std::string(1, '\1') + std::string(11, '\0'));
    ::close(fd);
    EXPECT_EQ(std::string(reinterpret_cast<char*>(&mem[8]), 4), "abcd");
}

TEST_F(TcpTransportUnitTest, HungPeerFailsTheTaskAfterTheTimeout) {
    SilentPeer peer;
    install(peer.endpoint(), 200);
    Transport::SubBatchRef batch = nullptr;
    ASSERT_TRUE(transport_.allocateSubBatch(batch, 2).ok());
    std::vector<char> src(64, 'x');
    Request r = toPeer(Request::WRITE, src.data(), 0x1000, src.size());
    ASSERT_TRUE(transport_.submitTransferTasks(batch, {r}).ok());
    TransferStatus st;
    waitWhilePending(batch, 0, st);
    EXPECT_EQ(st.s, FAILED);
    // The engine's failover re-issues it from what the task kept.
    EXPECT_TRUE(transport_.keepsTaskRequests());
    Request kept;
    ASSERT_TRUE(transport_.getTaskRequest(batch, 0, kept).ok());
    EXPECT_EQ(kept.opcode, Request::WRITE);
    EXPECT_EQ(kept.source, src.data());
    EXPECT_EQ(kept.target_id, r.target_id);
    EXPECT_EQ(kept.target_offset, 0x1000u);
    EXPECT_EQ(kept.length, src.size());
    EXPECT_TRUE(transport_.getTaskRequest(batch, 1, kept).IsInvalidArgument());
    ASSERT_TRUE(transport_.freeSubBatch(batch).ok());
}

TEST_F(TcpTransportUnitTest, UninstallFailsTasksInFlight) {
    SilentPeer peer;
    install(peer.endpoint(), 600000);
    Transport::SubBatchRef batch = nullptr;
    ASSERT_TRUE(transport_.allocateSubBatch(batch, 16).ok());
    std::vector<char> src(64, 'x');
    Request r = toPeer(Request::READ, src.data(), 0x1000, src.size());
    // More tasks than workers: some are in flight, the rest queued.
    ASSERT_TRUE(
        transport_.submitTransferTasks(batch, std::vector<Request>(16, r))
            .ok());
    TransferStatus st;
    ASSERT_TRUE(transport_.getTransferStatus(batch, 0, st).ok());
    EXPECT_EQ(st.s, PENDING);
    ASSERT_TRUE(transport_.uninstall().ok());
    for (int i = 0; i < 16; ++i) {
        ASSERT_TRUE(transport_.getTransferStatus(batch, i, st).ok());
        EXPECT_EQ(st.s, FAILED) << "task " << i;
    }
    Status s = transport_.submitTransferTasks(batch, {r});
    EXPECT_EQ(s, Status::InvalidArgument("tcp transport is not installed"));
    ASSERT_TRUE(transport_.freeSubBatch(batch).ok());
}

TEST_F(TcpTransportUnitTest, StalePooledConnectionIsRedialledOnce) {
    // A hand-written peer: it serves one WRITE on its first connection and
    // closes it (as a restarted peer would have), then serves the next
    // WRITE on a second connection.
    SilentPeer listener;
    std::vector<std::string> payloads;
    std::thread peer([&] {
        for (int conn = 0; conn < 2; ++conn) {
            // Bounded, so a transport that never redials fails the test
            // instead of hanging it.
            struct pollfd pfd = {listener.fd(), POLLIN, 0};
            if (::poll(&pfd, 1, 30000) != 1) return;
            int fd = ::accept(listener.fd(), nullptr, nullptr);
            ASSERT_GE(fd, 0);
            std::string req = readUpTo(fd, 24 + 4);
            ASSERT_EQ(req.size(), 28u);
            payloads.push_back(req.substr(24));
            std::string reply = testing::tcpReply(0, 0);
            ASSERT_EQ(::send(fd, reply.data(), reply.size(), 0), 16);
            // Closing right after the reply leaves the initiator a pooled
            // connection that fails on its next use.
            ::close(fd);
        }
    });
    manager_ = std::make_shared<SegmentManager>(
        "127.0.0.1:1",
        DescriptorFetcher::fixedEndpoint(TCP, listener.endpoint()));
    auto conf = std::make_shared<Config>();
    conf->set("transports/tcp/workers", 1);  // one worker, one pool
    ASSERT_TRUE(testing::installTcp(transport_, manager_, conf).ok());
    ASSERT_TRUE(manager_->openRemote(peer_, "peer:1").ok());

    Transport::SubBatchRef batch = nullptr;
    ASSERT_TRUE(transport_.allocateSubBatch(batch, 2).ok());
    char first[4] = {'a', 'b', 'c', 'd'}, second[4] = {'w', 'x', 'y', 'z'};
    Request r = toPeer(Request::WRITE, first, 0x1000, 4);
    ASSERT_TRUE(transport_.submitTransferTasks(batch, {r}).ok());
    TransferStatus st;
    waitWhilePending(batch, 0, st);
    ASSERT_EQ(st.s, COMPLETED);

    r.source = second;
    ASSERT_TRUE(transport_.submitTransferTasks(batch, {r}).ok());
    waitWhilePending(batch, 1, st);
    EXPECT_EQ(st.s, COMPLETED);
    peer.join();
    EXPECT_EQ(payloads, (std::vector<std::string>{"abcd", "wxyz"}));
    ASSERT_TRUE(transport_.freeSubBatch(batch).ok());
}

TEST_F(TcpTransportUnitTest, ARequestOfAnotherVersionIsClosedNamingBoth) {
    install("", 1000);
    std::vector<unsigned char> mem(64, 0);
    const BufferDesc desc = registerTarget(mem);
    testing::LogCapture sink;
    int fd = connectLoopback(transport_.listenPort());
    // A well-formed WRITE in every other field.
    std::string frame =
        testing::tcpHeader(testing::kTcpMagic, testing::kTcpWrite, desc.addr, 4,
                           /*version=*/9) +
        "abcd";
    ASSERT_EQ(::send(fd, frame.data(), frame.size(), 0),
              static_cast<ssize_t>(frame.size()));
    EXPECT_EQ(readUpTo(fd, 1), "") << "connection should be closed";
    ::close(fd);
    EXPECT_EQ(mem, std::vector<unsigned char>(64, 0));
    std::vector<std::string> warnings = sink.linesAt(google::GLOG_WARNING);
    ASSERT_EQ(warnings.size(), 1u);
    EXPECT_EQ(
        warnings[0].rfind("TcpTransport: malformed frame from 127.0.0.1:", 0),
        0u)
        << warnings[0];
    const std::string why =
        ", closing the connection: request frame version 9, expected "
        "version 1";
    EXPECT_EQ(warnings[0].substr(warnings[0].size() - why.size()), why);
}

TEST_F(TcpTransportUnitTest, AReplyOfAnotherVersionFailsItsTaskNamingBoth) {
    // A hand-written peer answering a WRITE with a version 9 reply.
    SilentPeer listener;
    std::thread peer([&] {
        struct pollfd pfd = {listener.fd(), POLLIN, 0};
        if (::poll(&pfd, 1, 30000) != 1) return;
        int fd = ::accept(listener.fd(), nullptr, nullptr);
        ASSERT_GE(fd, 0);
        ASSERT_EQ(readUpTo(fd, 24 + 4).size(), 28u);
        std::string reply = testing::tcpReply(0, 0, /*version=*/9);
        ASSERT_EQ(::send(fd, reply.data(), reply.size(), 0), 16);
        readUpTo(fd, 1);  // until the initiator closes it
        ::close(fd);
    });
    install(listener.endpoint(), 30000);
    Transport::SubBatchRef batch = nullptr;
    ASSERT_TRUE(transport_.allocateSubBatch(batch, 1).ok());
    char src[4] = {'a', 'b', 'c', 'd'};
    TransferStatus st;
    {
        testing::LogCapture sink;
        ASSERT_TRUE(transport_
                        .submitTransferTasks(
                            batch, {toPeer(Request::WRITE, src, 0x1000, 4)})
                        .ok());
        waitWhilePending(batch, 0, st);
        EXPECT_EQ(sink.linesAt(google::GLOG_WARNING),
                  std::vector<std::string>{
                      "TcpTransport: WRITE of 4 bytes at 0x1000 on segment "
                      "peer:1 failed: reply frame version 9, expected "
                      "version 1"});
    }
    EXPECT_EQ(st.s, FAILED);
    // The lane that carried it is out of step: closed, not kept.
    EXPECT_EQ(transport_.laneStats().open, 0u);
    peer.join();
    ASSERT_TRUE(transport_.freeSubBatch(batch).ok());
}

TEST_F(TcpTransportUnitTest, MissingEndpointFailsTaskNamingSegment) {
    install("", 1000);
    Transport::SubBatchRef batch = nullptr;
    ASSERT_TRUE(transport_.allocateSubBatch(batch, 1).ok());
    std::vector<char> src(8);
    Request r = toPeer(Request::WRITE, src.data(), 0, src.size());
    {
        testing::LogCapture sink;
        ASSERT_TRUE(transport_.submitTransferTasks(batch, {r}).ok());
        EXPECT_EQ(sink.lines(),
                  std::vector<std::string>{
                      "TcpTransport: task failed: segment peer:1 publishes no "
                      "tcp endpoint (transport_attrs[TCP])"});
    }
    TransferStatus st;
    ASSERT_TRUE(transport_.getTransferStatus(batch, 0, st).ok());
    EXPECT_EQ(st.s, FAILED);  // decided at submission, no peer contacted
    Status over = transport_.submitTransferTasks(batch, {r});
    ASSERT_TRUE(over.IsTooManyRequests()) << over;
    ASSERT_TRUE(transport_.freeSubBatch(batch).ok());
}

}  // namespace
}  // namespace mooncake::tent
