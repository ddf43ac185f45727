// TcpStager: pipelined staging of device memory through pinned host
// buffers (see tcp_stager.h for the rules).
#include "transport/tcp/tcp_stager.h"

#include <glog/logging.h>
#include <pthread.h>

#include <algorithm>

namespace mooncake::tent {

// One overlapped copy. The caller that submitted it owns `stage` again
// once await() returns it done; a caller that gave up waiting hands the
// stage to the job, whose copier returns it to the pool when it is done.
struct TcpStager::Job {
    void* dst = nullptr;
    const void* src = nullptr;
    uint64_t length = 0;
    char* stage = nullptr;
    bool done = false;      // guarded by mu_
    bool orphaned = false;  // guarded by mu_
    Status result;          // valid once done
};

TcpStager::TcpStager(std::shared_ptr<Platform> platform, uint64_t pool_bytes,
                     uint64_t slice_bytes, int copiers)
    : platform_(std::move(platform)),
      slice_bytes_(slice_bytes),
      max_buffers_(std::max<uint64_t>(1, pool_bytes / slice_bytes)) {
    for (int i = 0; i < std::max(1, copiers); ++i) {
        copiers_.emplace_back(&TcpStager::copierLoop, this);
    }
}

TcpStager::~TcpStager() {
    {
        std::lock_guard<std::mutex> lock(mu_);
        stopping_ = true;
    }
    jobs_cv_.notify_all();
    for (std::thread& t : copiers_) t.join();
    for (char* stage : all_) {
        Status s = platform_->free(stage, slice_bytes_, "cpu:0");
        LOG_IF(WARNING, !s.ok())
            << "TcpStager: freeing a staging buffer: " << s;
    }
}

TcpStager::Stats TcpStager::stats() const {
    Stats out;
    out.slices = slices_.load();
    out.pipelined = pipelined_.load();
    std::lock_guard<std::mutex> lock(mu_);
    out.buffers = all_.size();
    return out;
}

char* TcpStager::acquire(bool wait, net::Deadline deadline) {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
        if (!free_.empty()) {
            char* stage = free_.back();
            free_.pop_back();
            return stage;
        }
        if (all_.size() < max_buffers_) {
            void* mem = nullptr;
            Status s = platform_->allocate(&mem, slice_bytes_, "cpu:0");
            if (!s.ok()) {
                LOG(WARNING) << "TcpStager: cannot allocate a staging buffer "
                                "of "
                             << slice_bytes_ << " bytes: " << s;
                return nullptr;
            }
            all_.push_back(static_cast<char*>(mem));
            return static_cast<char*>(mem);
        }
        if (!wait) return nullptr;
        if (pool_cv_.wait_until(lock, deadline) == std::cv_status::timeout &&
            free_.empty()) {
            return nullptr;
        }
    }
}

void TcpStager::release(char* stage) {
    if (!stage) return;
    {
        std::lock_guard<std::mutex> lock(mu_);
        free_.push_back(stage);
    }
    pool_cv_.notify_one();
}

std::shared_ptr<TcpStager::Job> TcpStager::submit(void* dst, const void* src,
                                                  uint64_t length,
                                                  char* stage) {
    auto job = std::make_shared<Job>();
    job->dst = dst;
    job->src = src;
    job->length = length;
    job->stage = stage;
    {
        std::lock_guard<std::mutex> lock(mu_);
        jobs_.push_back(job);
    }
    jobs_cv_.notify_one();
    return job;
}

Status TcpStager::await(const std::shared_ptr<Job>& job,
                        net::Deadline deadline) {
    std::unique_lock<std::mutex> lock(mu_);
    if (!done_cv_.wait_until(lock, deadline, [&] { return job->done; })) {
        job->orphaned = true;
        return Status::InternalError(
            "staging copy of " + std::to_string(job->length) +
            " bytes did not finish within the transfer's timeout");
    }
    return job->result;
}

