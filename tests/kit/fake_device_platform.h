// FakeDevicePlatform: a Platform whose "device" memory is host memory, so
// that every device path (registration at cuda:N, TCP staging) runs and is
// checked on a machine without a GPU. It counts each copy by direction and
// can be told to fail the next copies, and ScopedPlatform installs it for
// one test.
#pragma once

#include <pthread.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "tent/runtime/memory_location.h"
#include "tent/runtime/platform.h"

namespace mooncake::tent::testing {

class FakeDevicePlatform : public Platform {
 public:
    const char* name() const override { return "fake-device"; }

    Status allocate(void** ptr, size_t size,
                    const Location& location) override {
        void* out = std::aligned_alloc(4096, (size + 4095) / 4096 * 4096);
        if (!out) return Status::InternalError("fake allocate failed");
        if (isDeviceMemoryLocation(location)) {
            std::lock_guard<std::mutex> lock(mu_);
            device_[reinterpret_cast<uintptr_t>(out)] = {size, location};
        }
        *ptr = out;
        return Status::OK();
    }

    Status free(void* ptr, size_t, const Location&) override {
        {
            std::lock_guard<std::mutex> lock(mu_);
            device_.erase(reinterpret_cast<uintptr_t>(ptr));
        }
        std::free(ptr);
        return Status::OK();
    }

    Status copy(void* dst, const void* src, size_t length) override {
        const bool from_device = isDevice(src);
        const bool to_device = isDevice(dst);
        if (fail_copies.load() > 0) {
            fail_copies.fetch_sub(1);
            return Status::InternalError("fake copy failure");
        }
        if (from_device && !to_device) ++device_to_host;
        if (!from_device && to_device) ++host_to_device;
        if (from_device && to_device) ++device_to_device;
        if (!from_device && !to_device) ++host_to_host;
        copied_bytes += length;
        char thread[16] = {0};
        pthread_getname_np(pthread_self(), thread, sizeof(thread));
        if (std::strncmp(thread, "tent-tcp-stage", 14) == 0) {
            ++on_stager_threads;
        }
        std::memmove(dst, src, length);
        return Status::OK();
    }

    Status locate(const void* addr, size_t, Location& location) override {
        ++locate_calls;
        std::lock_guard<std::mutex> lock(mu_);
        const Location* found = find(addr);
        location = found ? *found : "cpu:0";
        return Status::OK();
    }

    // Marks host memory the test owns as device memory at `location`.
    void adopt(void* ptr, size_t size, const Location& location) {
        std::lock_guard<std::mutex> lock(mu_);
        device_[reinterpret_cast<uintptr_t>(ptr)] = {size, location};
    }

    bool isDevice(const void* addr) {
        std::lock_guard<std::mutex> lock(mu_);
        return find(addr) != nullptr;
    }

    std::atomic<int> host_to_device{0};
    std::atomic<int> device_to_host{0};
    std::atomic<int> device_to_device{0};
    std::atomic<int> host_to_host{0};
    std::atomic<uint64_t> copied_bytes{0};
    // Copies run by the TCP stager's copier threads ("tent-tcp-stage"),
    // i.e. overlapped with a slice on the wire.
    std::atomic<int> on_stager_threads{0};
    std::atomic<int> locate_calls{0};
    // The next `fail_copies` copies fail without copying.
    std::atomic<int> fail_copies{0};

 private:
    struct Range {
        size_t size;
        Location location;
    };

    const Location* find(const void* addr) const {
        const uintptr_t a = reinterpret_cast<uintptr_t>(addr);
        auto it = device_.upper_bound(a);
        if (it == device_.begin()) return nullptr;
        --it;
        if (a - it->first >= it->second.size) return nullptr;
        return &it->second.location;
    }

    std::mutex mu_;
    std::map<uintptr_t, Range> device_;
};

// Installs a platform for the scope of a test; restores the default after.
class ScopedPlatform {
 public:
    explicit ScopedPlatform(std::shared_ptr<Platform> platform) {
        setPlatformForTesting(std::move(platform));
    }
    ~ScopedPlatform() { setPlatformForTesting(nullptr); }
    ScopedPlatform(const ScopedPlatform&) = delete;
    ScopedPlatform& operator=(const ScopedPlatform&) = delete;
};

}  // namespace mooncake::tent::testing
