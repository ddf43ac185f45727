// Transfer bookkeeping: one Transfer per handle, completed slice by slice
// from whichever thread (poster or connection reader) finishes each slice.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "mpcomm_public.h"

namespace mpcomm {
namespace detail {

class Transfer {
 public:
    // Starts with one "posting" reference so that slices finishing while the
    // poster is still slicing cannot complete the transfer early; the poster
    // drops it with finishPosting().
    Transfer() = default;

    void addSlices(uint64_t count) {
        remaining_.fetch_add(count, std::memory_order_relaxed);
    }
    void addPostedBytes(uint64_t bytes) {
        bytes_.fetch_add(bytes, std::memory_order_relaxed);
    }
    // Records the first error only; later errors describe knock-on effects.
    void sliceDone(int status);
    void finishPosting(int status) { sliceDone(status); }

    bool isComplete() const { return done_.load(std::memory_order_acquire); }
    TransferResult result() const;

 private:
    std::atomic<uint64_t> remaining_{1};
    std::atomic<int> error_{MPCOMM_SUCCESS};
    std::atomic<uint64_t> bytes_{0};
    std::atomic<bool> done_{false};
};

class TransferTable {
 public:
    // Handles start at 1 and are never reused within one MPComm instance.
    TransferHandle create(std::shared_ptr<Transfer>* transfer);
    // A transfer that is complete from the start (argument errors etc.).
    TransferHandle createFailed(int error_code);

    std::shared_ptr<Transfer> find(TransferHandle handle) const;
    void release(TransferHandle handle);
    size_t size() const;

 private:
    mutable std::mutex mu_;
    uint64_t next_handle_ = 1;
    std::unordered_map<TransferHandle, std::shared_ptr<Transfer>> table_;
};

}  // namespace detail
}  // namespace mpcomm
