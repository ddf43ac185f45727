// Task and sub-batch state of TcpTransport (private to it).
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "tent/transport/tcp/tcp_transport.h"

namespace mooncake::tent {

// Shared between the sub-batch (status polls) and the worker that runs it,
// so freeing a sub-batch with a task in flight never frees the task under
// the worker.
struct TcpTransport::Task {
    Request request;
    // The target's descriptor (immutable once published), held so that the
    // two strings below stay valid without copying them for every request.
    SegmentDescRef desc;
    const std::string* endpoint = nullptr;  // "<host>:<port>" of its listener
    const std::string& segment() const {    // its name, for log lines
        static const std::string unknown = "(unknown)";
        return desc ? desc->name : unknown;
    }
    // PENDING until a worker finishes it; release on the worker's final
    // store pairs with acquire in getTransferStatus() so the transferred
    // bytes (and a READ's payload) are visible once COMPLETED is seen.
    std::atomic<int> state{PENDING};
    std::atomic<uint64_t> transferred{0};

    void finish(TransferStatusEnum s) {
        state.store(s, std::memory_order_release);
    }
};

struct TcpSubBatch : Transport::SubBatch {
    // Every task of the sub-batch lives in one block allocated here, not
    // one allocation per request; each handed-out task shares the block's
    // ownership, so a sub-batch freed with tasks in flight keeps it alive.
    explicit TcpSubBatch(size_t cap)
        : capacity(cap),
          pool(std::make_shared<std::vector<TcpTransport::Task>>(cap)) {
        tasks.reserve(cap);
    }
    size_t size() const override {
        std::lock_guard<std::mutex> lock(mu);
        return tasks.size();
    }
    // The next unused task of the pool; the caller holds mu and has checked
    // the capacity.
    std::shared_ptr<TcpTransport::Task> nextTask() {
        return std::shared_ptr<TcpTransport::Task>(pool,
                                                   &(*pool)[tasks.size()]);
    }

    const size_t capacity;
    const std::shared_ptr<std::vector<TcpTransport::Task>> pool;
    mutable std::mutex mu;  // guards tasks (submit vs. status polls)
    std::vector<std::shared_ptr<TcpTransport::Task>> tasks;
};

}  // namespace mooncake::tent
