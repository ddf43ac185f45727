// src/net: the StreamServer limits every listener in libtent shares
// (idle and frame deadlines, the connection cap, send buffers, running
// out of descriptors, stopping).
#include <gtest/gtest.h>

#include <set>

#include "kit/proc_probe.h"
#include "net/net_test_support.h"

namespace mooncake::tent::net {
namespace {

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

TEST(NetServerTest, IdleConnectionsCostNoThreads) {
    ServerLimits limits;
    limits.server_threads = 3;
    const std::set<long> before = testing::threadIdsOf();
    EchoServer echo(limits);
    EXPECT_EQ(echo.server().stats().threads, 3u);
    // The pool, and nothing else, whatever the connections.
    EXPECT_EQ(testing::threadsStartedSince(before), 3u);
    std::vector<int> fds;
    for (int i = 0; i < 200; ++i) {
        fds.push_back(connectLoopback(echo.port()));
        ASSERT_GE(fds.back(), 0);
    }
    // Every one served once, then idle.
    for (int fd : fds) EXPECT_EQ(roundTrip(fd, 'i'), "i");
    ASSERT_TRUE(echo.waitForStats(
        [](const StreamServer::Stats& s) { return s.idle == 200; }));
    EXPECT_EQ(testing::threadsStartedSince(before), 3u);
    for (int fd : fds) ::close(fd);
}

// The error readServerLimits gives once `key` (under "test/") is set to
// each of `bad`, the rest of `conf` being valid.
void expectRefused(Config conf, const std::string& key,
                   std::initializer_list<int> bad, const std::string& range) {
    for (int value : bad) {
        conf.set("test/" + key, value);
        ServerLimits limits;
        EXPECT_EQ(readServerLimits(conf, "test", limits).message(),
                  "test/" + key + " must be in " + range + ", got " +
                      std::to_string(value));
    }
}

TEST(NetServerTest, ServerThreadsIsReadAndBounded) {
    Config conf;
    conf.set("test/server_threads", 7);
    ServerLimits limits;
    ASSERT_TRUE(readServerLimits(conf, "test", limits).ok());
    EXPECT_EQ(limits.server_threads, 7);
    expectRefused(conf, "server_threads", {0, 65}, "[1, 64]");
}

TEST(NetServerTest, LingerKeysAreReadAndBounded) {
    Config conf;
    conf.set("test/linger_us", 0);
    conf.set("test/linger_turn_ms", 3);
    ServerLimits limits;
    limits.linger_us = 500;
    ASSERT_TRUE(readServerLimits(conf, "test", limits).ok());
    EXPECT_EQ(limits.linger_us, 0);
    EXPECT_EQ(limits.linger_turn_ms, 3);
    expectRefused(conf, "linger_us", {-1, kMaxLingerUs + 1}, "[0, 100000]");
    expectRefused(conf, "linger_turn_ms", {0, 60001}, "[1, 60000]");
}

ServerLimits lingering(int server_threads, int linger_us, int turn_ms) {
    ServerLimits limits;
    limits.server_threads = server_threads;
    limits.linger_us = linger_us;
    limits.linger_turn_ms = turn_ms;
    return limits;
}

TEST(NetServerTest, AStreamingConnectionKeepsItsThread) {
    // A client that sends its next request as soon as it has the answer
    // meets the thread that answered it, lingering for it: no request but
    // the first goes through the event loop. With linger_us 0 every one
    // does.
    for (int linger_us : {kMaxLingerUs, 0}) {
        EchoServer echo(lingering(2, linger_us, 60000));
        int fd = connectLoopback(echo.port());
        constexpr int kRequests = 100;
        for (int i = 0; i < kRequests; ++i) {
            ASSERT_EQ(roundTrip(fd, 'a'), "a");
        }
        const uint64_t lingered = echo.server().stats().lingered;
        if (linger_us == 0) {
            EXPECT_EQ(lingered, 0u);
        } else {
            // Each next request is sent within microseconds of the answer;
            // only a client descheduled for the whole 100 ms linger (a
            // badly overloaded host) goes through the event loop.
            EXPECT_GE(lingered, kRequests - 5u);
            EXPECT_LE(lingered, kRequests - 1u);
        }
        ::close(fd);
    }
}

TEST(NetServerTest, AClientsCloseEndsTheLingerWithoutARequest) {
    // The thread lingering on a connection tells the client's close from
    // a request by the poll events alone (no read per request): a close
    // is not counted as a lingered request, and the connection goes.
    EchoServer echo(lingering(1, kMaxLingerUs, 60000));
    int fd = connectLoopback(echo.port());
    ASSERT_EQ(roundTrip(fd, 'a'), "a");
    ::close(fd);
    EXPECT_TRUE(echo.waitForStats(
        [](const StreamServer::Stats& s) { return s.open == 0; }));
    EXPECT_EQ(echo.server().stats().lingered, 0u);
}

TEST(NetServerTest, ARequestSentJustBeforeTheClientsCloseIsAnswered) {
    // The request and the close arrive together while the thread lingers:
    // the request is still served (through the event loop), then the
    // connection is closed.
    EchoServer echo(lingering(1, kMaxLingerUs, 60000));
    int fd = connectLoopback(echo.port());
    ASSERT_EQ(roundTrip(fd, 'a'), "a");
    char byte = 'b';
    ASSERT_EQ(::send(fd, &byte, 1, MSG_NOSIGNAL), 1);
    ASSERT_EQ(::shutdown(fd, SHUT_WR), 0);
    char back = 0;
    ASSERT_EQ(recvAll(fd, &back, 1, deadlineIn(kBoundMs)), Status::OK());
    EXPECT_EQ(back, 'b');
    EXPECT_TRUE(closedByServer(fd));
    ::close(fd);
}

TEST(NetServerTest, ASteadyConnectionHandsItsThreadBackEveryTurn) {
    // One thread, a 100 ms linger and a client that never pauses: without
    // linger_turn_ms it would keep the thread for as long as it streams,
    // and a second client would wait for it to stop.
    EchoServer echo(lingering(1, kMaxLingerUs, 5));
    int streaming = connectLoopback(echo.port());
    int other = connectLoopback(echo.port());
    ASSERT_EQ(roundTrip(streaming, 's'), "s");
    std::atomic<bool> stop{false}, stopped{false};
    std::thread streamer([&] {
        const auto until = std::chrono::steady_clock::now() +
                           std::chrono::milliseconds(kBoundMs);
        while (!stop && std::chrono::steady_clock::now() < until) {
            if (roundTrip(streaming, 's') != "s") break;
        }
        stopped = true;
    });
    EXPECT_EQ(roundTrip(other, 'o'), "o");
    // Answered while the other client still streamed.
    EXPECT_FALSE(stopped.load());
    stop = true;
    streamer.join();
    ::close(streaming);
    ::close(other);
}

}  // namespace
}  // namespace mooncake::tent::net
