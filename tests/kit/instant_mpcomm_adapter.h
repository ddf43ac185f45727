// InstantMpcommAdapter: every transfer completes, successfully and whole,
// at post time. Shared by the load tests and the overhead benchmarks, in
// two flavours chosen at compile time so that the benchmarks' per-request
// work carries nothing of the tests' bookkeeping:
//
//   InstantMpcommAdapter          takes no lock and counts nothing: the
//                                 per-request cost tent_cost_count holds to
//                                 benchmark/cost_budget.json.
//   AuditedInstantMpcommAdapter   also counts every call and keeps a release
//                                 count per handle in a fixed array (handles
//                                 are 1..capacity), so that "every handle
//                                 released exactly once" is checked per
//                                 handle over hundreds of thousands of
//                                 transfers without the mock's per-transfer
//                                 records. Still lock-free, so contention
//                                 is the transport's own.
//
// The length of a posted transfer is kept by handle, because a transfer
// that reports fewer bytes than requested is demoted to FAILED: the
// benchmarks keep it in a ring larger than any number of transfers they
// have in flight; the audited flavour, whose threads may be preempted with
// any number of other threads' transfers posted meanwhile, keeps one slot
// per handle. Atomic, so that posting and polling may happen on different
// threads.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "tent/transport/mpcomm/mpcomm_adapter.h"

namespace mooncake::tent::testing {

template <bool kAudit>
class BasicInstantMpcommAdapter final : public MpcommAdapter {
 public:
    static constexpr size_t kSlots = 4096;

    // `capacity` (audited only): the most transfers a test will post; one
    // more is refused and counted as misuse.
    explicit BasicInstantMpcommAdapter(size_t capacity = 0)
        : capacity_(capacity),
          releases_(kAudit ? new std::atomic<uint32_t>[capacity]() : nullptr),
          audit_lengths_(kAudit ? new std::atomic<size_t>[capacity]()
                                : nullptr) {}

    // Audited only; they stay zero otherwise.
    std::atomic<int64_t> posts{0}, is_complete_calls{0}, result_calls{0},
        release_calls{0}, misuse{0};
    std::atomic<int> connect_calls{0}, query_calls{0};

    int64_t handlesIssued() const { return static_cast<int64_t>(issued()); }
    // Issued handles whose release count is not exactly one (audited only).
    int64_t handlesNotReleasedOnce() const {
        int64_t wrong = 0;
        if constexpr (kAudit) {
            for (uint64_t i = 0; i < issued(); ++i) {
                wrong += releases_[i].load() == 1 ? 0 : 1;
            }
        }
        return wrong;
    }

    bool available() const noexcept override { return true; }
    Status init(const std::string&, const std::string&, int tcp_port) override {
        port_.store(tcp_port, std::memory_order_relaxed);
        return Status::OK();
    }
    int tcpPort() const override {
        return port_.load(std::memory_order_relaxed);
    }
    Status startAcceptThread() override { return Status::OK(); }
    void stopAcceptThread() override {}
    void shutdown() override {}

    Status registerMemory(void*, size_t) override { return Status::OK(); }
    void unregisterMemory(void*) override {}
    Status publishBuffer(void*, size_t, int) override { return Status::OK(); }
    void unpublishBuffer(void*) override {}

    Status connect(const std::string&, const std::string&, int) override {
        if constexpr (kAudit) ++connect_calls;
        return Status::OK();
    }
    Status queryRemoteBuffer(const std::string&, const std::string&,
                             int) override {
        if constexpr (kAudit) ++query_calls;
        return Status::OK();
    }

    MpcommTransferHandle putAsync(uintptr_t, const std::string&, uintptr_t,
                                  size_t length) override {
        return post(length);
    }
    MpcommTransferHandle getAsync(uintptr_t, const std::string&, uintptr_t,
                                  size_t length) override {
        return post(length);
    }
    bool isTransferComplete(MpcommTransferHandle handle) override {
        if constexpr (kAudit) {
            ++is_complete_calls;
            return live(handle);
        }
        return true;
    }
    MpcommTransferOutcome getTransferResult(
        MpcommTransferHandle handle) override {
        if constexpr (kAudit) {
            ++result_calls;
            if (!live(handle)) return {};
        }
        size_t length = lengthSlot(handle).load(std::memory_order_acquire);
        return {true, length, 0};
    }
    void releaseTransfer(MpcommTransferHandle handle) override {
        if constexpr (kAudit) {
            ++release_calls;
            if (handle == kInvalidMpcommTransferHandle) return;
            if (handle > issued() || releases_[handle - 1].fetch_add(1) != 0) {
                ++misuse;
            }
        }
    }

 private:
    MpcommTransferHandle post(size_t length) {
        MpcommTransferHandle handle =
            next_.fetch_add(1, std::memory_order_relaxed);
        if constexpr (kAudit) {
            ++posts;
            if (handle > capacity_) {
                ++misuse;
                return kInvalidMpcommTransferHandle;
            }
        }
        lengthSlot(handle).store(length, std::memory_order_release);
        return handle;
    }
    std::atomic<size_t>& lengthSlot(MpcommTransferHandle handle) {
        if constexpr (kAudit) return audit_lengths_[handle - 1];
        return lengths_[handle % kSlots];
    }
    uint64_t issued() const {
        return std::min<uint64_t>(next_.load() - 1, capacity_);
    }
    // A handle that was issued and not yet released; misuse otherwise.
    bool live(MpcommTransferHandle handle) {
        if (handle == kInvalidMpcommTransferHandle || handle > issued() ||
            releases_[handle - 1].load() != 0) {
            ++misuse;
            return false;
        }
        return true;
    }

    const uint64_t capacity_;
    std::atomic<int> port_{0};
    // Starts at 1: 0 is kInvalidMpcommTransferHandle.
    std::atomic<MpcommTransferHandle> next_{1};
    std::array<std::atomic<size_t>, kSlots> lengths_{};
    std::unique_ptr<std::atomic<uint32_t>[]> releases_;
    std::unique_ptr<std::atomic<size_t>[]> audit_lengths_;
};

using InstantMpcommAdapter = BasicInstantMpcommAdapter<false>;
using AuditedInstantMpcommAdapter = BasicInstantMpcommAdapter<true>;

}  // namespace mooncake::tent::testing
