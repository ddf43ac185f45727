// InstantMpcommAdapter: every transfer completes, successfully and whole,
// at post time. For load tests: nothing in it takes a lock, so contention
// is the transport's own, and it keeps a release count per handle in a
// fixed array (handles are 1..capacity), so that "every handle released
// exactly once" is checked per handle over hundreds of thousands of
// transfers without the mock's per-transfer records.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "tent/transport/mpcomm/mpcomm_adapter.h"

namespace mooncake::tent::testing {

class InstantMpcommAdapter : public MpcommAdapter {
 public:
    // `capacity`: the most transfers a test will post; one more is refused
    // and counted as misuse.
    explicit InstantMpcommAdapter(size_t capacity)
        : capacity_(capacity),
          releases_(new std::atomic<uint32_t>[capacity]()),
          lengths_(new std::atomic<size_t>[capacity]()) {}

    std::atomic<int64_t> posts{0}, is_complete_calls{0}, result_calls{0},
        release_calls{0}, misuse{0};
    std::atomic<int> connect_calls{0}, query_calls{0};

    int64_t handlesIssued() const { return static_cast<int64_t>(issued()); }
    // Issued handles whose release count is not exactly one.
    int64_t handlesNotReleasedOnce() const {
        int64_t wrong = 0;
        for (uint64_t i = 0; i < issued(); ++i) {
            wrong += releases_[i].load() == 1 ? 0 : 1;
        }
        return wrong;
    }

    bool available() const noexcept override { return true; }
    Status init(const std::string&, const std::string&, int port) override {
        port_ = port;
        return Status::OK();
    }
    int tcpPort() const override { return port_; }
    Status startAcceptThread() override { return Status::OK(); }
    void stopAcceptThread() override {}
    void shutdown() override {}
    Status registerMemory(void*, size_t) override { return Status::OK(); }
    void unregisterMemory(void*) override {}
    Status publishBuffer(void*, size_t, int) override { return Status::OK(); }
    void unpublishBuffer(void*) override {}
    Status connect(const std::string&, const std::string&, int) override {
        ++connect_calls;
        return Status::OK();
    }
    Status queryRemoteBuffer(const std::string&, const std::string&,
                             int) override {
        ++query_calls;
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
        ++is_complete_calls;
        return live(handle);
    }
    MpcommTransferOutcome getTransferResult(
        MpcommTransferHandle handle) override {
        ++result_calls;
        if (!live(handle)) return {};
        return {true, lengths_[handle - 1].load(std::memory_order_relaxed), 0};
    }
    void releaseTransfer(MpcommTransferHandle handle) override {
        ++release_calls;
        if (handle == kInvalidMpcommTransferHandle) return;
        if (handle > issued() || releases_[handle - 1].fetch_add(1) != 0) {
            ++misuse;
        }
    }

 private:
    MpcommTransferHandle post(size_t length) {
        ++posts;
        uint64_t index = next_.fetch_add(1);
        if (index >= capacity_) {
            ++misuse;
            return kInvalidMpcommTransferHandle;
        }
        lengths_[index].store(length, std::memory_order_relaxed);
        return index + 1;
    }
    uint64_t issued() const { return std::min(next_.load(), capacity_); }
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
    std::atomic<uint64_t> next_{0};
    int port_ = 0;
    std::unique_ptr<std::atomic<uint32_t>[]> releases_;
    std::unique_ptr<std::atomic<size_t>[]> lengths_;
};

}  // namespace mooncake::tent::testing
