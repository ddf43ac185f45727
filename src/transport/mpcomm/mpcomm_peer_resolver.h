// SegmentID -> MPComm peer, private to the MPComm transport: the
// descriptor's name is the host id, transport_attrs[MPCOMM] the endpoint
// (else MPCOMM_REMOTE_TCP_PORT), its incarnation and registration epoch what
// the registry compares. A segment whose transfer failed is suspected and
// read afresh on its next use, so a restarted peer is noticed before the
// descriptor cache's TTL runs out.
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

// A descriptor read into what a request needs, per thread (nothing shared),
// parsed once per descriptor, not once per request.
struct MpcommResolvedPeer {
    SegmentDescRef desc;  // the descriptor this was read from
    Status status;        // why the segment cannot be used, or OK
    MpcommPeerView view;
    // From the last poll() that answered kReady: later requests skip poll()
    // while link->readyFor(view) holds.
    std::shared_ptr<const MpcommPeerLink> link;

    bool linkReady() const { return link && link->readyFor(view); }
};

struct MpcommResolveCache;

// What every resolution of one submission shares, read once per submission
// rather than per target.
struct MpcommResolveScope {
    // The manager's remoteChanges(), read before `now`: the epoch stands
    // for it, and readyPeer() marks only a lease filled against it.
    uint64_t changes = 0;
    SegmentManager::CacheClock::time_point now;
    MpcommResolveCache* cache = nullptr;  // this thread's
    bool suspicions = false;              // any peer suspected at all
    // MpcommPeerRegistry::linksLowered(), read before any link is checked.
    uint64_t links_lowered = 0;
    // What readyPeer() marks an entry ready with and stillReady() looks
    // for: the cache's epoch, which stands for the installation, `changes`,
    // `links_lowered` and the leases' TTL; kNeverReady while a suspicion
    // is pending.
    uint64_t ready_stamp = 0;
    static constexpr uint64_t kNeverReady = ~uint64_t{0};
};

// One target's resolution; what stillReady() reads fills the first cache
// line, so a batch over many targets touches one line per target.
struct alignas(64) MpcommResolveCacheEntry {
    uint64_t owner = 0;  // the installation that filled it
    SegmentID target = LOCAL_SEGMENT_ID;
    // While current, `desc` is what getRemoteCached() would hand out and
    // `peer` was read from it.
    SegmentManager::RemoteLease lease;
    MpcommResolvedPeer* ready_peer = nullptr;
    // The scope's ready_stamp when readyPeer() found `peer` ready with the
    // lease current at the scope's change count; 0 since `peer` or the
    // lease changed.
    uint64_t ready_since = 0;
    std::shared_ptr<MpcommResolvedPeer> peer;
    // Passed back to getRemoteCached(), so a hit costs no refcounting.
    SegmentDescRef desc;

    bool isFor(uint64_t by, SegmentID for_target) const {
        return owner == by && target == for_target;
    }
};
static_assert(offsetof(MpcommResolveCacheEntry, ready_since) +
                  sizeof(uint64_t) <=
              64);

// Direct-mapped by segment id (small, sequential); a collision or another
// installation's entry only costs a re-read.
struct MpcommResolveCache {
    static constexpr size_t kSlots = 256;
    std::array<MpcommResolveCacheEntry, kSlots> entries;
    // The epoch (1 and up) and what it stands for: it moves whenever a
    // scope's installation, change count or links_lowered differs from
    // the last scope's, or its `now` reaches the earliest expiry of the
    // leases readyPeer() marked in it, so one compare checks all four per
    // target.
    uint64_t epoch = 0;
    uint64_t epoch_owner = 0;
    uint64_t epoch_changes = 0;
    uint64_t epoch_links_lowered = 0;
    SegmentManager::CacheClock::time_point epoch_expiry =
        SegmentManager::CacheClock::time_point::max();

    MpcommResolveCacheEntry& entryFor(SegmentID target) {
        return entries[static_cast<size_t>(target) % kSlots];
    }

    // The peer readyPeer() last found ready for `target`, while no
    // suspicion is pending, the lease stands and no link has said less
    // since; else null (the caller asks readyPeer()). The stamp covers
    // the installation and the lease (its change count and TTL): only the
    // target is left to check.
    const MpcommResolvedPeer* stillReady(SegmentID target,
                                         const MpcommResolveScope& scope) {
        const MpcommResolveCacheEntry& entry = entryFor(target);
        return entry.ready_since == scope.ready_stamp && entry.target == target
                   ? entry.ready_peer
                   : nullptr;
    }
};

class MpcommPeerResolver {
 public:
    explicit MpcommPeerResolver(MpcommPeerRegistry& registry)
        : registry_(registry) {}

    // By install()/uninstall() while the call gate is closed. bind() draws
    // a process-wide unique owner for this installation's cache entries.
    void bind(std::shared_ptr<ControlService> metadata, int remote_tcp_port);
    void unbind() { metadata_.reset(); }

    MpcommResolveScope scope();
    // What `target`'s descriptor says about the peer, from this thread's
    // cache while the lease stands (a suspected segment is read afresh);
    // `peer` is null only when no descriptor could be read. `peer` is the
    // cache entry, not a counted reference: a later resolve() may evict it
    // into `retired`, which the caller keeps while it uses `peer`.
    Status resolve(SegmentID target, const MpcommResolveScope& scope,
                   MpcommResolvedPeer*& peer,
                   std::vector<std::shared_ptr<MpcommResolvedPeer>>& retired);
    // What resolve() would hand out for `target` when the cache entry
    // stands and its peer is ready, else null; for a caller whose
    // stillReady() failed. Reads nothing, evicts nothing.
    const MpcommResolvedPeer* readyPeer(SegmentID target,
                                        const MpcommResolveScope& scope);
    // A transfer to `target` failed: its next use re-reads the descriptor.
    void suspect(SegmentID target);
    // Pre-connect: starts `handle`'s handshake if one is due, not waiting.
    void warmup(SegmentID handle);

 private:
    bool takeSuspicion(SegmentID target);
    void readDescriptor(const SegmentDescRef& desc, MpcommResolvedPeer& peer);

    MpcommPeerRegistry& registry_;
    std::shared_ptr<ControlService> metadata_;
    int remote_tcp_port_ = 0;
    uint64_t owner_ = 0;

    // Read on the hot path only while suspect_count_ is non-zero.
    std::mutex suspect_mu_;
    std::unordered_set<SegmentID> suspect_;
    std::atomic<size_t> suspect_count_{0};
};

}  // namespace mooncake::tent
