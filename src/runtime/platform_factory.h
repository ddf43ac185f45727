// The platforms this build can make (private header): the CPU platform
// always, the CUDA platform with USE_CUDA=ON, which serves host memory
// through the CPU platform.
#pragma once

#include <memory>

#include "tent/runtime/platform.h"

namespace mooncake::tent {

std::shared_ptr<Platform> makeCpuPlatform();

#ifdef USE_CUDA
// src/platform/cuda_platform.cpp, the one file that sees cuda_runtime.h.
std::shared_ptr<Platform> makeCudaPlatform();
#endif

}  // namespace mooncake::tent
