// Bounded waits for the suites: state with no event to wait on (server
// counters, thread counts, a flag another thread sets) is polled until it
// holds or the bound passes, so a miss fails with a message instead of
// being read too early or hanging until ctest's timeout.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <thread>

namespace mooncake::tent::testing {

// Long enough for a loaded 2-core machine under TSan; a hang, not a slow
// step, is what the bound is for.
constexpr std::chrono::milliseconds kWaitBound{10000};

// Polls `pred` until it returns true (then true) or `bound` has passed
// (then false, after one last look). The one bounded poll of the suites:
// pass a bound of your own where kWaitBound does not fit the wait.
template <typename Pred>
bool waitUntil(Pred pred, std::chrono::milliseconds bound = kWaitBound) {
    const auto deadline = std::chrono::steady_clock::now() + bound;
    while (!pred()) {
        if (std::chrono::steady_clock::now() >= deadline) return pred();
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return true;
}

// A thread whose join is bounded. A thread that does not finish in time
// cannot be left behind (it uses the test's stack), so the process ends
// with the message and a failing status instead of hanging.
class BoundedThread {
 public:
    BoundedThread(const char* what, std::function<void()> body) : what_(what) {
        thread_ = std::thread([this, body = std::move(body)] {
            body();
            std::lock_guard<std::mutex> lock(mu_);
            done_ = true;
            cv_.notify_all();
        });
    }
    BoundedThread(const BoundedThread&) = delete;
    BoundedThread& operator=(const BoundedThread&) = delete;
    ~BoundedThread() { join(); }

    void join(std::chrono::milliseconds bound = kWaitBound) {
        if (!thread_.joinable()) return;
        std::unique_lock<std::mutex> lock(mu_);
        if (!cv_.wait_for(lock, bound, [this] { return done_; })) {
            std::fprintf(stderr, "%s did not finish within %lld ms\n", what_,
                         static_cast<long long>(bound.count()));
            std::abort();
        }
        lock.unlock();
        thread_.join();
    }

 private:
    const char* what_;
    std::mutex mu_;
    std::condition_variable cv_;
    bool done_ = false;
    std::thread thread_;
};

}  // namespace mooncake::tent::testing
