// ProgressWorker (private header): with enable_progress_worker, a thread
// that drives every live batch (its tasks' status and their failover)
// without a polling application.
//
// Transports here have no completion callback into the engine, so the
// worker polls: every progress_worker/interval_us it visits the batches
// still allocated, pinning each by its current generation (a batch freed
// or reused meanwhile is simply not the one it visits), and reads each of
// their unsettled tasks with failover on. A batch it finds settled costs a
// load per task.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

namespace mooncake::tent {

class ProgressWorker {
 public:
    static constexpr int kDefaultIntervalUs = 1000;
    static constexpr int kMaxIntervalUs = 1000000;

    // `step` is one pass over the live batches.
    ProgressWorker(std::chrono::microseconds interval,
                   std::function<void()> step);
    ~ProgressWorker();
    ProgressWorker(const ProgressWorker&) = delete;
    ProgressWorker& operator=(const ProgressWorker&) = delete;

    void start();
    // Idempotent; returns once the thread has left its last pass.
    void stop();

 private:
    void run();

    const std::chrono::microseconds interval_;
    const std::function<void()> step_;
    std::mutex mu_;
    std::condition_variable cv_;
    bool running_ = false;
    std::thread thread_;
};

}  // namespace mooncake::tent
