// Task and sub-batch state of TcpTransport (private to it; the transport
// includes this header, not the other way round).
#pragma once

#include <algorithm>
#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "tent/runtime/transport.h"
#include "transport/tcp/tcp_admission.h"
#include "transport/tcp/tcp_wire.h"

namespace mooncake::tent {

// Shared between the sub-batch (status polls) and the worker that runs it,
// so freeing a sub-batch with a task in flight never frees the task under
// the worker.
struct TcpTask {
    Request request;
    // The target's descriptor (immutable once published), held so that the
    // two strings below stay valid without copying them for every request.
    SegmentDescRef desc;
    const std::string* endpoint = nullptr;  // "<host>:<port>" of its listener
    // The local side (request.source) is device memory: staged.
    bool local_device = false;
    const std::string& segment() const {  // its name, for log lines
        static const std::string unknown = "(unknown)";
        return desc ? desc->name : unknown;
    }
    // PENDING until the last of its slices is settled; release on that
    // store pairs with acquire in getTransferStatus() so the transferred
    // bytes (and a READ's payload) are visible once COMPLETED is seen.
    std::atomic<int> state{PENDING};
    // Bytes of the slices that completed.
    std::atomic<uint64_t> transferred{0};

    // Workers claim the request slice by slice (claimBytes() below), each
    // slice one frame on the worker that claimed it, in order, under the
    // transport's queue lock, which guards next_offset.
    uint64_t next_offset = 0;
    // Units not yet settled: the request's bytes, or 1 for an empty one.
    std::atomic<uint64_t> units_left{0};
    // Set by the first slice that fails; the slices claimed after it are
    // settled without touching the network.
    std::atomic<bool> failed{false};

    // Holds one task and its request's bytes of the process-wide
    // admission counts (tcp_admission.h) from submission until finish().
    // The exchange makes the release happen once, whichever final path
    // (completed, failed, cancelled, failed by uninstall) gets there.
    std::atomic<bool> admitted{false};

    ~TcpTask() { releaseAdmission(); }
    void releaseAdmission() {
        if (admitted.exchange(false, std::memory_order_relaxed)) {
            TcpAdmission::release(1, request.length);
        }
    }

    static uint64_t units(uint64_t bytes, uint64_t request_length) {
        return request_length == 0 ? 1 : bytes;
    }
    // Released before the state is published, so whoever sees the task
    // final also sees its share of the admission counts given back.
    void finish(TransferStatusEnum s) {
        releaseAdmission();
        state.store(s, std::memory_order_release);
    }
    // Settles `bytes` of the request; whoever settles the last of them
    // finishes the task. The acq_rel decrement orders every earlier
    // slice's bytes and `failed` before that final store.
    void settle(uint64_t bytes, bool ok) {
        if (!ok) failed.store(true, std::memory_order_relaxed);
        const uint64_t n = units(bytes, request.length);
        if (units_left.fetch_sub(n, std::memory_order_acq_rel) == n) {
            finish(failed.load(std::memory_order_relaxed) ? FAILED : COMPLETED);
        }
    }
};

// The slice a worker claims from a request with `remaining` bytes left.
// While other requests wait behind it, or no other worker is idle, the
// worker takes as much as one frame carries (16 MiB), as each worker
// always did. Only when idle workers would have nothing else to do is
// the request shared among them: an equal share each, never below
// `min_slice` (transports/tcp/min_slice_bytes), since every slice costs
// a round trip of its own.
inline uint64_t claimBytes(uint64_t remaining, uint64_t idle_others,
                           bool others_queued, uint64_t min_slice) {
    const uint64_t whole = std::min(remaining, tcp_wire::kMaxChunk);
    if (idle_others == 0 || others_queued) return whole;
    const uint64_t share = (remaining + idle_others) / (idle_others + 1);
    return std::min(whole, std::max(share, min_slice));
}

// At most how many slices `bytes` is cut into; a zero-length request is one
// (empty) slice.
inline uint64_t maxSlices(uint64_t bytes, uint64_t min_slice) {
    return bytes == 0 ? 1 : (bytes + min_slice - 1) / min_slice;
}

struct TcpSubBatch : Transport::SubBatch {
    // Every task of the sub-batch lives in one block allocated here, not
    // one allocation per request; each handed-out task shares the block's
    // ownership, so a sub-batch freed with tasks in flight keeps it alive.
    explicit TcpSubBatch(size_t cap)
        : capacity(cap), pool(std::make_shared<std::vector<TcpTask>>(cap)) {
        tasks.reserve(cap);
    }
    size_t size() const override {
        std::lock_guard<std::mutex> lock(mu);
        return tasks.size();
    }
    // The next unused task of the pool; the caller holds mu and has checked
    // the capacity.
    std::shared_ptr<TcpTask> nextTask() {
        return std::shared_ptr<TcpTask>(pool, &(*pool)[tasks.size()]);
    }

    const size_t capacity;
    const std::shared_ptr<std::vector<TcpTask>> pool;
    mutable std::mutex mu;  // guards tasks (submit vs. status polls)
    std::vector<std::shared_ptr<TcpTask>> tasks;
};

}  // namespace mooncake::tent
