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
    std::string endpoint;  // "<host>:<port>" of the target's listener
    std::string segment;   // target segment name, for log lines
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
    explicit TcpSubBatch(size_t cap) : capacity(cap) { tasks.reserve(cap); }
    size_t size() const override {
        std::lock_guard<std::mutex> lock(mu);
        return tasks.size();
    }

    const size_t capacity;
    mutable std::mutex mu;  // guards tasks (submit vs. status polls)
    std::vector<std::shared_ptr<TcpTransport::Task>> tasks;
};

}  // namespace mooncake::tent
