// Device memory detection and copies for softmpcomm (device_copy.h).
#include "device_copy.h"

#include <cerrno>
#include <cstdio>
#include <vector>

#ifdef SOFTMPCOMM_USE_CUDA
#include <cuda_runtime.h>

#include <atomic>
#endif

namespace mpcomm {
namespace detail {

#ifdef SOFTMPCOMM_USE_CUDA
namespace {
std::atomic<bool> g_no_device{false};
}  // namespace

bool isDeviceMemory(const void* p) {
    if (g_no_device.load(std::memory_order_relaxed)) return false;
    cudaPointerAttributes attr{};
    cudaError_t err = cudaPointerGetAttributes(&attr, p);
    if (err != cudaSuccess) {
        cudaGetLastError();
        if (err == cudaErrorInsufficientDriver || err == cudaErrorNoDevice) {
            g_no_device.store(true, std::memory_order_relaxed);
        }
        return false;
    }
    return attr.type == cudaMemoryTypeDevice ||
           attr.type == cudaMemoryTypeManaged;
}

bool copyDeviceMemory(void* dst, const void* src, size_t length) {
    cudaError_t err = cudaMemcpy(dst, src, length, cudaMemcpyDefault);
    if (err == cudaSuccess) return true;
    cudaGetLastError();
    thread_local bool reported = false;
    if (!reported) {
        reported = true;
        std::fprintf(stderr, "[mpcomm] cudaMemcpy of %zu bytes failed: %s\n",
                     length, cudaGetErrorString(err));
    }
    errno = EIO;
    return false;
}
#else
bool isDeviceMemory(const void*) { return false; }

bool copyDeviceMemory(void*, const void*, size_t) {
    errno = EIO;
    return false;
}
#endif

char* bounceBuffer() {
    thread_local std::vector<char> buffer(kBounceBytes);
    return buffer.data();
}

}  // namespace detail
}  // namespace mpcomm
