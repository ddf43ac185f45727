// RemoteDescMemo: the calling thread's descriptors of the remote segments
// it submitted to, indexed by segment id, each held with its
// SegmentManager::RemoteLease.
//
// A submission that spreads its requests over many peers changes target
// on almost every request. Asking the SegmentManager each time costs a
// thread-local access, a hash look-up, a clock read and two reference
// count updates per request; here a hit costs an index and a lease check
// against a clock read once per submission, so a request to the 64th peer
// costs what a request to the first does. The lease ends on every
// invalidateRemote(), closeRemote(), getRemote() refresh or TTL expiry,
// and an ended lease sends the look-up back to the manager: the memo never
// hands out a descriptor the manager would not.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "tent/runtime/segment_manager.h"
#include "tent/runtime/transport.h"

namespace mooncake::tent {

class RemoteDescMemo {
 public:
    // Segment ids at or past this are looked up in the manager each time:
    // ids are never reused, so a process that opens segments without end
    // would otherwise grow every submitting thread's memo without end.
    static constexpr SegmentID kMaxSlots = 4096;

    // The calling thread's memo for `segments`; emptied first when the
    // thread last used it for another manager.
    static RemoteDescMemo& forThread(const SegmentManager& segments);
    // The calling thread's memo, whatever manager it last served (kept
    // with the rest of the thread's engine state, engine_thread_state.cpp).
    static RemoteDescMemo& ofThread();

    // A routing decision that depends only on the target's descriptor,
    // the local snapshot, the selector's state and the request's hint (a
    // hinted request between host memory on both sides, see
    // SubmissionRouter) is kept with the target's memoised descriptor, so it
    // goes when that does, under one 64-bit key: routeBase() of the
    // submission (an epoch, in the high half) or'ed with the hint
    // (routeKey()). The epoch stands for the local version, the selector's
    // generation, the manager's change count and the TTL of every lease a
    // decision was noted under, so a submission that changes target on
    // every request finds a decision, lease included, with one compare
    // (findRouted()).
    //
    // The base of every key of a submission made under `local_version`,
    // `selector_generation` and `changes` (remoteChanges() read before the
    // submission's `now`), read once per submission; 0 (no decision held
    // or noted) for generation 0, a selector never set up. The epoch moves
    // whenever the three differ from the last call's or `now` reaches the
    // earliest expiry of the leases noted under it, so a key noted under
    // others, or under a lease since expired, never matches.
    uint64_t routeBase(uint64_t local_version, uint64_t selector_generation,
                       uint64_t changes,
                       SegmentManager::CacheClock::time_point now) {
        if (local_version != epoch_local_version_ ||
            selector_generation != epoch_selector_generation_ ||
            changes != epoch_changes_ || now >= epoch_expiry_) {
            newEpoch(local_version, selector_generation, changes);
        }
        return selector_generation == 0 ? 0 : epoch_ << 32;
    }
    // The key of a decision for `hint` under `base` (routeBase()). The
    // whole of the hint's 32 bits is kept, so no two hints share a key,
    // and an UNSPEC (0) hint's key is never noted.
    static uint64_t routeKey(uint64_t base, TransportType hint) {
        return base | static_cast<uint32_t>(hint);
    }

    // The key of no decision: routeBase()'s epoch never fills the high
    // half with ones, so no routeKey() is this.
    static constexpr uint64_t kNoRoute = ~uint64_t{0};

    // Whether every buffer `desc` holds is host memory (or it holds none:
    // a file segment), as its indexBuffers() counted them.
    static bool allDram(const SegmentDesc& desc) {
        return desc.type != SegmentType::Memory || desc.getMemory().allDram();
    }

    // One memoised target: its descriptor with the lease it was handed out
    // under, what a submission reads of it on every target change, and the
    // routing decision noted for it. Everything but the descriptor and the
    // lease is cleared whenever the descriptor is (re)assigned.
    struct Entry {
        SegmentDescRef desc;
        SegmentManager::RemoteLease lease;
        bool all_dram = false;  // allDram(*desc)
        uint64_t route_key = kNoRoute;
        Transport* route = nullptr;
        // The decision noted under `key` (routeKey()), or null.
        Transport* routeFor(uint64_t key) const {
            return route_key == key ? route : nullptr;
        }
    };

