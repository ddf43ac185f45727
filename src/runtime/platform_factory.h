// The platforms this build can make (private header): the CPU platform
// always, the CUDA platform with USE_CUDA=ON, which serves host memory
// through the CPU platform.
#pragma once

#include <memory>

namespace mooncake::tent {

// Declared, not included: platform.cpp includes this header, and the
// makers' sources include both.
class Platform;

// src/runtime/platform_cpu.cpp.
std::shared_ptr<Platform> makeCpuPlatform();

#ifdef USE_CUDA
// src/platform/cuda_platform.cpp, the one file that sees cuda_runtime.h.
std::shared_ptr<Platform> makeCudaPlatform();
#endif

}  // namespace mooncake::tent
