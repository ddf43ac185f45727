// ShmMappingCache: the peer objects an initiator has mapped, per target
// segment, at most `limit` (32) per target.
//
// A copy holds a Pin (a reference to the mapping) from look-up until its
// memcpy returns; the object is unmapped only when the cache has let go of
// it and no pin is left, so neither eviction nor a drop can pull a mapping
// from under a running copy. Eviction takes the least recently used
// unpinned mappings; when every mapping of a target is pinned, the target
// briefly holds more than `limit` until those pins are released and the
// next insertion trims it.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "tent/common/status.h"
#include "tent/common/types.h"
#include "transport/shm/shm_object.h"

namespace mooncake::tent {

class ShmMappingCache {
 public:
    using Pin = std::shared_ptr<const ShmObject>;
    static constexpr size_t kDefaultLimit = 32;

    explicit ShmMappingCache(size_t limit = kDefaultLimit) : limit_(limit) {}

    // The mapping of peer object `name` (at least `length` bytes) for
    // `target`, opened on a miss; pinned for as long as `pin` lives.
    Status acquire(SegmentID target, const std::string& name, uint64_t length,
                   Pin& pin);
    // Forgets one mapping (unmapped once its pins are released).
    void drop(SegmentID target, const std::string& name);
    void clear();

    // Mappings the cache holds for `target` now.
    size_t mapped(SegmentID target) const;
    struct Stats {
        uint64_t opens = 0;      // objects mapped on a miss
        uint64_t evictions = 0;  // mappings trimmed by the limit
        uint64_t drops = 0;      // mappings dropped by drop()
    };
    Stats stats() const;

 private:
    struct Entry {
        std::shared_ptr<ShmObject> object;
        uint64_t last_use = 0;
    };
    using Objects = std::map<std::string, Entry>;
    // Trims `objects` below the limit by evicting unpinned entries.
    void trim(Objects& objects);

    const size_t limit_;
    mutable std::mutex mu_;
    std::map<SegmentID, Objects> by_target_;
    uint64_t clock_ = 0;
    Stats stats_;
};

}  // namespace mooncake::tent
