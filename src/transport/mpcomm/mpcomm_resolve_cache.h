// This thread's peer resolutions (MpcommResolveCache), private to the
// MPComm transport: filled by MpcommPeerResolver::resolve() and
// readyPeer() (mpcomm_peer_resolver.cpp), and read inline by
// MpcommBatchDriver::submitTransferTasks() (mpcomm_batch_driver.cpp), which
// asks stillReady() once per distinct target of a submission.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "mpcomm_peer_resolver.h"
#include "tent/runtime/segment_manager.h"

namespace mooncake::tent {

// One target's resolution. What stillReady() reads fills the first cache
// line, and an entry starts on one: a batch naming many targets touches
// one line per target on its way to the adapter.
struct alignas(64) MpcommResolveCacheEntry {
    uint64_t owner = 0;  // the installation that filled it
    SegmentID target = LOCAL_SEGMENT_ID;
    // While it is current, `desc` is what getRemoteCached() would hand out
    // and `peer` was read from it.
    SegmentManager::RemoteLease lease;
    // peer.get() as readyPeer() last found it ready, beside the fields
    // stillReady() reads.
    MpcommResolvedPeer* ready_peer = nullptr;
    // 1 + the registry's linksLowered() when readyPeer() found `peer`
    // usable and its link ready; 0 when it has not since `peer` or the
    // lease last changed.
    uint64_t ready_since = 0;
    std::shared_ptr<MpcommResolvedPeer> peer;
    // What getRemoteCached() last handed this entry: passed back in, so a
    // hit costs no reference counting.
    SegmentDescRef desc;

    // Whether the entry is `for_target`'s, as filled by installation `by`.
    bool isFor(uint64_t by, SegmentID for_target) const {
        return owner == by && target == for_target;
    }
};
static_assert(offsetof(MpcommResolveCacheEntry, ready_since) +
                  sizeof(uint64_t) <=
              64);

// Direct-mapped by segment id (ids are small and sequential). An entry
// belongs to one installation (`owner`); a collision or another
// installation only costs a re-read.
struct MpcommResolveCache {
    static constexpr size_t kSlots = 256;
    std::array<MpcommResolveCacheEntry, kSlots> entries;

    MpcommResolveCacheEntry& entryFor(SegmentID target) {
        return entries[static_cast<size_t>(target) % kSlots];
    }

    // The peer readyPeer() last found ready for `target`, when nothing
    // that could change that has happened since: no suspicion is pending,
    // the lease stands (so the descriptor, and `peer` read from it, are
    // what they were), and no link has said less since (links turn
    // unready only by lowering the registry's count). Null sends the
    // caller to readyPeer().
    const MpcommResolvedPeer* stillReady(uint64_t owner, SegmentID target,
                                         const MpcommResolveScope& scope) {
        const MpcommResolveCacheEntry& entry = entryFor(target);
        if (scope.suspicions || !entry.isFor(owner, target) ||
            !entry.lease.current(scope.now) ||
            entry.ready_since != scope.links_lowered + 1) {
            return nullptr;
        }
        return entry.ready_peer;
    }
};

}  // namespace mooncake::tent
