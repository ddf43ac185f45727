// SubmissionRouter: the slow path, when no memoised decision answers.
#include "runtime/submission_router.h"

#include <glog/logging.h>

#include <utility>

#include "runtime/transfer_engine_impl.h"

namespace mooncake::tent {

namespace {

// The SHM attribute of `desc` (its user id, see noteFacts()), or null.
const std::string* shmUserOf(const SegmentDesc& desc) {
    return desc.type == SegmentType::Memory
               ? desc.getMemory().getTransportAttrs(SHM)
               : nullptr;
}

}  // namespace

SubmissionRouter::SubmissionRouter(const TransferEngineImpl& engine,
                                   SegmentManager& segments,
                                   const TransportSelector& selector,
                                   BatchID batch_id)
    : engine_(engine),
      segments_(segments),
      selector_(selector),
      batch_id_(batch_id),
      memo_(RemoteDescMemo::forThread(segments)) {
    local_ = &memo_.local(segments_);
    changes_ = segments_.remoteChanges();  // before the clock
    now_ = SegmentManager::cacheNow();
    local_dram_ = local_->type == SegmentType::Memory &&
                  local_->getMemory().allDram() && currentPlatformIsCpu();
    facts_ = selector_.usesTargetFacts();
    own_user_ = facts_ ? shmUserOf(*local_) : nullptr;
    route_base_ = local_dram_
                      ? memo_.routeBase(memo_.localVersion(),
                                        selector_.generation(), changes_, now_)
                      : 0;
}

// Whether the target is on this host, and runs as this process's user
// (shm publishes its user id; only an equal one can map ours: own_user_,
// the local segment's).
void SubmissionRouter::noteFacts() {
    same_machine_ =
        last_target_ == LOCAL_SEGMENT_ID ||
        (!desc_->machine_id.empty() && desc_->machine_id == local_->machine_id);
    const std::string* peer_user = same_machine_ ? shmUserOf(*desc_) : nullptr;
    same_user_ = peer_user && own_user_ && *peer_user == *own_user_;
}

bool SubmissionRouter::loadTarget(size_t task) {
    remote_lookup_.reset();
    Status s;
    entry_ = memo_.findEntry(last_target_, now_, changes_);
    if (entry_ != nullptr) {
        desc_ = entry_->desc.get();
        remote_all_dram_ = entry_->all_dram;
    } else {
        s = memo_.get(segments_, last_target_, now_, desc_);
        entry_ = memo_.entryOf(last_target_);
        if (s.ok() && desc_ == nullptr) s = noSegmentDescriptor(last_target_);
        if (desc_ != nullptr)
            remote_all_dram_ = RemoteDescMemo::allDram(*desc_);
    }
    if (!s.ok()) {
        desc_ = nullptr;
        LOG(WARNING) << "Batch " << batch_id_ << " task " << task
                     << " failed: " << s.message();
        return false;
    }
    if (facts_) noteFacts();
    return true;
}

Status SubmissionRouter::select(const Request& request, TransportType& chosen,
                                bool& missed) {
    missed = false;
    // Where every buffer of a side is host memory (and, locally,
    // unregistered memory is too: the CPU platform), the pair is known
    // without finding that side's buffer: a hinted request skips the
    // target's look-up and every request the source's. A refusal is
    // decided again with both found, so that its message names the
    // buffers' own locations.
    const bool remote_dram =
        request.transport_hint != UNSPEC && remote_all_dram_;
    for (bool full = !remote_dram && !local_dram_;; full = true) {
        RouteContext context;
        context.segment_type = desc_->type;
        context.segment_name = desc_->name;
        context.same_machine = same_machine_;
        context.same_user = same_user_;
        // Each side's kind is known where all its memory is host memory
        // (counted once per descriptor, when it was indexed): the selector
        // then parses no location.
        if (local_dram_) context.local_kind = MemoryKind::kDram;
        if (remote_all_dram_) context.remote_kind = MemoryKind::kDram;
        if (full || !remote_dram) {
            const BufferDesc* remote = remote_lookup_.find(
                *desc_, request.target_offset, request.length);
            if (remote != nullptr) {
                context.remote_location = remote->location;
                context.buffer_transports = &remote->transports;
            }
        }
        const BufferDesc* source =
            full || !local_dram_
                ? local_lookup_.find(
                      *local_, reinterpret_cast<uintptr_t>(request.source),
                      request.length)
                : nullptr;
        // Memory no transport registered is placed by the platform, so that
        // an unregistered device pointer is still known as one. The CPU
        // platform has only DRAM to answer, so it is not asked (nor
        // fetched).
        Location located;
        if (source != nullptr) {
            context.local_location = source->location;
        } else if (!local_dram_ && !currentPlatformIsCpu()) {
            if (!platform_) platform_ = currentPlatform();
            if (platform_->locate(request.source, request.length, located)
                    .ok()) {
                context.local_location = located;
            }
        }
        Status s = selector_.select(request, context, chosen);
        if (s.ok() || full) {
            // A hint is not checked against the target's buffers, so only
            // an unhinted refusal can be a miss.
            missed = !s.ok() && request.transport_hint == UNSPEC &&
                     context.buffer_transports == nullptr;
            return s;
        }
    }
}

Transport* SubmissionRouter::routeSlow(const Request& request, size_t task) {
    const TransportType hint = request.transport_hint;
    const uint64_t key = RemoteDescMemo::routeKey(route_base_, hint);
    // The same target with another hint: a decision noted for that one.
    if (entry_ != nullptr) {
        if (Transport* noted = entry_->routeFor(key)) {
            run_transport_ = noted;
            run_hint_ = hint;
            return noted;
        }
    }
    if (desc_ == nullptr && !loadTarget(task)) return nullptr;

    TransportType chosen = UNSPEC;
    bool missed = false;
    Status s = select(request, chosen, missed);
    // The cached descriptor may predate the buffer the request names (the
    // peer registered it since): re-read it, within
    // metadata/miss_refresh_interval_ms, and route once more. A miss that
    // persists fails with the text it had.
    if (missed) {
        bool refreshed = false;
        SegmentDescRef fresh;
        Status r = segments_.refreshAfterMiss(fresh, last_target_, refreshed);
        if (!r.ok()) {
            LOG(WARNING) << "Batch " << batch_id_ << " task " << task
                         << ": re-reading the descriptor "
                         << "after a miss failed: " << r.message();
        } else if (refreshed) {
            desc_ = fresh.get();
            memo_.replace(last_target_, std::move(fresh));
            entry_ = memo_.entryOf(last_target_);
            run_transport_ = nullptr;  // decided on the old one
            remote_lookup_.reset();
            remote_all_dram_ = RemoteDescMemo::allDram(*desc_);
            if (facts_) noteFacts();
            s = select(request, chosen, missed);
        }
    }
    if (!s.ok()) {
        LOG(WARNING) << "Batch " << batch_id_ << " task " << task
                     << " failed: " << s.message();
        return nullptr;
    }
    Transport* transport = engine_.transportOf(chosen);
    // A hinted request between host memory on both sides was decided by
    // facts of the two descriptors alone: noted with the target's (a hint
    // never misses, so `desc_` is still the memo's).
    if (transport != nullptr && local_dram_ && remote_all_dram_ &&
        hint != UNSPEC) {
        memo_.noteRoute(last_target_, key, transport, now_, changes_);
        run_transport_ = transport;
        run_hint_ = hint;
    }
    return transport;
}

}  // namespace mooncake::tent
