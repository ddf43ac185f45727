// The process-wide platform choice and the test override.
#include "tent/runtime/platform.h"

#include <glog/logging.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "runtime/platform_factory.h"

namespace mooncake::tent {

namespace {

std::mutex g_override_mu;
std::shared_ptr<Platform> g_override;
// Whether g_override is set; written under g_override_mu, read without it
// by currentPlatformIsCpu().
std::atomic<bool> g_override_set{false};

}  // namespace

std::shared_ptr<Platform> defaultPlatform() {
#ifdef USE_CUDA
    static std::shared_ptr<Platform> platform = makeCudaPlatform();
#else
    static std::shared_ptr<Platform> platform = makeCpuPlatform();
#endif
    return platform;
}

void setPlatformForTesting(std::shared_ptr<Platform> platform) {
    std::lock_guard<std::mutex> lock(g_override_mu);
    g_override = std::move(platform);
    g_override_set.store(g_override != nullptr, std::memory_order_release);
}

std::shared_ptr<Platform> currentPlatform() {
    {
        std::lock_guard<std::mutex> lock(g_override_mu);
        if (g_override) return g_override;
    }
    return defaultPlatform();
}

bool currentPlatformIsCpu() {
    if (g_override_set.load(std::memory_order_acquire)) {
        std::lock_guard<std::mutex> lock(g_override_mu);
        if (g_override) return std::strcmp(g_override->name(), "cpu") == 0;
    }
    static const bool kDefaultIsCpu =
        std::strcmp(defaultPlatform()->name(), "cpu") == 0;
    return kDefaultIsCpu;
}

}  // namespace mooncake::tent
