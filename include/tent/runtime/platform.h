// Platform: where memory lives and how to allocate, copy and locate it.
//
// One implementation per build: the CPU platform always, the CUDA-aware
// one when the tree is built with USE_CUDA=ON. The engine and the
// transports reach it through currentPlatform(), so tests can substitute a
// platform whose "device" memory is host memory (setPlatformForTesting) and
// drive every device path on a machine without a GPU.
//
// Locations are strings: "cpu:<numa>" for host memory (cpu:0 where the
// NUMA node is unknown) and "cuda:<device>" for device memory.
#pragma once

#include <cstddef>
#include <memory>

#include "tent/common/status.h"
#include "tent/common/types.h"

namespace mooncake::tent {

class Platform {
 public:
    virtual ~Platform() = default;

    // A short name for logs and errors: "cpu", "cuda".
    virtual const char* name() const = 0;

    // Allocates `size` bytes at `location` ("cpu:N", "cuda:N" or "*" for
    // host memory). A location this platform cannot serve is an error
    // naming it.
    virtual Status allocate(void** ptr, size_t size,
                            const Location& location) = 0;

    // Releases memory from allocate(); `size` and `location` are the ones
    // it was allocated with.
    virtual Status free(void* ptr, size_t size, const Location& location) = 0;

    // Copies `length` bytes between any two kinds of memory this platform
    // knows (host or device on either side). Returns once the bytes are in
    // `dst`.
    virtual Status copy(void* dst, const void* src, size_t length) = 0;

    // Where [addr, addr + length) lives. Host memory the platform cannot
    // place on a NUMA node is "cpu:0".
    virtual Status locate(const void* addr, size_t length,
                          Location& location) = 0;
};

// The platform this build provides (CPU, or CUDA with USE_CUDA=ON); one
// instance per process.
std::shared_ptr<Platform> defaultPlatform();

// For tests: the engine and the transports use `platform` until this is
// called again with nullptr, which restores defaultPlatform().
void setPlatformForTesting(std::shared_ptr<Platform> platform);

// The platform in force: the test override when one is set, else
// defaultPlatform().
std::shared_ptr<Platform> currentPlatform();

// Whether the platform in force is the CPU one ("cpu"), which places every
// address in host memory, so that a caller may skip locate(). Unlike
// currentPlatform() it takes no lock and no reference while no test
// override is set.
bool currentPlatformIsCpu();

}  // namespace mooncake::tent