    // The memoised entry of `handle` while its lease holds at `now`
    // against `changes` (see RemoteLease::currentAt), else null (then get()
    // asks the manager). Valid until this thread's next get() or
    // replace(). Inline: the hit is the hot path of a submission that
    // changes target on every request.
    const Entry* findEntry(SegmentID handle,
                           SegmentManager::CacheClock::time_point now,
                           uint64_t changes) const {
        if (handle >= slot_count_) return nullptr;
        const Entry& slot = slots_[handle];
        // A lease is only ever current on a slot holding a descriptor.
        return slot.lease.currentAt(now, changes) ? &slot : nullptr;
    }
    // The entry of `handle` when it holds a decision noted under `key`
    // (routeKey() of this submission's base), else null. The key's epoch
    // stands for the lease's change count and TTL (noteRoute()), so the
    // lease is current: findEntry() would answer the same entry.
    const Entry* findRouted(SegmentID handle, uint64_t key) const {
        if (handle >= slot_count_) return nullptr;
        const Entry& slot = slots_[handle];
        return slot.route_key == key ? &slot : nullptr;
    }
    // The entry get() or replace() just filled for `handle`; null for the
    // ids held outside the slots (the local segment, kMaxSlots and past).
    const Entry* entryOf(SegmentID handle) const {
        if (handle >= slot_count_ || handle == LOCAL_SEGMENT_ID) {
            return nullptr;
        }
        return &slots_[handle];
    }

    // The descriptor of the remote segment `handle` in `desc`, valid until
    // this thread's next call on the memo: the memoised one while its
    // lease holds at `now` (SegmentManager::cacheNow()), else the
    // manager's getRemoteCached() answer, memoised. Null with OK when the
    // manager has none.
    Status get(SegmentManager& segments, SegmentID handle,
               SegmentManager::CacheClock::time_point now,
               const SegmentDesc*& desc);

    // Replaces the memoised descriptor of `handle` by `fresh` (a re-read
    // after a miss), without a lease: the next get() asks the manager.
    void replace(SegmentID handle, SegmentDescRef fresh);

    // The manager's local snapshot, valid until this thread's next call of
    // local(): getLocal() locks a mutex, so the snapshot is kept while
    // localVersion() reads the version it was taken after.
    const SegmentDesc& local(const SegmentManager& segments) {
        const uint64_t version = segments.localVersion();
        if (!local_ || version != local_version_) {
            local_ = segments.getLocal();  // taken after reading `version`
            local_version_ = version;
        }
        return *local_;
    }
    // The version of the snapshot local() handed out last.
    uint64_t localVersion() const { return local_version_; }

    // Notes `chosen` for `handle`'s descriptor (the one findEntry() or get()
    // handed out last) under `key` (routeKey() of a base read under
    // `changes`); ignored past kMaxSlots, for a key made of a 0 base or an
    // UNSPEC hint or a null `chosen`, and unless the descriptor's lease is
    // current at `now` against `changes` (one filled since is not what the key
    // stands for).
    void noteRoute(SegmentID handle, uint64_t key, Transport* chosen,
                   SegmentManager::CacheClock::time_point now,
                   uint64_t changes) {
        // The local segment's descriptor is not held in a slot (get()).
        if (handle >= slot_count_ || handle == LOCAL_SEGMENT_ID ||
            chosen == nullptr || (key >> 32) == 0 ||
            static_cast<uint32_t>(key) == 0 ||
            !slots_[handle].lease.currentAt(now, changes)) {
            return;
        }
        slots_[handle].route_key = key;
        slots_[handle].route = chosen;
        // The epoch ends with the first of its leases (routeBase()).
        epoch_expiry_ =
            std::min(epoch_expiry_, slots_[handle].lease.expiresAt());
    }

 private:
    // Points `slot` at `desc` (null: none), clearing what was kept of the
    // previous one.
    static void assign(Entry& slot, SegmentDescRef desc);
    // Moves routeBase()'s epoch to a value no slot's key holds.
    void newEpoch(uint64_t local_version, uint64_t selector_generation,
                  uint64_t changes);

    uint64_t owner_ = 0;  // SegmentManager::instanceId() of the slots
    std::vector<Entry> slots_;
    size_t slot_count_ = 0;  // slots_.size(), kept: the hit path reads it
    SegmentDescRef local_;
    uint64_t local_version_ = 0;
    // Holds what get() or replace() handed out for an id past kMaxSlots.
    SegmentDescRef overflow_;
    // routeBase()'s epoch (1 up to UINT32_MAX - 1: it fits the key's high
    // half, which it never fills with ones, see kNoRoute) and what
    // it stands for.
    uint64_t epoch_ = 0;
    uint64_t epoch_local_version_ = 0;
    uint64_t epoch_selector_generation_ = 0;
    uint64_t epoch_changes_ = 0;
    // The earliest expiry of the leases a decision was noted under in this
    // epoch (none yet: the clock's end).
    SegmentManager::CacheClock::time_point epoch_expiry_ =
        SegmentManager::CacheClock::time_point::max();
};

}  // namespace mooncake::tent
