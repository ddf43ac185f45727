// The CPU platform: host memory only. Device locations are refused with an
// error naming the build option, because in a build without CUDA that
// option is the only way to get them.
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "runtime/location_parse.h"
#include "runtime/platform_factory.h"
#include "tent/runtime/platform.h"

namespace mooncake::tent {

namespace {

class CpuPlatform : public Platform {
 public:
    const char* name() const override { return "cpu"; }

    Status allocate(void** ptr, size_t size,
                    const Location& location) override {
        MemoryLocation where;
        CHECK_STATUS(checkAllocation(ptr, size, location, &where));
        if (where.device()) {
            return Status::NotImplemented(
                "cannot allocate at location " + location +
                ": device memory needs a build with USE_CUDA=ON");
        }
        // Page alignment keeps buffers eligible for registration by
        // transports that pin memory.
        const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
        void* out = nullptr;
        int rc = ::posix_memalign(&out, page, size);
        if (rc != 0) {
            return Status::InternalError("cannot allocate " +
                                         std::to_string(size) +
                                         " bytes: " + std::strerror(rc));
        }
        *ptr = out;
        return Status::OK();
    }

    Status free(void* ptr, size_t, const Location&) override {
        std::free(ptr);
        return Status::OK();
    }

    Status copy(void* dst, const void* src, size_t length) override {
        if (length == 0) return Status::OK();
        if (!dst || !src) {
            return Status::InvalidArgument("copy: null address for " +
                                           std::to_string(length) + " bytes");
        }
        std::memmove(dst, src, length);
        return Status::OK();
    }

    Status locate(const void*, size_t, Location& location) override {
        // The NUMA node is left unknown (cpu:0): asking the kernel for it
        // would cost a system call on every transfer that locates its
        // source, and would fault in a page not yet touched. A caller that
        // knows the node names it in MemoryOptions.location.
        location = "cpu:0";
        return Status::OK();
    }
};

}  // namespace

std::shared_ptr<Platform> makeCpuPlatform() {
    return std::make_shared<CpuPlatform>();
}

}  // namespace mooncake::tent