void TcpStager::copierLoop() {
    pthread_setname_np(pthread_self(), "tent-tcp-stage");
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
        jobs_cv_.wait(lock, [&] { return stopping_ || !jobs_.empty(); });
        if (jobs_.empty()) return;  // stopping, and nothing left to copy
        std::shared_ptr<Job> job = jobs_.front();
        jobs_.pop_front();
        lock.unlock();
        Status s = platform_->copy(job->dst, job->src, job->length);
        lock.lock();
        job->result = s;
        job->done = true;
        if (job->orphaned) {
            free_.push_back(job->stage);
            pool_cv_.notify_one();
        }
        done_cv_.notify_all();
    }
}

namespace {

Status noStagingBuffer(uint64_t length) {
    return Status::TooManyRequests(
        "no staging buffer for " + std::to_string(length) +
        " bytes of device memory came free within the transfer's timeout "
        "(transports/tcp/staging_pool_bytes bounds them)");
}

}  // namespace

Status TcpStager::send(int fd, const char* src, uint64_t length,
                       net::Deadline deadline,
                       const std::function<bool()>& keep_going) {
    if (length == 0) return Status::OK();
    char* a = acquire(true, deadline);
    if (!a) return noStagingBuffer(length);
    // The second buffer only if free now: see tcp_stager.h.
    char* b = length > slice_bytes_ ? acquire(false, deadline) : nullptr;
    uint64_t off = 0;
    uint64_t n = std::min(slice_bytes_, length);
    Status s = platform_->copy(a, src, n);
    if (s.ok()) ++slices_;
    while (s.ok()) {
        const uint64_t next = off + n;
        const uint64_t next_n =
            next < length ? std::min(slice_bytes_, length - next) : 0;
        std::shared_ptr<Job> job;
        if (next_n > 0 && b) {
            job = submit(b, src + next, next_n, b);
            ++pipelined_;
        }
        s = net::sendAll(fd, a, n, deadline);
        if (job) {
            Status copied = await(job, deadline);
            if (job->orphaned) b = nullptr;  // the copier returns it
            if (s.ok()) s = copied;
        }
        if (!s.ok() || next_n == 0) break;
        if (keep_going && !keep_going()) {
            s = Status::InvalidArgument("staged send stopped after " +
                                        std::to_string(next) + " of " +
                                        std::to_string(length) + " bytes");
            break;
        }
        if (job) {
            std::swap(a, b);
        } else {
            s = platform_->copy(a, src + next, next_n);
        }
        if (s.ok()) ++slices_;
        off = next;
        n = next_n;
    }
    release(a);
    release(b);
    return s;
}

Status TcpStager::recv(int fd, char* dst, uint64_t length,
                       net::Deadline deadline,
                       const std::function<bool()>& keep_going,
                       uint64_t* stored) {
    if (stored) *stored = 0;
    if (length == 0) return Status::OK();
    char* a = acquire(true, deadline);
    if (!a) return noStagingBuffer(length);
    char* b = length > slice_bytes_ ? acquire(false, deadline) : nullptr;
    uint64_t off = 0;
    uint64_t done = 0;
    // The copy of the previous slice out of its stage, overlapping this
    // slice's receive.
    std::shared_ptr<Job> pending;
    uint64_t pending_n = 0;
    Status s;
    auto settlePending = [&]() {
        Status copied = await(pending, deadline);
        if (pending->orphaned) {
            // The copier returns that stage; it is `b` after the swap.
            b = nullptr;
        } else if (copied.ok()) {
            done += pending_n;
        }
        pending.reset();
        return copied;
    };
    while (off < length) {
        const uint64_t n = std::min(slice_bytes_, length - off);
        s = net::recvPayload(fd, a, n, deadline);
        if (!s.ok()) break;
        if (pending) {
            s = settlePending();
            if (!s.ok()) break;
        }
        ++slices_;
        if (b) {
            pending = submit(dst + off, a, n, a);
            pending_n = n;
            if (off + n < length) ++pipelined_;
            std::swap(a, b);
        } else {
            s = platform_->copy(dst + off, a, n);
            if (!s.ok()) break;
            done += n;
        }
        off += n;
        if (off < length && keep_going && !keep_going()) break;
    }
    if (pending) {
        Status copied = settlePending();
        if (s.ok()) s = copied;
    }
    release(a);
    release(b);
    if (stored) *stored = done;
    return s;
}

}  // namespace mooncake::tent
