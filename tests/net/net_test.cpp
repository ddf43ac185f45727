// src/net: the socket helpers and the StreamServer limits every listener in
// libtent shares.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <functional>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "kit/wait_until.h"
#include "net/socket_io.h"
#include "net/stream_server.h"

namespace mooncake::tent::net {
namespace {

// Far above anything these cases need; it only turns a hang into a failure.
constexpr int kBoundMs = 20000;

int connectLoopback(uint16_t port) {
    int fd = -1;
    Status s = connectTo("127.0.0.1", port, deadlineIn(kBoundMs), fd);
    EXPECT_TRUE(s.ok()) << s;
    return fd;
}

// Sends `byte` and reads the echo; "" when the server closed instead.
std::string roundTrip(int fd, char byte) {
    if (!sendAll(fd, &byte, 1, deadlineIn(kBoundMs)).ok()) return "";
    char back = 0;
    if (!recvAll(fd, &back, 1, deadlineIn(kBoundMs)).ok()) return "";
    return std::string(1, back);
}

// True when the server closed `fd`: the next read sees end of stream or a
// reset, within the bound.
bool closedByServer(int fd) {
    char byte;
    size_t got = 0;
    bool closed = false;
    Status s = recvAll(fd, &byte, 1, deadlineIn(kBoundMs), &got, &closed);
    return closed || s.message() == "recv failed: Connection reset by peer";
}

// A StreamServer whose requests are one byte, echoed, except two:
//   'w'  the handler waits until release() (keeps its connection busy
//        without reading);
//   'l'  a 4-byte request ('l' and three more), answered with its last
//        byte: a request a client can send slowly.
class EchoServer {
 public:
    explicit EchoServer(ServerLimits limits,
                        StreamServer::IdleHook idle_hook = nullptr) {
        limits.key_prefix = "test";
        server_ = std::make_unique<StreamServer>(
            "EchoServer",
            [this](const StreamServer::Connection& c, Deadline deadline) {
                char byte;
                if (!recvAll(c.fd, &byte, 1, deadline).ok()) return false;
                char rest[3];
                if (byte == 'l') {
                    if (!recvAll(c.fd, rest, 3, deadline).ok()) return false;
                    byte = rest[2];
                }
                if (byte == 'w') {
                    std::unique_lock<std::mutex> lock(mu_);
                    ++waiting_;
                    cv_.notify_all();
                    cv_.wait_until(lock, deadline, [&] { return released_; });
                }
                return sendAll(c.fd, &byte, 1, deadline).ok();
            });
        if (idle_hook) server_->setIdleHookForTest(std::move(idle_hook));
        int fd = -1;
        EXPECT_TRUE(listenOn(0, fd, port_).ok());
        EXPECT_TRUE(server_->start(fd, limits).ok());
    }
    ~EchoServer() {
        release();
        server_->stop();
    }
    uint16_t port() const { return port_; }
    StreamServer& server() { return *server_; }
    void release() {
        std::lock_guard<std::mutex> lock(mu_);
        released_ = true;
        cv_.notify_all();
    }
    bool waitForWaiters(int n) {
        std::unique_lock<std::mutex> lock(mu_);
        return cv_.wait_for(lock, std::chrono::milliseconds(kBoundMs),
                            [&] { return waiting_ >= n; });
    }
    // Polls the stats until `pred` holds: the server offers no event for
    // these counters, and the bound turns a miss into a failure.
    template <typename Pred>
    bool waitForStats(Pred pred) {
        return testing::waitUntil([&] { return pred(server_->stats()); },
                                  std::chrono::milliseconds(kBoundMs));
    }

