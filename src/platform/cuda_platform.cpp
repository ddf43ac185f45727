// The CUDA platform: device memory on cuda:N, host memory through the CPU
// platform (pinned where CUDA can pin it, so staging copies run at DMA
// speed). The only file in the library that sees the CUDA headers.
//
// Rules:
//  - Every CUDA failure is a Status naming the call, the device and CUDA's
//    own message.
//  - No call creates a context on a device other than the buffer's own:
//    work on device N switches the thread to N for the call only and then
//    puts back exactly what the thread had, which may be no context at all
//    (restoring "device 0" with cudaSetDevice would create one there).
//  - Where CUDA has no usable driver or no device, no device memory can
//    exist: locate() says so in one log line, once, and from then on
//    answers for host memory without asking CUDA.
#include <cuda.h>
#include <cuda_runtime.h>
#include <glog/logging.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <set>
#include <string>

#include "runtime/location_parse.h"
#include "runtime/platform_factory.h"
#include "tent/runtime/platform.h"

namespace mooncake::tent {

namespace {

std::string cudaFailure(const char* call, int device, cudaError_t err) {
    return std::string(call) + " on cuda:" + std::to_string(device) +
           " failed: " + cudaGetErrorString(err) + " (error " +
           std::to_string(static_cast<int>(err)) + ")";
}

// "No usable driver" and "no device": the states in which no device
// memory can exist in this process.
bool meansNoDevice(cudaError_t err) {
    return err == cudaErrorInsufficientDriver || err == cudaErrorNoDevice;
}

using CtxGetCurrentFn = CUresult (*)(CUcontext*);
using CtxSetCurrentFn = CUresult (*)(CUcontext);

// The driver's context calls, reached through the runtime so that the
// library links cudart only.
struct DriverContextCalls {
    CtxGetCurrentFn get = nullptr;
    CtxSetCurrentFn set = nullptr;
};

const DriverContextCalls& driverContextCalls() {
    static DriverContextCalls calls = [] {
        DriverContextCalls c;
        void* fn = nullptr;
        if (cudaGetDriverEntryPointByVersion("cuCtxGetCurrent", &fn, 12000,
                                             cudaEnableDefault,
                                             nullptr) == cudaSuccess) {
            c.get = reinterpret_cast<CtxGetCurrentFn>(fn);
        }
        fn = nullptr;
        if (cudaGetDriverEntryPointByVersion("cuCtxSetCurrent", &fn, 12000,
                                             cudaEnableDefault,
                                             nullptr) == cudaSuccess) {
            c.set = reinterpret_cast<CtxSetCurrentFn>(fn);
        }
        cudaGetLastError();
        return c;
    }();
    return calls;
}

// Makes `device` current for one scope, then restores the thread's own
// context (or its lack of one).
class ScopedDevice {
 public:
    explicit ScopedDevice(int device) : device_(device) {
        const DriverContextCalls& calls = driverContextCalls();
        if (calls.get && calls.set && calls.get(&saved_) == CUDA_SUCCESS) {
            have_saved_ = true;
        }
        status_ = cudaSetDevice(device);
    }
    ~ScopedDevice() {
        if (have_saved_) driverContextCalls().set(saved_);
    }
    ScopedDevice(const ScopedDevice&) = delete;
    ScopedDevice& operator=(const ScopedDevice&) = delete;

    Status status() const {
        if (status_ == cudaSuccess) return Status::OK();
        return Status::InternalError(
            cudaFailure("cudaSetDevice", device_, status_));
    }

 private:
    int device_;
    cudaError_t status_ = cudaSuccess;
    CUcontext saved_ = nullptr;
    bool have_saved_ = false;
};

class CudaPlatform : public Platform {
 public:
    CudaPlatform() : host_(makeCpuPlatform()) {}

    const char* name() const override { return "cuda"; }

    Status allocate(void** ptr, size_t size,
                    const Location& location) override {
        MemoryLocation where;
        CHECK_STATUS(checkAllocation(ptr, size, location, &where));
        if (!where.device()) return allocateHost(ptr, size, location);
        if (where.kind != MemoryLocationKind::kCuda) {
            return Status::NotImplemented("cannot allocate at location " +
                                          location +
                                          ": the cuda platform serves cuda:N "
                                          "device memory only");
        }
        ScopedDevice scope(where.index);
        CHECK_STATUS(scope.status());
        void* out = nullptr;
        cudaError_t err = cudaMalloc(&out, size);
        if (err != cudaSuccess) {
            cudaGetLastError();
            return Status::InternalError(
                cudaFailure("cudaMalloc", where.index, err) + " for " +
                std::to_string(size) + " bytes");
        }
        *ptr = out;
        return Status::OK();
    }

