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
    // submitInternal): kept with the target's memoised descriptor, so it
    // goes when that does, and used while the rest of the key holds.
    struct RouteKey {
        uint64_t local_version = 0;
        uint64_t selector_generation = 0;  // 0: no decision held
        TransportType hint = UNSPEC;
        bool operator==(const RouteKey& o) const {
            return local_version == o.local_version &&
                   selector_generation == o.selector_generation &&
                   hint == o.hint;
        }
    };

    // One memoised target: its descriptor with the lease it was handed out
    // under, what a submission reads of it on every target change, and the
    // routing decision noted for it. Everything but the descriptor and the
    // lease is cleared whenever the descriptor is (re)assigned.
    struct Entry {
        SegmentDescRef desc;
        SegmentManager::RemoteLease lease;
        // Whether all of desc's memory is host memory (or it holds none:
        // a file segment), as its indexBuffers() counted it.
        bool all_dram = false;
        RouteKey route_key;
        Transport* route = nullptr;
        // The decision noted under `key`, or null.
        Transport* routeFor(const RouteKey& key) const {
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
    // handed out last) under `key`; ignored past kMaxSlots.
    void noteRoute(SegmentID handle, const RouteKey& key, Transport* chosen) {
        // The local segment's descriptor is not held in a slot (get()).
        if (handle >= slot_count_ || handle == LOCAL_SEGMENT_ID ||
            key.selector_generation == 0) {
            return;
        }
        slots_[handle].route_key = key;
        slots_[handle].route = chosen;
    }

 private:
    // Points `slot` at `desc` (null: none), clearing what was kept of the
    // previous one.
    static void assign(Entry& slot, SegmentDescRef desc);

    uint64_t owner_ = 0;  // SegmentManager::instanceId() of the slots
    std::vector<Entry> slots_;
    size_t slot_count_ = 0;  // slots_.size(), kept: the hit path reads it
    SegmentDescRef local_;
    uint64_t local_version_ = 0;
    // Holds what get() or replace() handed out for an id past kMaxSlots.
    SegmentDescRef overflow_;
};

}  // namespace mooncake::tent
