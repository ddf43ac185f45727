// Registered and published memory of one MPComm instance. The target side of
// every one-sided operation goes through here: key and range are checked
// under the lock right before each chunk is copied, so once unpublishBuffer()
// returns no remote access can touch that buffer again.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <shared_mutex>
#include <vector>

#include "mpcomm_public.h"

namespace mpcomm {
namespace detail {

class MemoryTable {
 public:
    int registerMemory(uint64_t addr, uint64_t length);
    // Also unpublishes buffers inside the region: the caller says the memory
    // is going away, so no peer may reach it any more.
    void unregisterMemory(uint64_t addr);
    bool isRegistered(uint64_t addr, uint64_t length) const;

    // keys: one per rail. Publishing the same start address again replaces
    // the entry (and its keys).
    int publish(uint64_t addr, uint64_t length, int numa_node,
                const std::vector<uint32_t>& keys);
    void unpublish(uint64_t addr);
    std::vector<RemoteBufferEntry> publishedList() const;

    // MPCOMM_SUCCESS when [addr, addr + length) lies inside one published
    // buffer whose key for `rail` equals `key`; else MPCOMM_ERR_REMOTE_ACCESS.
    int checkAccess(uint64_t addr, uint64_t length, uint32_t key,
                    uint32_t rail) const;
    // Re-check and copy under the lock (target side of PUT / GET).
    int copyIn(uint64_t addr, const void* src, size_t length, uint32_t key,
               uint32_t rail);
    int copyOut(uint64_t addr, void* dst, size_t length, uint32_t key,
                uint32_t rail) const;

 private:
    struct Published {
        uint64_t length;
        int numa_node;
        std::vector<uint32_t> keys;
    };
    int checkLocked(uint64_t addr, uint64_t length, uint32_t key,
                    uint32_t rail) const;

    mutable std::shared_mutex mu_;
    std::map<uint64_t, uint64_t> registered_;  // start -> length
    std::map<uint64_t, Published> published_;  // start -> entry
};

}  // namespace detail
}  // namespace mpcomm
