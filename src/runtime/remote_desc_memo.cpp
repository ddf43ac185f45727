#include "runtime/remote_desc_memo.h"

#include <utility>

#include "runtime/engine_thread_state.h"

namespace mooncake::tent {

RemoteDescMemo& RemoteDescMemo::forThread(const SegmentManager& segments) {
    RemoteDescMemo& memo = EngineThreadState::get().memo;
    if (memo.owner_ != segments.instanceId()) {
        // Another manager's ids name other segments.
        memo.slots_.clear();
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
    if (handle < slots_.size()) {
        Slot& slot = slots_[handle];
        if (slot.desc && slot.lease.current(now)) {
            desc = slot.desc.get();
            return Status::OK();
        }
    } else {
        slots_.resize(handle + 1);
    }
    Slot& slot = slots_[handle];
    slot.route_key = RouteKey();
    Status s = segments.getRemoteCached(slot.desc, handle, slot.lease);
    if (!s.ok()) slot.desc.reset();
    desc = slot.desc.get();
    return s;
}

void RemoteDescMemo::replace(SegmentID handle, SegmentDescRef fresh) {
    if (handle >= kMaxSlots || handle == LOCAL_SEGMENT_ID) {
        overflow_ = std::move(fresh);
        return;
    }
    if (handle >= slots_.size()) slots_.resize(handle + 1);
    slots_[handle].desc = std::move(fresh);
    slots_[handle].lease.reset();
    slots_[handle].route_key = RouteKey();
}

}  // namespace mooncake::tent
