// src/net: parsing host:port, the socket helpers (deadlines, closed
// peers, send buffers) and reading a server's limits; the StreamServer
// itself in net_server_test.cpp.
#include <gtest/gtest.h>

#include "net/net_test_support.h"

namespace mooncake::tent::net {
namespace {

TEST(NetParseTest, HostPortNamesTheBadPart) {
    std::string host;
    uint16_t port = 0;
    ASSERT_TRUE(
        parseHostPort("10.0.0.1:8080", "tcp endpoint", host, port).ok());
    EXPECT_EQ(host, "10.0.0.1");
    EXPECT_EQ(port, 8080);
    ASSERT_TRUE(parseHostPort("a:b:65535", "segment name", host, port).ok());
    EXPECT_EQ(host, "a:b");
    EXPECT_EQ(port, 65535);
    EXPECT_EQ(parseHostPort("nohost", "tcp endpoint", host, port),
              Status::InvalidArgument(
                  "invalid tcp endpoint \"nohost\": expected host:port"));
    EXPECT_EQ(parseHostPort(":1", "tcp endpoint", host, port),
              Status::InvalidArgument(
                  "invalid tcp endpoint \":1\": expected host:port"));
    for (const char* bad :
         {"h:0", "h:65536", "h:-1", "h:1x", "h:", "h:000001"}) {
        std::string text(bad);
        Status s = parseHostPort(text, "tcp endpoint", host, port);
        EXPECT_EQ(s, Status::InvalidArgument("invalid tcp endpoint \"" + text +
                                             "\": port \"" + text.substr(2) +
                                             "\" is not in 1..65535"));
    }
}

TEST(NetIoTest, TheDeadlineBoundsTheWholeReadHoweverBytesTrickle) {
    int sv[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    std::atomic<bool> stop{false};
    // One byte every 10 ms would complete 100 bytes in 1 s; a per-byte
    // bound would never fire on it.
    std::thread trickler([&] {
        while (!stop.load()) {
            char byte = 'x';
            if (::send(sv[1], &byte, 1, MSG_NOSIGNAL) != 1) return;
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
    });
    char buf[100];
    size_t got = 0;
    auto started = Clock::now();
    Status s = recvAll(sv[0], buf, sizeof(buf), deadlineIn(200), &got);
    auto took = Clock::now() - started;
    stop = true;
    trickler.join();
    EXPECT_EQ(s, Status::RpcServiceError("recv timed out"));
    EXPECT_GT(got, 0u);
    EXPECT_LT(got, sizeof(buf));
    EXPECT_GE(took, std::chrono::milliseconds(200));
    EXPECT_LT(took, std::chrono::milliseconds(kBoundMs));
    ::close(sv[0]);
    ::close(sv[1]);
}

TEST(NetIoTest, APassedDeadlineStillMovesBytesThatNeedNoWait) {
    // A server that stalled past a request's deadline (scheduler, logging)
    // must still get its error reply out, and still read bytes already
    // there; only a wait meets the deadline.
    int sv[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    Deadline passed = Clock::now() - std::chrono::milliseconds(1);
    EXPECT_EQ(sendAll(sv[0], "reply", 5, passed), Status::OK());
    char buf[8] = {};
    EXPECT_EQ(recvAll(sv[1], buf, 5, passed), Status::OK());
    EXPECT_EQ(std::string(buf, 5), "reply");
    // Nothing more is there: now it has to wait, and the deadline holds.
    size_t got = 0;
    EXPECT_EQ(recvAll(sv[1], buf, 1, passed, &got),
              Status::RpcServiceError("recv timed out"));
    EXPECT_EQ(got, 0u);
    // Three bytes there, five wanted: the three are taken, then the wait
    // for the rest times out.
    ASSERT_EQ(::send(sv[0], "abc", 3, 0), 3);
    EXPECT_EQ(recvAll(sv[1], buf, 5, passed, &got),
              Status::RpcServiceError("recv timed out"));
    EXPECT_EQ(got, 3u);
    ::close(sv[0]);
    ::close(sv[1]);
}

// Fills `fd`'s send buffer, so the next send is cut wherever the reader's
// draining leaves room.
size_t fillSendBuffer(int fd) {
    std::vector<char> filler(4096, 'f');
    size_t sent = 0;
    for (;;) {
        ssize_t n = ::send(fd, filler.data(), filler.size(), MSG_DONTWAIT);
        if (n <= 0) return sent;
        sent += static_cast<size_t>(n);
    }
}

TEST(NetIoTest, AHeaderAndPayloadArriveWholeAndInOrderThroughPartialSends) {
    // sendAll(head, buf) goes out in as many sendmsg() calls as the
    // socket buffer needs; each cut (inside the header, at its end, inside
    // the payload) must resume at the right byte. Also the forms the TCP
    // target uses: no header (later slices) and no payload.
    const std::vector<std::pair<size_t, size_t>> shapes = {
        {16, 300 * 1024}, {0, 70 * 1024}, {24, 0}, {16, 1}};
    for (auto [head_len, len] : shapes) {
        SCOPED_TRACE("head " + std::to_string(head_len) + ", payload " +
                     std::to_string(len));
        int sv[2];
        ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
        setSendBuffer(sv[0], 4096);
        std::vector<char> head(head_len), payload(len);
        for (size_t i = 0; i < head_len; ++i) head[i] = char('A' + i % 26);
        for (size_t i = 0; i < len; ++i) payload[i] = char(i * 7 % 251);
        const size_t filler = fillSendBuffer(sv[0]);
        std::vector<char> got(filler + head_len + len);
        std::thread reader([&] {
            // Odd-sized reads, so the sender's cuts land anywhere.
            for (size_t done = 0; done < got.size();) {
                size_t n = std::min<size_t>(1013, got.size() - done);
                if (!recvAll(sv[1], got.data() + done, n, deadlineIn(kBoundMs))
                         .ok()) {
                    return;
                }
                done += n;
            }
        });
        EXPECT_EQ(sendAll(sv[0], head.data(), head_len, payload.data(), len,
                          deadlineIn(kBoundMs)),
                  Status::OK());
        reader.join();
        EXPECT_EQ(std::string(got.data(), filler), std::string(filler, 'f'));
        EXPECT_TRUE(std::equal(head.begin(), head.end(), got.begin() + filler));
        EXPECT_TRUE(std::equal(payload.begin(), payload.end(),
                               got.begin() + filler + head_len));
        // Nothing more was sent.
        char extra;
        EXPECT_EQ(::recv(sv[1], &extra, 1, MSG_DONTWAIT), -1);
        ::close(sv[0]);
        ::close(sv[1]);
    }
}

TEST(NetIoTest, AHeaderAndPayloadToAClosedPeerFail) {
    int sv[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    ::close(sv[1]);
    EXPECT_EQ(sendAll(sv[0], "head", 4, "payload", 7, deadlineIn(kBoundMs)),
              Status::RpcServiceError("send failed: Broken pipe"));
    ::close(sv[0]);
}

TEST(NetIoTest, AReplyHeaderTakesThePayloadThatCameWithIt) {
    int sv[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    // Header and the first payload bytes together: one read takes both.
    ASSERT_EQ(::send(sv[0], "HEADpayl", 8, 0), 8);
    char head[4] = {}, buf[16] = {};
    size_t early = 99;
    EXPECT_EQ(recvHeader(sv[1], head, 4, buf, sizeof(buf), deadlineIn(kBoundMs),
                         &early),
              Status::OK());
    EXPECT_EQ(std::string(head, 4), "HEAD");
    EXPECT_EQ(early, 4u);
    EXPECT_EQ(std::string(buf, 4), "payl");
    // A header cut in two: it returns once the header is whole, without
    // waiting for payload (none follows a refusal).
    std::thread sender([&] {
        ::send(sv[0], "HE", 2, 0);
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        ::send(sv[0], "AD", 2, 0);
    });
    EXPECT_EQ(recvHeader(sv[1], head, 4, buf, sizeof(buf), deadlineIn(kBoundMs),
                         &early),
              Status::OK());
    sender.join();
    EXPECT_EQ(std::string(head, 4), "HEAD");
    EXPECT_EQ(early, 0u);
    // A passed deadline still takes what is there, and only then fires.
    Deadline passed = Clock::now() - std::chrono::milliseconds(1);
    ASSERT_EQ(::send(sv[0], "HEAD", 4, 0), 4);
    EXPECT_EQ(recvHeader(sv[1], head, 4, nullptr, 0, passed, &early),
              Status::OK());
    EXPECT_EQ(recvHeader(sv[1], head, 4, nullptr, 0, passed, &early),
              Status::RpcServiceError("recv timed out"));
    ::close(sv[0]);
    EXPECT_EQ(recvHeader(sv[1], head, 4, buf, sizeof(buf), deadlineIn(kBoundMs),
                         &early),
              Status::RpcServiceError("connection closed by peer"));
    ::close(sv[1]);
}

TEST(NetIoTest, ClosedPeerAndTruncationAreReported) {
    int sv[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    ASSERT_EQ(::send(sv[1], "abc", 3, 0), 3);
    ::close(sv[1]);
    char buf[8];
    size_t got = 0;
    bool closed = false;
    EXPECT_EQ(
        recvAll(sv[0], buf, sizeof(buf), deadlineIn(kBoundMs), &got, &closed),
        Status::RpcServiceError("connection closed by peer"));
    EXPECT_EQ(got, 3u);
    EXPECT_TRUE(closed);
    EXPECT_EQ(std::string(buf, 3), "abc");
    EXPECT_EQ(sendAll(sv[0], "x", 1, deadlineIn(kBoundMs)),
              Status::RpcServiceError("send failed: Broken pipe"));
    ::close(sv[0]);
}

TEST(NetIoTest, ConnectToAClosedPortIsRefused) {
    int bound = -1;
    uint16_t port = 0;
    // Bound but never listening: a connect is refused, and holding the
    // socket keeps the port from being reused meanwhile.
    bound = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(::bind(bound, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)),
              0);
    socklen_t len = sizeof(addr);
    ::getsockname(bound, reinterpret_cast<sockaddr*>(&addr), &len);
    port = ntohs(addr.sin_port);
    int fd = -1;
    EXPECT_EQ(connectTo("127.0.0.1", port, deadlineIn(kBoundMs), fd),
              Status::RpcServiceError("connect failed: Connection refused"));
    EXPECT_EQ(fd, -1);
    ::close(bound);
}

TEST(NetServerTest, ReadsLimitsFromConfigAndNamesABadKey) {
    Config conf;
    conf.set("rpc/idle_timeout_ms", 1500);
    conf.set("rpc/max_connections", 7);
    ServerLimits limits;
    ASSERT_TRUE(readServerLimits(conf, "rpc", limits).ok());
    EXPECT_EQ(limits.idle_timeout_ms, 1500);
    EXPECT_EQ(limits.frame_timeout_ms, ServerLimits().frame_timeout_ms);
    EXPECT_EQ(limits.max_connections, 7);
    EXPECT_EQ(limits.key_prefix, "rpc");
    conf.set("rpc/frame_timeout_ms", 0);
    EXPECT_EQ(readServerLimits(conf, "rpc", limits),
              Status::InvalidArgument(
                  "rpc/frame_timeout_ms must be in [1, 2147483647], got 0"));
    conf.set("rpc/frame_timeout_ms", 10);
    conf.set("rpc/max_connections", 70000);
    EXPECT_EQ(readServerLimits(conf, "rpc", limits),
              Status::InvalidArgument(
                  "rpc/max_connections must be in [1, 65536], got 70000"));
    EXPECT_EQ(limits.max_connections, 7);  // unchanged by a failed read
}

TEST(NetIoTest, SetSendBufferCapsTheSocketAndZeroLeavesTheKernels) {
    int fds[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
    const int kernels = sendBufferOf(fds[0]);
    setSendBuffer(fds[0], 0);
    EXPECT_EQ(sendBufferOf(fds[0]), kernels);
    setSendBuffer(fds[0], 96 * 1024);
    EXPECT_EQ(sendBufferOf(fds[0]), expectedSendBuffer(96 * 1024));
    ::close(fds[0]);
    ::close(fds[1]);
}

}  // namespace
}  // namespace mooncake::tent::net
