// tent_platform_copy_bw: the platform's own copy bandwidth between host
// and device memory, the ceiling scripts/gpu_check.sh prints next to
// tebench's VRAM figures. Copies go through defaultPlatform(), i.e.
// cudaMemcpy in a USE_CUDA=ON build, from pinned host buffers (the kind
// the TCP transport stages through).
//
// Prints "copy <h2d|d2h|d2d> <bytes> <GB/s>", GB = 1e9 bytes; exits 1
// naming the failed call where there is no device.
#include <gflags/gflags.h>

#include <chrono>
#include <cstdio>
#include <string>

#include "tent/runtime/platform.h"

DEFINE_uint64(block_size, 64ull << 20, "Bytes per copy.");
DEFINE_double(duration, 1.0, "Seconds of copying per direction.");
DEFINE_string(device, "cuda:0", "Device location to copy to and from.");

namespace {

using mooncake::tent::Platform;
using mooncake::tent::Status;
using Clock = std::chrono::steady_clock;

bool measure(Platform& platform, const char* name, void* dst, const void* src) {
    const size_t n = FLAGS_block_size;
    uint64_t bytes = 0;
    const auto start = Clock::now();
    double seconds = 0;
    do {
        Status s = platform.copy(dst, src, n);
        if (!s.ok()) {
            std::fprintf(stderr, "tent_platform_copy_bw: %s copy: %s\n", name,
                         s.ToString().c_str());
            return false;
        }
        bytes += n;
        seconds = std::chrono::duration<double>(Clock::now() - start).count();
    } while (seconds < FLAGS_duration);
    std::printf("copy %s %zu %.3f\n", name, n, bytes / seconds / 1e9);
    return true;
}

}  // namespace

int main(int argc, char** argv) {
    gflags::ParseCommandLineFlags(&argc, &argv, true);
    auto platform = mooncake::tent::defaultPlatform();
    const size_t n = FLAGS_block_size;
    void* host = nullptr;
    void* dev_a = nullptr;
    void* dev_b = nullptr;
    for (auto [ptr, where] : {std::pair<void**, std::string>{&host, "cpu:0"},
                              {&dev_a, FLAGS_device},
                              {&dev_b, FLAGS_device}}) {
        Status s = platform->allocate(ptr, n, where);
        if (!s.ok()) {
            std::fprintf(stderr, "tent_platform_copy_bw: %s platform: %s\n",
                         platform->name(), s.ToString().c_str());
            return 1;
        }
    }
    bool ok = measure(*platform, "h2d", dev_a, host) &&
              measure(*platform, "d2h", host, dev_a) &&
              measure(*platform, "d2d", dev_b, dev_a);
    platform->free(host, n, "cpu:0");
    platform->free(dev_a, n, FLAGS_device);
    platform->free(dev_b, n, FLAGS_device);
    return ok ? 0 : 1;
}
