// TcpStager: moves device memory over a socket through pinned host
// buffers (private to the TCP transport).
//
// Sockets read and write host memory only, so device bytes are copied
// into a staging buffer before a send and out of one after a receive, in
// slices of `slice_bytes`. The copies are pipelined: while slice k is on
// the wire, a copier thread moves slice k+1 (send: device to stage) or
// slice k-1 (receive: stage to device), so a transfer costs about the
// slower of the two, not their sum.
//
// The pool is bounded: at most pool_bytes / slice_bytes staging buffers
// exist (allocated on first use through the platform, which pins them
// where it can). A transfer waits (bounded by its deadline) only for its
// first buffer; a second one, which lets it overlap, is taken only if free
// at once. So no transfer holds one buffer while waiting for another, and
// transfers cannot starve each other into a deadlock; with a pool of one
// buffer, staging still works, just without overlap.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "net/socket_io.h"
#include "tent/common/status.h"
#include "tent/runtime/platform.h"

namespace mooncake::tent {

class TcpStager {
 public:
    struct Stats {
        uint64_t slices = 0;     // slices copied through a staging buffer
        uint64_t pipelined = 0;  // of them, copied while another was on the
                                 // wire
        uint64_t buffers = 0;    // staging buffers allocated (<= the bound)
    };

    // `copiers` threads run the overlapped copies.
    TcpStager(std::shared_ptr<Platform> platform, uint64_t pool_bytes,
              uint64_t slice_bytes, int copiers);
    ~TcpStager();
    TcpStager(const TcpStager&) = delete;
    TcpStager& operator=(const TcpStager&) = delete;

    // Sends `length` bytes of device memory at `src` on `fd`. After each
    // slice but the last, `keep_going` (when set) is asked; once it says
    // no, the send stops with Aborted-like InvalidArgument naming how far
    // it got (the peer was promised every byte, so the caller drops the
    // connection).
    Status send(int fd, const char* src, uint64_t length,
                net::Deadline deadline,
                const std::function<bool()>& keep_going = nullptr);
    // Receives `length` bytes from `fd` into device memory at `dst`. After
    // each slice `keep_going` (when set) is asked; once it says no, the
    // rest of the payload is left unread and `stored` tells how many bytes
    // reached `dst`.
    Status recv(int fd, char* dst, uint64_t length, net::Deadline deadline,
                const std::function<bool()>& keep_going = nullptr,
                uint64_t* stored = nullptr);

    Stats stats() const;
    uint64_t sliceBytes() const { return slice_bytes_; }

 private:
    struct Job;
    class Lease;

    // A staging buffer: waits up to `deadline` when `wait`, else only
    // takes one that is free now. nullptr when none came.
    char* acquire(bool wait, net::Deadline deadline);
    void release(char* stage);
    std::shared_ptr<Job> submit(void* dst, const void* src, uint64_t length,
                                char* stage);
    Status await(const std::shared_ptr<Job>& job, net::Deadline deadline);
    void copierLoop();

    std::shared_ptr<Platform> platform_;
    const uint64_t slice_bytes_;
    const uint64_t max_buffers_;

    mutable std::mutex mu_;
    std::condition_variable pool_cv_;
    std::condition_variable jobs_cv_;
    std::condition_variable done_cv_;
    std::vector<char*> free_;
    std::vector<char*> all_;
    std::deque<std::shared_ptr<Job>> jobs_;
    bool stopping_ = false;
    std::vector<std::thread> copiers_;

    std::atomic<uint64_t> slices_{0};
    std::atomic<uint64_t> pipelined_{0};
};

}  // namespace mooncake::tent
