// Device memory in softmpcomm: registered or user memory may be GPU memory
// when softmpcomm is built with SOFTMPCOMM_USE_CUDA=ON. Sockets cannot read
// or write it, so payload_io.cpp moves its bytes through a per-thread host
// bounce buffer with cudaMemcpy. Without CUDA every pointer is host memory
// and these calls are never reached.
#pragma once

#include <cstddef>

namespace mpcomm {
namespace detail {

// True when `p` is device memory. Where CUDA has no usable driver or no
// device, always false (decided once).
bool isDeviceMemory(const void* p);

// Copies between device and host memory; false (errno EIO) on a CUDA
// failure, which is reported on stderr once per thread.
bool copyDeviceMemory(void* dst, const void* src, size_t length);

// The calling thread's host bounce buffer, kBounceBytes long.
constexpr size_t kBounceBytes = 1 << 20;
char* bounceBuffer();

}  // namespace detail
}  // namespace mpcomm