 private:
    std::unique_ptr<StreamServer> server_;
    uint16_t port_ = 0;
    std::mutex mu_;
    std::condition_variable cv_;
    bool released_ = false;
    int waiting_ = 0;
};

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

// What getsockopt(SO_SNDBUF) reads after setSendBuffer(bytes): the kernel
// clamps the request to net.core.wmem_max and doubles it.
int expectedSendBuffer(int bytes) {
    FILE* f = std::fopen("/proc/sys/net/core/wmem_max", "r");
    long wmem_max = 0;
    if (f != nullptr) {
        if (std::fscanf(f, "%ld", &wmem_max) != 1) wmem_max = 0;
        std::fclose(f);
    }
    EXPECT_GT(wmem_max, 0) << "cannot read net.core.wmem_max";
    return 2 * static_cast<int>(std::min<long>(bytes, wmem_max));
}

int sendBufferOf(int fd) {
    int value = 0;
    socklen_t len = sizeof(value);
    EXPECT_EQ(::getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &value, &len), 0);
    return value;
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

TEST(NetServerTest, AcceptedSocketsGetTheConfiguredSendBuffer) {
    for (int bytes : {0, 80 * 1024}) {
        ServerLimits limits;
        limits.send_buffer_bytes = bytes;
        std::mutex mu;
        std::vector<int> seen;
        EchoServer echo(limits, [&](const StreamServer::Connection& c) {
            std::lock_guard<std::mutex> lock(mu);
            seen.push_back(sendBufferOf(c.fd));
        });
        int fd = connectLoopback(echo.port());
        const int dialled = sendBufferOf(fd);  // the kernel's, untouched
        // The hook ran before the server waited for this request.
        EXPECT_EQ(roundTrip(fd, 'x'), "x");
        ::close(fd);
        std::lock_guard<std::mutex> lock(mu);
        ASSERT_FALSE(seen.empty());
        if (bytes == 0)
            EXPECT_EQ(seen.front(), dialled) << "autotuned, as when dialled";
        else
            EXPECT_EQ(seen.front(), expectedSendBuffer(bytes));
    }
}

TEST(NetServerTest, AnIdleConnectionIsClosedAtTheIdleDeadline) {
    ServerLimits limits;
    limits.idle_timeout_ms = 100;
    EchoServer echo(limits);
    int fd = connectLoopback(echo.port());
    // Taken before the request: the server's idle clock starts after it.
    auto started = Clock::now();
    EXPECT_EQ(roundTrip(fd, 'a'), "a");
    EXPECT_TRUE(closedByServer(fd));
    auto took = Clock::now() - started;
    EXPECT_GE(took, std::chrono::milliseconds(100));
    // And at that deadline, not at another: the frame deadline (10 s by
    // default) or the test's bound would close it far later. The slack is
    // for a loaded machine under a sanitizer.
    EXPECT_LT(took, std::chrono::milliseconds(100 + 2000))
        << std::chrono::duration_cast<std::chrono::milliseconds>(took).count()
        << " ms";
    EXPECT_TRUE(echo.waitForStats([](const StreamServer::Stats& s) {
        return s.idle_closed == 1 && s.open == 0;
    }));
    ::close(fd);
}

TEST(NetServerTest, ATricklerIsDroppedAtTheFrameDeadlineOthersAreServed) {
    ServerLimits limits;
    limits.frame_timeout_ms = 300;
    EchoServer echo(limits);
    int good = connectLoopback(echo.port());
    EXPECT_EQ(roundTrip(good, 'a'), "a");
    int slow = connectLoopback(echo.port());
    // One byte of the 4-byte request every 200 ms: each byte alone is
    // well within any per-read bound, the whole request is not.
    std::atomic<bool> stop{false};
    std::thread trickler([&] {
        for (char c : std::string("lxyz")) {
            if (stop.load() || ::send(slow, &c, 1, MSG_NOSIGNAL) != 1) return;
            std::this_thread::sleep_for(std::chrono::milliseconds(200));
        }
    });
    for (char c : std::string("abcde")) {
        EXPECT_EQ(roundTrip(good, c), std::string(1, c));
    }
    EXPECT_TRUE(closedByServer(slow));
    stop = true;
    trickler.join();
    EXPECT_EQ(roundTrip(good, '!'), "!");
    // The trickler's connection is counted closed on the server's thread,
    // after the client saw it close.
    EXPECT_TRUE(echo.waitForStats([](const StreamServer::Stats& s) {
        return s.open == 1u;
    })) << echo.server().stats().open
        << " open";
    ::close(slow);
    ::close(good);
}

TEST(NetServerTest, AtMaxConnectionsTheLongestIdleIsClosedToAdmitANewcomer) {
    ServerLimits limits;
    limits.max_connections = 2;
    EchoServer echo(limits);
    int first = connectLoopback(echo.port());
    EXPECT_EQ(roundTrip(first, '1'), "1");
    int second = connectLoopback(echo.port());
    EXPECT_EQ(roundTrip(second, '2'), "2");
    // A handler thread marks its connection idle just after its reply left,
    // so the client can be faster than that; until both are idle, a
    // newcomer would be refused instead.
    ASSERT_TRUE(echo.waitForStats(
        [](const StreamServer::Stats& s) { return s.idle == 2; }));
    int third = connectLoopback(echo.port());
    EXPECT_EQ(roundTrip(third, '3'), "3");
    EXPECT_TRUE(closedByServer(first));
    EXPECT_EQ(roundTrip(second, 'b'), "b");
    EXPECT_TRUE(echo.waitForStats([](const StreamServer::Stats& s) {
        return s.accepted == 3u && s.evicted == 1u;
    }));
    StreamServer::Stats stats = echo.server().stats();
    EXPECT_EQ(stats.accepted, 3u);
    EXPECT_EQ(stats.evicted, 1u);
    EXPECT_EQ(stats.refused, 0u);
    ::close(first);
    ::close(second);
    ::close(third);
}

// The local end of `fd`, named as the server names its peer.
std::string localName(int fd) {
    sockaddr_in addr{};
    socklen_t len = sizeof(addr);
    EXPECT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
    return addressName(addr);
}

TEST(NetServerTest, AtMaxConnectionsARequestWaitingUnreadIsNotEvicted) {
    // The longest-idle connection has been sent a request its thread has
    // not read yet (held below at the top of its idle wait). Its client is
    // waiting for an answer; the newcomer displaces the other, truly idle
    // connection instead.
    std::mutex mu;
    std::condition_variable cv;
    std::map<std::string, int> passes;  // idle passes per connection
    std::string hold_peer;  // held at its second pass; "" holds nobody
    int held_fd = -1;
    StreamServer::IdleHook hook = [&](const StreamServer::Connection& c) {
        std::unique_lock<std::mutex> lock(mu);
        // The first pass, right after accept, may come before the test
        // names the peer; the second follows its first answer.
        if (++passes[c.peer] != 2 || c.peer != hold_peer) return;
        held_fd = c.fd;
        cv.notify_all();
        cv.wait(lock, [&] { return hold_peer.empty(); });
    };
    auto release = [&] {
        std::lock_guard<std::mutex> lock(mu);
        hold_peer.clear();
        cv.notify_all();
    };
    ServerLimits limits;
    limits.max_connections = 2;
    EchoServer echo(limits, hook);
    // Destroyed before `echo`, whose stop() joins the held thread: a failed
    // assertion below must not leave it held.
    struct ReleaseOnExit {
        std::function<void()> release;
        ~ReleaseOnExit() { release(); }
    } release_on_exit{release};
    int first = connectLoopback(echo.port());
    int second = connectLoopback(echo.port());
    {
        std::lock_guard<std::mutex> lock(mu);
        hold_peer = localName(first);
    }
    // After this answer `first` turns idle and its thread stops in the hook;
    // `second` turns idle later, so `first` is the longest idle.
    EXPECT_EQ(roundTrip(first, '1'), "1");
    {
        std::unique_lock<std::mutex> lock(mu);
        ASSERT_TRUE(cv.wait_for(lock, std::chrono::milliseconds(kBoundMs),
                                [&] { return held_fd >= 0; }));
    }
    EXPECT_EQ(roundTrip(second, '2'), "2");
    ASSERT_TRUE(echo.waitForStats(
        [](const StreamServer::Stats& s) { return s.idle == 2; }));
    char request = 'c';
    ASSERT_EQ(::send(first, &request, 1, MSG_NOSIGNAL), 1);
    // Arrived on the server's end, unread: the held thread cannot read it.
    ASSERT_TRUE(echo.waitForStats([&](const StreamServer::Stats&) {
        int pending = 0;
        return ::ioctl(held_fd, FIONREAD, &pending) == 0 && pending == 1;
    }));
    int third = connectLoopback(echo.port());
    EXPECT_EQ(roundTrip(third, '3'), "3");
    EXPECT_TRUE(closedByServer(second));
    release();
    char answer = 0;
    EXPECT_TRUE(recvAll(first, &answer, 1, deadlineIn(kBoundMs)).ok());
    EXPECT_EQ(answer, 'c');
    EXPECT_TRUE(echo.waitForStats(
        [](const StreamServer::Stats& s) { return s.evicted == 1u; }));
    StreamServer::Stats stats = echo.server().stats();
    EXPECT_EQ(stats.evicted, 1u);
    EXPECT_EQ(stats.refused, 0u);
    ::close(first);
    ::close(second);
    ::close(third);
}

TEST(NetServerTest, AtMaxConnectionsWithNoneIdleTheNewcomerIsRefused) {
    ServerLimits limits;
    limits.max_connections = 1;
    EchoServer echo(limits);
    int busy = connectLoopback(echo.port());
    ASSERT_TRUE(sendAll(busy, "w", 1, deadlineIn(kBoundMs)).ok());
    ASSERT_TRUE(echo.waitForWaiters(1));
    int late = connectLoopback(echo.port());
    EXPECT_TRUE(closedByServer(late));
    EXPECT_TRUE(echo.waitForStats(
        [](const StreamServer::Stats& s) { return s.refused == 1u; }));
    EXPECT_EQ(echo.server().stats().refused, 1u);
    echo.release();
    char byte = 0;
    ASSERT_TRUE(recvAll(busy, &byte, 1, deadlineIn(kBoundMs)).ok());
    EXPECT_EQ(byte, 'w');
    ::close(busy);
    ::close(late);
}

TEST(NetServerTest, AcceptBacksOffWhileOutOfDescriptors) {
    EchoServer echo(ServerLimits{});
    // The client socket exists before the table fills; connecting needs no
    // new descriptor, accepting it does.
    int client = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ASSERT_GE(client, 0);
    rlimit old{};
    ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &old), 0);
    rlimit low = old;
    low.rlim_cur = 256;
    ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &low), 0);
    std::vector<int> filler;
    for (int fd; (fd = ::dup(client)) >= 0;) filler.push_back(fd);
    ASSERT_EQ(errno, EMFILE);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(echo.port());
    ASSERT_EQ(
        ::connect(client, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    // The listener may fail its first accept (and start its first rest)
    // before connect() returns here, so `started` can miss the first rest;
    // it is before the second, which begins a full rest after the first.
    auto started = Clock::now();
    bool backed_off = echo.waitForStats(
        [](const StreamServer::Stats& s) { return s.accept_backoffs >= 4; });
    auto took = Clock::now() - started;
    uint64_t backoffs = echo.server().stats().accept_backoffs;
    for (int fd : filler) ::close(fd);
    ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &old), 0);
    ASSERT_TRUE(backed_off);
    // The second and the fourth failed accept are at least two full rests
    // apart; a loop that spun would have failed thousands of times in that
    // time.
    EXPECT_GE(took, std::chrono::milliseconds(2 * kAcceptBackoffMs));
    auto elapsed_ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(took).count();
    EXPECT_LE(backoffs,
              static_cast<uint64_t>(elapsed_ms / kAcceptBackoffMs + 2));
    // Descriptors are back: the waiting client is accepted and served.
    EXPECT_EQ(roundTrip(client, 'z'), "z");
    ::close(client);
}

TEST(NetServerTest, StopReturnsWithBusyAndIdleConnectionsOpen) {
    ServerLimits limits;
    limits.frame_timeout_ms = 600000;
    auto echo = std::make_unique<EchoServer>(limits);
    int idle = connectLoopback(echo->port());
    EXPECT_EQ(roundTrip(idle, 'i'), "i");
    int busy = connectLoopback(echo->port());
    // Half a request: the handler sits in recv() under a 600 s deadline.
    ASSERT_TRUE(sendAll(busy, "lx", 2, deadlineIn(kBoundMs)).ok());
    ASSERT_TRUE(echo->waitForStats(
        [](const StreamServer::Stats& s) { return s.accepted == 2; }));
    auto started = Clock::now();
    echo->server().stop();
    EXPECT_LT(Clock::now() - started, std::chrono::milliseconds(kBoundMs));
    EXPECT_TRUE(closedByServer(idle));
    EXPECT_TRUE(closedByServer(busy));
    ::close(idle);
    ::close(busy);
}

}  // namespace
}  // namespace mooncake::tent::net
