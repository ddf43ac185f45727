// SubmissionRouter: the transport of each request of one engine
// submission (TransferEngineImpl::submitInternal).
//
// The selector needs where both ends live (the local buffer's and the
// target buffer's locations) and whether the target is on this host. A
// submission mostly repeats itself, so the router answers from what it
// has already decided whenever that still holds:
// - a run: a request with the previous one's target and hint takes the
//   previous one's transport;
// - a target change: a hinted request between host memory on both sides
//   is routed by facts of the target's descriptor and the local snapshot
//   alone, so the decision is memoised with the target's descriptor
//   (RemoteDescMemo::findRouted(): a bounds check and one compare);
// - otherwise the descriptor is found in the memo (or the manager), the
//   buffers of both sides are looked up (the previous hit first) and the
//   selector decides; a request whose target buffer is not in a cached
//   descriptor re-reads it once (metadata/miss_refresh_interval_ms).
// The first two are inline: they are every request of a submission to
// one peer and of one rotating over many.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "runtime/buffer_lookup.h"
#include "runtime/remote_desc_memo.h"
#include "tent/runtime/platform.h"
#include "tent/runtime/segment_manager.h"
#include "tent/runtime/transport_selector.h"

namespace mooncake::tent {

class TransferEngineImpl;

class SubmissionRouter {
 public:
    // Reads what every request of the submission shares: the calling
    // thread's memo, the local snapshot, the manager's change count and
    // clock, the selector's generation. `engine` maps a chosen type to its
    // loaded transport; `batch_id` names the batch in warnings.
    SubmissionRouter(const TransferEngineImpl& engine, SegmentManager& segments,
                     const TransportSelector& selector, BatchID batch_id);

    // The transport of `request`, task `task` of the batch; null when it
    // cannot be routed (the reason is logged) or the type chosen is not
    // loaded.
    Transport* route(const Request& request, size_t task) {
        if (request.target_id == last_target_ && run_transport_ != nullptr &&
            request.transport_hint == run_hint_) {
            return run_transport_;
        }
        if (request.target_id != last_target_) {
            // `desc_` is found only when no decision answers.
            last_target_ = request.target_id;
            desc_ = nullptr;
            entry_ = memo_.findRouted(
                last_target_,
                RemoteDescMemo::routeKey(route_base_, request.transport_hint));
            run_transport_ = entry_ != nullptr ? entry_->route : nullptr;
            if (run_transport_ != nullptr) {
                run_hint_ = request.transport_hint;
                return run_transport_;
            }
        }
        return routeSlow(request, task);
    }

 private:
    // Everything route() does not answer inline.
    Transport* routeSlow(const Request& request, size_t task);
    // Finds the descriptor of last_target_ (and what is read of it per
    // target); false, with the reason logged, when there is none.
    bool loadTarget(size_t task);
    // The selector's choice for `request` to `desc_`; `missed` when it
    // failed because no buffer of the target covers the range (what a
    // re-read of a stale descriptor may cure).
    Status select(const Request& request, TransportType& chosen, bool& missed);
    void noteFacts();

    const TransferEngineImpl& engine_;
    SegmentManager& segments_;
    const TransportSelector& selector_;
    const BatchID batch_id_;
    // Held by `memo_` (this thread's) until its next call.
    RemoteDescMemo& memo_;
    const SegmentDesc* local_ = nullptr;
    // The change count before the clock: see RemoteLease::currentAt().
    uint64_t changes_ = 0;
    SegmentManager::CacheClock::time_point now_;
    // Whether every local buffer, and unregistered memory, is host memory.
    bool local_dram_ = false;
    // Whether the selector reads same_machine and same_user: otherwise a
    // request to another peer would pay for string and map look-ups
    // nobody reads.
    bool facts_ = false;
    const std::string* own_user_ = nullptr;
    // The submission's RemoteDescMemo::routeBase(); 0, so that nothing is
    // found or noted, unless the local side is host memory.
    uint64_t route_base_ = 0;

    // The target of the last request, its descriptor (null until a request
    // needed it), the descriptor's memo entry (null while the memo does
    // not hold it in a slot) and what is read of it.
    SegmentID last_target_ = LOCAL_SEGMENT_ID;
    const SegmentDesc* desc_ = nullptr;
    const RemoteDescMemo::Entry* entry_ = nullptr;
    bool remote_all_dram_ = false;
    bool same_machine_ = false;
    bool same_user_ = false;
    // The memoised decision of the last request and its hint, for the
    // requests after it to the same target.
    Transport* run_transport_ = nullptr;
    TransportType run_hint_ = UNSPEC;

    BufferLookup local_lookup_;
    BufferLookup remote_lookup_;
    std::shared_ptr<Platform> platform_;  // fetched on the first need
};

}  // namespace mooncake::tent
