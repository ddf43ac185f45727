#include "runtime/remote_desc_memo.h"

#include <utility>

namespace mooncake::tent {

RemoteDescMemo& RemoteDescMemo::forThread(const SegmentManager& segments) {
    RemoteDescMemo& memo = ofThread();
    if (memo.owner_ != segments.instanceId()) {
        // Another manager's ids name other segments.
        memo.slots_.clear();
        memo.slot_count_ = 0;
        memo.overflow_.reset();
        memo.local_.reset();
        memo.owner_ = segments.instanceId();
    }
    return memo;
}

Status RemoteDescMemo::get(SegmentManager& segments, SegmentID handle,
                           SegmentManager::CacheClock::time_point now,
                           const SegmentDesc*& desc) {
    if (handle >= kMaxSlots || handle == LOCAL_SEGMENT_ID) {
        // The local segment has no lease: it changes with every
        // registration, and the manager hands it out without a look-up.
        Status s = segments.getRemoteCached(overflow_, handle);
        desc = overflow_.get();
        return s;
    }
    if (handle < slot_count_) {
        Entry& slot = slots_[handle];
        if (slot.desc && slot.lease.current(now)) {
            desc = slot.desc.get();
            return Status::OK();
        }
    } else {
        slots_.resize(handle + 1);
        slot_count_ = slots_.size();
    }
    Entry& slot = slots_[handle];
    SegmentDescRef fetched = std::move(slot.desc);
    Status s = segments.getRemoteCached(fetched, handle, slot.lease);
    if (!s.ok()) fetched.reset();
    assign(slot, std::move(fetched));
    desc = slot.desc.get();
    return s;
}

void RemoteDescMemo::assign(Entry& slot, SegmentDescRef desc) {
    slot.desc = std::move(desc);
    slot.all_dram = slot.desc && allDram(*slot.desc);
    slot.route_key = kNoRoute;
    slot.route = nullptr;
}

void RemoteDescMemo::newEpoch(uint64_t local_version,
                              uint64_t selector_generation, uint64_t changes) {
    epoch_local_version_ = local_version;
    epoch_selector_generation_ = selector_generation;
    epoch_changes_ = changes;
    epoch_expiry_ = SegmentManager::CacheClock::time_point::max();
    // At 32 bits of ones the epoch would make kNoRoute: every decision is
    // dropped and the count starts over (after 2^32 changes).
    if (++epoch_ >= UINT32_MAX) {
        for (Entry& slot : slots_) {
            slot.route_key = kNoRoute;
            slot.route = nullptr;
        }
        epoch_ = 1;
    }
}

void RemoteDescMemo::replace(SegmentID handle, SegmentDescRef fresh) {
    if (handle >= kMaxSlots || handle == LOCAL_SEGMENT_ID) {
        overflow_ = std::move(fresh);
        return;
    }
    if (handle >= slot_count_) {
        slots_.resize(handle + 1);
        slot_count_ = slots_.size();
    }
    assign(slots_[handle], std::move(fresh));
    slots_[handle].lease.reset();
}

}  // namespace mooncake::tent