    Status free(void* ptr, size_t size, const Location& location) override {
        MemoryLocation where;
        if (parseMemoryLocation(location, &where).ok() && where.device()) {
            ScopedDevice scope(where.index);
            CHECK_STATUS(scope.status());
            cudaError_t err = cudaFree(ptr);
            if (err != cudaSuccess) {
                return Status::InternalError(
                    cudaFailure("cudaFree", where.index, err));
            }
            return Status::OK();
        }
        {
            std::lock_guard<std::mutex> lock(mu_);
            if (pinned_.erase(ptr)) {
                cudaError_t err = cudaFreeHost(ptr);
                if (err != cudaSuccess) {
                    return Status::InternalError(
                        cudaFailure("cudaFreeHost", -1, err));
                }
                return Status::OK();
            }
        }
        return host_->free(ptr, size, location);
    }

    Status copy(void* dst, const void* src, size_t length) override {
        if (length == 0) return Status::OK();
        int dst_dev = deviceOf(dst);
        int src_dev = deviceOf(src);
        if (dst_dev < 0 && src_dev < 0) return host_->copy(dst, src, length);
        // The copy runs in the context of a device that owns one side.
        int device = src_dev >= 0 ? src_dev : dst_dev;
        ScopedDevice scope(device);
        CHECK_STATUS(scope.status());
        cudaError_t err = cudaMemcpy(dst, src, length, cudaMemcpyDefault);
        if (err != cudaSuccess) {
            cudaGetLastError();
            return Status::InternalError(
                cudaFailure("cudaMemcpy", device, err) + " for " +
                std::to_string(length) + " bytes");
        }
        return Status::OK();
    }

    Status locate(const void* addr, size_t length,
                  Location& location) override {
        int device = deviceOf(addr);
        if (device >= 0) {
            location = "cuda:" + std::to_string(device);
            return Status::OK();
        }
        return host_->locate(addr, length, location);
    }

 private:
    // Pinned where CUDA can pin (DMA-speed copies to and from devices);
    // plain host memory where it cannot.
    Status allocateHost(void** ptr, size_t size, const Location& location) {
        if (driverUsable()) {
            void* out = nullptr;
            cudaError_t err = cudaHostAlloc(&out, size, cudaHostAllocPortable);
            if (err == cudaSuccess) {
                std::lock_guard<std::mutex> lock(mu_);
                pinned_.insert(out);
                *ptr = out;
                return Status::OK();
            }
            cudaGetLastError();
            if (meansNoDevice(err)) noteNoDevice(err);
        }
        return host_->allocate(ptr, size, location);
    }

    // The device holding `addr`, or -1 for host memory (and for any
    // address once CUDA has shown that no device memory can exist).
    int deviceOf(const void* addr) {
        if (!driverUsable()) return -1;
        cudaPointerAttributes attr;
        std::memset(&attr, 0, sizeof(attr));
        cudaError_t err = cudaPointerGetAttributes(&attr, addr);
        if (err != cudaSuccess) {
            cudaGetLastError();
            if (meansNoDevice(err)) noteNoDevice(err);
            return -1;
        }
        if (attr.type == cudaMemoryTypeDevice ||
            attr.type == cudaMemoryTypeManaged) {
            return attr.device;
        }
        return -1;
    }

    bool driverUsable() const { return !no_device_.load(); }

    void noteNoDevice(cudaError_t err) {
        if (!no_device_.exchange(true)) {
            LOG(INFO) << "CUDA platform: " << cudaGetErrorString(err)
                      << " (error " << static_cast<int>(err)
                      << "); no device memory can exist in this process, "
                         "so every buffer is located as host memory";
        }
    }

    std::shared_ptr<Platform> host_;
    std::atomic<bool> no_device_{false};
    std::mutex mu_;
    std::set<void*> pinned_;
};

}  // namespace

std::shared_ptr<Platform> makeCudaPlatform() {
    return std::make_shared<CudaPlatform>();
}

}  // namespace mooncake::tent
