// ProgressWorker: see progress_worker.h.
#include "runtime/progress_worker.h"

#include <glog/logging.h>

#include <utility>

namespace mooncake::tent {

ProgressWorker::ProgressWorker(std::chrono::microseconds interval,
                               std::function<void()> step)
    : interval_(interval), step_(std::move(step)) {}

ProgressWorker::~ProgressWorker() { stop(); }

void ProgressWorker::start() {
    std::lock_guard<std::mutex> lock(mu_);
    if (running_) return;
    running_ = true;
    thread_ = std::thread(&ProgressWorker::run, this);
    LOG(INFO) << "ProgressWorker started";
}

void ProgressWorker::stop() {
    {
        std::lock_guard<std::mutex> lock(mu_);
        if (!running_) return;
        running_ = false;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
}

void ProgressWorker::run() {
    std::unique_lock<std::mutex> lock(mu_);
    while (running_) {
        lock.unlock();
        step_();
        lock.lock();
        // Woken early only by stop().
        cv_.wait_for(lock, interval_, [this] { return !running_; });
    }
}

}  // namespace mooncake::tent
