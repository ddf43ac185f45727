// SegmentID -> MPComm peer (private to the MPComm transport, whose
// submitTransferTasks() reads this thread's cache inline): the descriptor's
// name is the host id, its transport_attrs[MPCOMM] the endpoint (or
// MPCOMM_REMOTE_TCP_PORT when it publishes none), its incarnation and
// registration epoch what the peer registry compares. A segment whose
// transfer failed is suspected and read afresh on its next use, which is
// how a restarted peer is noticed before the descriptor cache's TTL runs
// out.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_set>
#include <vector>

#include "tent/runtime/control_plane.h"
#include "tent/runtime/segment_manager.h"
#include "tent/transport/mpcomm/mpcomm_peer_registry.h"

namespace mooncake::tent {

// A segment descriptor read into what a request needs. Each thread keeps
// its own (so nothing here is shared or locked) and reuses one for as long
// as SegmentManager::getRemoteCached() hands it the same descriptor: the
// endpoint is parsed once per descriptor, not once per request.
struct MpcommResolvedPeer {
    SegmentDescRef desc;  // the descriptor this was read from
    Status status;        // why the segment cannot be used, or OK
    MpcommPeerView view;
    // From the last poll() that answered kReady for `view`; lets later
    // requests skip poll() while link->readyFor(view) holds.
    std::shared_ptr<const MpcommPeerLink> link;

    // What poll() would answer kReady for, read without the registry's
    // lock; false sends the caller to poll().
    bool linkReady() const { return link && link->readyFor(view); }
};

// This thread's resolutions (below).
struct MpcommResolveCache;

// What every resolution of one submission shares, read once when it starts
// instead of once per target: the clock the descriptor leases are checked
// against, this thread's resolution cache, and whether any peer is
// suspected at all. A suspicion raised while a submission runs is taken by
// the next one.
struct MpcommResolveScope {
    SegmentManager::CacheClock::time_point now;
    MpcommResolveCache* cache = nullptr;
    bool suspicions = false;
    // MpcommPeerRegistry::linksLowered(), read before any link is checked.
    uint64_t links_lowered = 0;
};

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

class MpcommPeerResolver {
 public:
    explicit MpcommPeerResolver(MpcommPeerRegistry& registry)
        : registry_(registry) {}

    // install(), while the call gate is closed: where descriptors come from
    // and the MPCOMM_REMOTE_TCP_PORT fallback (0: none). Draws a new owner
    // for this installation's entries in the per-thread caches.
    void bind(std::shared_ptr<ControlService> metadata, int remote_tcp_port);
    // uninstall(), while the call gate is closed.
    void unbind() { metadata_.reset(); }

    // Names this installation in the per-thread resolution caches;
    // process-wide unique.
    uint64_t owner() const { return owner_; }

    MpcommResolveScope scope();
    // What `target`'s descriptor says about the peer, from this thread's
    // cache while the descriptor is the same (`peer` is null only when no
    // descriptor could be read). A segment suspected of having restarted
    // is read afresh, not from the cache. `peer` is this thread's cache
    // entry, not a counted reference (a submission resolving 64 targets
    // paid two reference-count operations for each): it stays valid until
    // this thread's next resolve(), which may evict it into `retired`,
    // whose owner keeps what it evicts for as long as it uses `peer`.
    // `scope.now` checks the descriptor's lease: while it is current, no
    // look-up at all.
    Status resolve(SegmentID target, const MpcommResolveScope& scope,
                   MpcommResolvedPeer*& peer,
                   std::vector<std::shared_ptr<MpcommResolvedPeer>>& retired);
    // What resolve() would hand out for `target` when it is this thread's
    // cache entry as it stands and its peer is ready (its link says what
    // poll() would answer kReady for); else null, and the caller takes the
    // slow path. The full check, for a caller whose
    // MpcommResolveCache::stillReady() just failed (it does not repeat
    // that one). No suspicion taken, no descriptor read, nothing evicted
    // (it only records in the entry that it found the peer ready), so the
    // pointer stays valid until this thread's next resolve().
    const MpcommResolvedPeer* readyPeer(SegmentID target,
                                        const MpcommResolveScope& scope);
    // A transfer to `target` failed: its next use re-reads the descriptor.
    void suspect(SegmentID target);
    // Pre-connect: starts the handshake with `handle`'s peer if one is due,
    // without waiting for it. The caller is inside the call gate.
    void warmup(SegmentID handle);

 private:
    bool takeSuspicion(SegmentID target);
    // Reads `desc` into `peer` (the slow part of resolve()).
    void readDescriptor(const SegmentDescRef& desc, MpcommResolvedPeer& peer);

    MpcommPeerRegistry& registry_;
    std::shared_ptr<ControlService> metadata_;
    int remote_tcp_port_ = 0;
    uint64_t owner_ = 0;

    // Segments whose last transfer failed; read on the hot path only while
    // suspect_count_ is non-zero.
    std::mutex suspect_mu_;
    std::unordered_set<SegmentID> suspect_;
    std::atomic<size_t> suspect_count_{0};
};

}  // namespace mooncake::tent
