// Shared pieces of the hostile-peer suites (rpc_hostile_test.cpp,
// tcp_hostile_test.cpp): a well-behaved client that keeps working in the
// background and counts its byte-exact successes, raw sockets for the
// abusive ones, and the process's resident memory.
#pragma once

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "net/socket_io.h"

namespace mooncake::tent::testing {

// Only turns a hang into a failure.
constexpr int kHostileBoundMs = 30000;

// How much VmRSS may grow while the hostile clients do their worst: thread
// stacks and allocator slack, plus, under a sanitizer, its per-thread
// state and shadow (TSan alone adds ~50 MiB for a few dozen threads). Far
// below what one honoured 60 MiB length prefix costs per connection.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr uint64_t kRssSlackBytes = 192ull << 20;
#else
constexpr uint64_t kRssSlackBytes = 32ull << 20;
#endif

// VmRSS (or, with key "VmHWM:", its peak) of this process, in bytes (0
// when /proc is unreadable).
inline uint64_t residentBytes(const std::string& which = "VmRSS:") {
    std::ifstream status("/proc/self/status");
    std::string key;
    while (status >> key) {
        if (key == which) {
            uint64_t kib = 0;
            status >> kib;
            return kib << 10;
        }
        std::getline(status, key);
    }
    return 0;
}

// Starts the peak (VmHWM) over at the current VmRSS; false where the
// kernel does not allow it.
inline bool resetPeakResident() {
    std::ofstream clear("/proc/self/clear_refs");
    clear << "5";
    clear.flush();
    return clear.good();
}

// Runs `step` in a loop on its own thread until destroyed. A step returns
// "" when it did its work byte-exact, else what went wrong; the first
// failure is kept for the report. `pace` spaces the rounds, so a client
// that opens a connection per round does not run the host out of
// ephemeral ports (TIME_WAIT).
class WellBehavedClient {
 public:
    explicit WellBehavedClient(
        std::function<std::string(uint64_t round)> step,
        std::chrono::milliseconds pace = std::chrono::milliseconds(0))
        : step_(std::move(step)), pace_(pace), thread_([this] { run(); }) {}
    ~WellBehavedClient() {
        stop_ = true;
        thread_.join();
    }
    uint64_t successes() {
        std::lock_guard<std::mutex> lock(mu_);
        return ok_;
    }
    uint64_t failures() {
        std::lock_guard<std::mutex> lock(mu_);
        return failed_;
    }
    std::string firstFailure() {
        std::lock_guard<std::mutex> lock(mu_);
        return first_failure_;
    }
    // Waits until `n` more steps succeeded than when called: proof that
    // the client kept being served while whatever the caller set up was in
    // place. False when the bound passed first.
    bool waitForMore(uint64_t n) {
        std::unique_lock<std::mutex> lock(mu_);
        uint64_t target = ok_ + n;
        return cv_.wait_for(lock, std::chrono::milliseconds(kHostileBoundMs),
                            [&] { return ok_ >= target; });
    }

 private:
    void run() {
        for (uint64_t round = 0; !stop_.load(); ++round) {
            std::string error = step_(round);
            {
                std::lock_guard<std::mutex> lock(mu_);
                if (error.empty()) {
                    ++ok_;
                } else {
                    ++failed_;
                    if (first_failure_.empty()) first_failure_ = error;
                }
                cv_.notify_all();
            }
            std::this_thread::sleep_for(pace_);
        }
    }

    std::function<std::string(uint64_t)> step_;
    const std::chrono::milliseconds pace_;
    std::atomic<bool> stop_{false};
    std::mutex mu_;
    std::condition_variable cv_;
    uint64_t ok_ = 0, failed_ = 0;
    std::string first_failure_;
    std::thread thread_;  // last: starts once the rest is constructed
};

// The end of every hostile-peer test: stops `client` (its last round
// done), then expects that it never failed and that VmRSS grew less than
// kRssSlackBytes since `rss_before`, i.e. nothing a hostile client
// announced was allocated.
inline void expectWellBehavedClientUnharmed(
    std::unique_ptr<WellBehavedClient>& client, uint64_t rss_before) {
    uint64_t failures = client->failures();
    std::string first = client->firstFailure();
    client.reset();
    EXPECT_EQ(failures, 0u) << first;
    uint64_t rss_after = residentBytes();
    EXPECT_LT(rss_after, rss_before + kRssSlackBytes)
        << "VmRSS grew from " << rss_before << " to " << rss_after;
}

inline int rawConnect(uint16_t port) {
    int fd = -1;
    Status s =
        net::connectTo("127.0.0.1", port, net::deadlineIn(kHostileBoundMs), fd);
    EXPECT_TRUE(s.ok()) << s;
    return fd;
}

inline bool rawSend(int fd, const std::string& bytes) {
    return net::sendAll(fd, bytes.data(), bytes.size(),
                        net::deadlineIn(kHostileBoundMs))
        .ok();
}

// Reads until the server closes the connection; returns what arrived
// (an error reply, say). Sets `closed` false when the bound passed first.
inline std::string drainUntilClosed(int fd, bool& closed) {
    std::string out;
    char buf[4096];
    net::Deadline deadline = net::deadlineIn(kHostileBoundMs);
    for (;;) {
        size_t got = 0;
        bool eof = false;
        Status s = net::recvAll(fd, buf, sizeof(buf), deadline, &got, &eof);
        out.append(buf, got);
        if (s.ok()) continue;
        closed = eof || s.message() == "recv failed: Connection reset by peer";
        return out;
    }
}

inline std::string randomBytes(std::mt19937_64& rng, size_t n) {
    std::string s(n, '\0');
    for (char& c : s) c = static_cast<char>(rng());
    return s;
}

// A client that sends `bytes` one at a time, one per `interval`, on its
// own thread: the pace is the abuse under test, not a synchronisation. It
// stops at the first failed send (the server cut it off) or when
// destroyed.
class Trickler {
 public:
    Trickler(int fd, std::string bytes, std::chrono::milliseconds interval)
        : fd_(fd),
          bytes_(std::move(bytes)),
          interval_(interval),
          thread_([this] { run(); }) {}
    ~Trickler() { stop(); }
    void stop() {
        stop_ = true;
        if (thread_.joinable()) thread_.join();
    }
    size_t sent() const { return sent_.load(); }

 private:
    void run() {
        for (char c : bytes_) {
            if (stop_.load() || ::send(fd_, &c, 1, MSG_NOSIGNAL) != 1) return;
            ++sent_;
            std::this_thread::sleep_for(interval_);
        }
    }

    const int fd_;
    const std::string bytes_;
    const std::chrono::milliseconds interval_;
    std::atomic<bool> stop_{false};
    std::atomic<size_t> sent_{0};
    std::thread thread_;  // last: starts once the rest is constructed
};

// Opens `count` connections that never send a byte, while `client` keeps
// being served, and checks that every one of them ends (evicted for a
// newcomer or closed at the idle deadline) and that the client is still
// served afterwards.
inline void floodWithIdleConnections(uint16_t port, int count,
                                     WellBehavedClient& client) {
    std::vector<int> idle;
    for (int i = 0; i < count; ++i) idle.push_back(rawConnect(port));
    ASSERT_TRUE(client.waitForMore(5));
    for (int fd : idle) {
        bool closed = false;
        drainUntilClosed(fd, closed);
        EXPECT_TRUE(closed);
        ::close(fd);
    }
    ASSERT_TRUE(client.waitForMore(3));
}

}  // namespace mooncake::tent::testing
