// TransferEngineImpl batches: routing requests to transports, and freeing
// batches (their status reads: engine_batch_status.cpp).
//
// Freeing a batch never leaves a transfer writing into memory the caller
// may release next: freeBatch() waits, up to batch/free_timeout_ms, for
// every task of the batch to leave PENDING (a transport reports a task
// done only once it no longer touches its local buffer), and refuses with
// an error naming the count and the key when some are still in flight;
// the batch then stays allocated and can be freed again later.
//
// Status reads take no lock: the batch is found and pinned through
// EngineBatchTable (see engine_batch_table.h), and only the tasks a
// finished submission published are read. A submission or a free claims
// the batch with one compare-and-swap on its state word instead of a
// mutex.
#include <glog/logging.h>

#include <chrono>
#include <string>
#include <vector>

#include "runtime/buffer_lookup.h"
#include "runtime/remote_desc_memo.h"
#include "runtime/transfer_engine_impl.h"
#include "tent/runtime/platform.h"

namespace mooncake::tent {

namespace {

// The SHM attribute of `desc` (its user id, see targetFacts), or null.
const std::string* shmUserOf(const SegmentDesc& desc) {
    return desc.type == SegmentType::Memory
               ? desc.getMemory().getTransportAttrs(SHM)
               : nullptr;
}

// Whether the target of `desc` (segment `target_id`) is on this host, and
// runs as this process's user (shm publishes its user id; only an equal
// one can map ours: `own_user`, the local segment's).
void targetFacts(const SegmentDesc& local, const std::string* own_user,
                 const SegmentDesc& desc, SegmentID target_id,
                 bool& same_machine, bool& same_user) {
    same_machine =
        target_id == LOCAL_SEGMENT_ID ||
        (!desc.machine_id.empty() && desc.machine_id == local.machine_id);
    const std::string* peer_user = same_machine ? shmUserOf(desc) : nullptr;
    same_user = peer_user && own_user && *peer_user == *own_user;
}

// Whether every buffer `desc` holds is host memory (or it holds none: a
// file segment), as its indexBuffers() counted them.
inline bool allDramTarget(const SegmentDesc& desc) {
    return desc.type != SegmentType::Memory || desc.getMemory().allDram();
}

// Finds the batch `id` names and claims `flags` (see EngineBatch::claim)
// on it; null when that failed, with `claim` saying why (kOk: no such
// batch). Builds no Status: claimRefused() does, on the failure path only.
inline EngineBatch* claimBatch(EngineBatchTable& table, BatchID id,
                               uint64_t flags, EngineBatch::Claim& claim) {
    EngineBatch* batch = table.lookup(id);
    if (batch == nullptr) {
        claim = EngineBatch::Claim::kUnknown;
        return nullptr;
    }
    claim = batch->claim(EngineBatchTable::generationOf(id), flags);
    return claim == EngineBatch::Claim::kOk ? batch : nullptr;
}

// Why claimBatch() for `operation` refused `id`.
Status claimRefused(const char* operation, BatchID id, uint64_t flags,
                    EngineBatch::Claim claim) {
    if (claim != EngineBatch::Claim::kFreeing) {
        return unknownBatch(operation, id);
    }
    return Status::InvalidArgument(
        std::string(operation) + ": batch " + std::to_string(id) +
        ((flags & EngineBatch::kFreeing) != 0 ? " is already being freed"
                                              : " is being freed"));
}

}  // namespace

Status unknownBatch(const char* operation, BatchID id) {
    return Status::InvalidArgument(std::string(operation) +
                                   ": unknown batch id " + std::to_string(id));
}

Status taskOutOfRange(const char* operation, size_t task_id, BatchID id,
                      size_t count) {
    return Status::InvalidArgument(
        std::string(operation) + ": task id " + std::to_string(task_id) +
        " out of range (batch " + std::to_string(id) + " has " +
        std::to_string(count) + " tasks)");
}

EngineBatch* TransferEngineImpl::pinBatch(BatchID id) const {
    EngineBatch* batch = batches_.lookup(id);
    if (batch == nullptr || !batch->pin(EngineBatchTable::generationOf(id))) {
        return nullptr;
    }
    return batch;
}

Transport* TransferEngineImpl::transportOf(TransportType type) const {
    for (const Loaded& l : transports_) {
        if (l.entry->type == type) return l.transport.get();
    }
    return nullptr;
}

BatchID TransferEngineImpl::allocateBatch(size_t batch_size) {
    if (!available()) {
        LOG(ERROR) << notAvailable().message();
        return 0;
    }
    if (batch_size == 0) {
        LOG(ERROR) << "allocateBatch: batch size must be positive";
        return 0;
    }
    return batches_.allocate(batch_size);
}

Status TransferEngineImpl::countInFlight(EngineBatch& batch,
                                         size_t& in_flight) {
    in_flight = 0;
    const size_t count = batch.published.load(std::memory_order_acquire);
    MetricsClock clock;
    for (size_t i = 0; i < count; ++i) {
        // Acquire: the reader that saw it final saw the transfer done.
        if (batch.tasks[i].settled.load(std::memory_order_acquire)) continue;
        TransferStatus status;
        // Polling also drives progress on transports that complete tasks
        // when asked.
        CHECK_STATUS(taskStatus(batch, i, status, false, &clock));
        if (status.s == PENDING || status.s == INITIAL) ++in_flight;
    }
    return Status::OK();
}

Status TransferEngineImpl::freeBatch(BatchID batch_id) {
    if (!available()) return notAvailable();
    // Closed to readers from the claim on: once those inside have left,
    // nothing reads the batch but this call.
    constexpr uint64_t kFlags = EngineBatch::kFreeing | EngineBatch::kClosing;
    EngineBatch::Claim claim;
    EngineBatch* batch = claimBatch(batches_, batch_id, kFlags, claim);
    if (batch == nullptr) {
        return claimRefused("freeBatch", batch_id, kFlags, claim);
    }
    const uint32_t generation = EngineBatchTable::generationOf(batch_id);
    batch->waitUnpinned();
    // Holding kFreeing: no submission gets in while this counts and waits.
    size_t in_flight = 0;
    Status s = countInFlight(*batch, in_flight);
    if (s.ok() && in_flight > 0) {
        // Status reads answer again while this waits.
        batch->state.store(
            EngineBatch::idleState(generation) | EngineBatch::kFreeing,
            std::memory_order_release);
        s = waitForTasks(*batch, batch_id, in_flight);
        if (s.ok()) {
            // Closed again, and the readers let in meanwhile waited out,
            // before the generation moves (no task can be added back).
            batch->state.store(EngineBatch::idleState(generation) |
                                   EngineBatch::kFreeing |
                                   EngineBatch::kClosing,
                               std::memory_order_seq_cst);
            batch->waitUnpinned();
        }
    }
    if (!s.ok()) {
        batch->unclaim(generation);
        return s;
    }
    // Every task is final now: a notification whose submission completed
    // and that no status read sent yet goes out before the batch does.
    // Submissions are held off (kFreeing), so none is added meanwhile.
    if (batch->open_hooks.load(std::memory_order_acquire) != 0) {
        fireNotifyHooks(*batch, /*wait=*/true);
    }
    // No reader is inside and none gets in: a plain store is enough. The
    // id is invalid from here on.
    batch->state.store(
        EngineBatch::idleState(EngineBatchTable::nextGeneration(generation)),
        std::memory_order_release);
    batches_.recycle(batch);
    return Status::OK();
}

Status TransferEngineImpl::waitForTasks(EngineBatch& batch, BatchID batch_id,
                                        size_t in_flight) {
    // The configuration and the clock are read only when there is
    // something to wait for.
    const int wait_ms =
        conf_->get("batch/free_timeout_ms", kDefaultFreeBatchTimeoutMs);
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::milliseconds(wait_ms);
    // Transports report completion only when polled, so this polls.
    for (int round = 0; in_flight > 0; ++round) {
        if (std::chrono::steady_clock::now() >= deadline) break;
        engineBackoff(round);
        CHECK_STATUS(countInFlight(batch, in_flight));
    }
    if (in_flight == 0) return Status::OK();
    return Status::InvalidArgument(
        "freeBatch: batch " + std::to_string(batch_id) + " still has " +
        std::to_string(in_flight) +
        " task(s) in flight after batch/free_timeout_ms=" +
        std::to_string(wait_ms) +
        " ms; it stays allocated, free it again once they finish");
}

Status TransferEngineImpl::submitTransfer(
    BatchID batch_id, const std::vector<Request>& request_list) {
    return submitInternal(batch_id, request_list, nullptr);
}

Status TransferEngineImpl::submitInternal(
    BatchID batch_id, const std::vector<Request>& request_list,
    EngineBatch::NotifyHook* hook) {
    if (!available()) return notAvailable();
    EngineBatch::Claim claim;
    EngineBatch* batch =
        claimBatch(batches_, batch_id, EngineBatch::kSubmitting, claim);
    if (batch == nullptr) {
        return claimRefused("submitTransfer", batch_id,
                            EngineBatch::kSubmitting, claim);
    }
    const uint32_t generation = EngineBatchTable::generationOf(batch_id);
    // Lets go of kSubmitting on every return below.
    struct Unclaim {
        EngineBatch* batch;
        uint32_t generation;
        ~Unclaim() { batch->unclaim(generation); }
    } unclaim{batch, generation};
    // Only submissions (holding kSubmitting) move it.
    const size_t base = batch->published.load(std::memory_order_relaxed);
    if (request_list.size() > batch->capacity - base) {
        return Status::TooManyRequests(
            "batch " + std::to_string(batch_id) + ": " +
            std::to_string(request_list.size()) +
            " requests exceed the remaining capacity " +
            std::to_string(batch->capacity - base) + " of " +
            std::to_string(batch->capacity));
    }

    // Route each request: its TaskRef names the chosen transport until the
    // transport accepts it. The selector needs where both ends live (the
    // local buffer's and the target buffer's locations) and whether the
    // target is on this host; consecutive requests to one segment share a
    // descriptor look-up, and buffer look-ups try the previous hit first.
    EngineBatch::TaskRef* refs = batch->tasks.data() + base;
    Transport* first = nullptr;
    bool one_transport = true;
    // Held by `memo` (this thread's) until its next call: a submission that
    // rotates over many peers finds each in O(1), with one clock read, and
    // the local snapshot without the manager's mutex.
    RemoteDescMemo& memo = RemoteDescMemo::forThread(*segments_);
    const SegmentDesc* const local = &memo.local(*segments_);
    BufferLookup local_lookup;
    BufferLookup remote_lookup;
    SegmentID last_target = LOCAL_SEGMENT_ID;
    // The change count before the clock: see RemoteLease::currentAt().
    const uint64_t changes = segments_->remoteChanges();
    const SegmentManager::CacheClock::time_point now =
        SegmentManager::cacheNow();
    const SegmentDesc* desc = nullptr;
    // desc's memo entry while the memo holds it in a slot, else null.
    const RemoteDescMemo::Entry* entry = nullptr;
    bool same_machine = false;
    bool same_user = false;
    std::shared_ptr<Platform> platform;  // fetched on the first need
    const bool local_dram = local->type == SegmentType::Memory &&
                            local->getMemory().allDram() &&
                            currentPlatformIsCpu();
    // Found per target only when the selector can use them (shm or nvlink
    // loaded, or a rule on same_machine): otherwise a request to another
    // peer would pay for string and map look-ups nobody reads.
    const bool facts = selector_.usesTargetFacts();
    const std::string* own_user = facts ? shmUserOf(*local) : nullptr;
    // allDramTarget() of the target `desc`.
    bool remote_all_dram = false;
    // Found per target change, which a submission rotating over peers
    // makes on every request: the common part inline, the facts (a called
    // lambda) only when the selector reads them.
    auto onTargetFacts = [&]() {
        targetFacts(*local, own_user, *desc, last_target, same_machine,
                    same_user);
    };
    // A hinted request between host memory on both sides is routed by
    // facts of the target's descriptor and the local snapshot alone (no
    // buffer of either side is looked at): the decision is memoised with
    // the descriptor, under the local version and the selector's state
    // and the lease's change count (route_base; 0, so that nothing is
    // found or noted, unless the local side is host memory).
    const uint64_t route_base =
        local_dram ? memo.routeBase(memo.localVersion(), selector_.generation(),
                                    changes, now)
                   : 0;
    // The memoised decision of the last request and its hint, for the
    // requests after it to the same target (reset on a target change).
    Transport* run_transport = nullptr;
    TransportType run_hint = UNSPEC;
    // One clock read stamps the whole submission.
    const uint64_t submitted_us = metrics_ ? metricsNowUs() : 0;
    // Read once: the stores into refs below may alias members.
    const bool copy_requests = copy_requests_;
    const bool metered = metrics_ != nullptr;
    // Sizes read once: the compiler cannot hoist them past the stores
    // below, and each is a division.
    const size_t count = request_list.size();
    // OK at the top of every iteration (a failure resets it before it
    // moves on): one Status for the loop, not one per request.
    Status s;
    for (size_t i = 0; i < count; ++i) {
        const Request& request = request_list[i];
        refs[i].clear();
        if (copy_requests) refs[i].request = request;
        if (metered) {
            refs[i].opcode = request.opcode;
            refs[i].length = request.length;
        }
        refs[i].start_us = submitted_us;
        Transport* chosen_transport = nullptr;
        if (request.target_id == last_target && run_transport != nullptr &&
            request.transport_hint == run_hint) {
            // The previous request's decision, for the same target and hint
            // (a run: the usual batch to one peer).
            chosen_transport = run_transport;
        } else {
            const uint64_t key =
                RemoteDescMemo::routeKey(route_base, request.transport_hint);
            if (request.target_id != last_target) {
                // A target change, which a submission rotating over peers
                // makes on every request: the decision noted for the
                // target's descriptor under this request's key, lease
                // included, is all it reads. `desc` is looked up only when
                // there is none.
                last_target = request.target_id;
                desc = nullptr;
                entry = memo.findRouted(last_target, key);
                chosen_transport = entry != nullptr ? entry->route : nullptr;
                run_transport = chosen_transport;
                run_hint = request.transport_hint;
            } else if (entry != nullptr) {
                // The same target with another hint.
                chosen_transport = entry->routeFor(key);
                if (chosen_transport != nullptr) {
                    run_transport = chosen_transport;
                    run_hint = request.transport_hint;
                }
            }
            if (chosen_transport == nullptr && desc == nullptr) {
                remote_lookup.reset();
                entry = memo.findEntry(last_target, now, changes);
                if (entry != nullptr) {
                    desc = entry->desc.get();
                    remote_all_dram = entry->all_dram;
                } else {
                    s = memo.get(*segments_, last_target, now, desc);
                    entry = memo.entryOf(last_target);
                    if (s.ok() && !desc) s = noSegmentDescriptor(last_target);
                    if (desc) remote_all_dram = allDramTarget(*desc);
                }
                if (facts && desc) onTargetFacts();
            }
        }
        if (s.ok() && chosen_transport == nullptr) {
            const bool memoised_route = local_dram && remote_all_dram &&
                                        request.transport_hint != UNSPEC;
            // Chooses the transport of `req` to the target `desc` holds;
            // defined here, on the path that calls it, so that a request routed
            // from the memo does not build its closure;
            // `missed` when it failed because no buffer of the target covers
            // the range (what a re-read of a stale descriptor may cure).
            auto route = [&](const Request& req, TransportType& chosen,
                             bool& missed) {
                missed = false;
                // Where every buffer of a side is host memory (and, locally,
                // unregistered memory is too: the CPU platform), the pair is
                // known without finding that side's buffer: a hinted request
                // skips the target's look-up and every request the source's. A
                // refusal is decided again with both found, so that its message
                // names the buffers' own locations.
                const bool remote_dram =
                    req.transport_hint != UNSPEC && remote_all_dram;
                Status s;
                for (bool full = !remote_dram && !local_dram;; full = true) {
                    RouteContext context;
                    context.segment_type = desc->type;
                    context.segment_name = desc->name;
                    context.same_machine = same_machine;
                    context.same_user = same_user;
                    // Each side's kind is known where all its memory is host
                    // memory (counted once per descriptor, when it was
                    // indexed): the selector then parses no location.
                    // local_dram covers unregistered memory too (the CPU
                    // platform places it there).
                    if (local_dram) context.local_kind = MemoryKind::kDram;
                    if (remote_all_dram)
                        context.remote_kind = MemoryKind::kDram;
                    if (full || !remote_dram) {
                        const BufferDesc* remote = remote_lookup.find(
                            *desc, req.target_offset, req.length);
                        if (remote != nullptr) {
                            context.remote_location = remote->location;
                            context.buffer_transports = &remote->transports;
                        }
                    }
                    const BufferDesc* source =
                        full || !local_dram
                            ? local_lookup.find(
                                  *local,
                                  reinterpret_cast<uintptr_t>(req.source),
                                  req.length)
                            : nullptr;
                    // Memory no transport registered is placed by the platform,
                    // so that an unregistered device pointer is still known as
                    // one. The CPU platform has only DRAM to answer, so it is
                    // not asked (nor fetched).
                    Location located;
                    if (source != nullptr) {
                        context.local_location = source->location;
                    } else if (!local_dram && !currentPlatformIsCpu()) {
                        if (!platform) platform = currentPlatform();
                        if (platform->locate(req.source, req.length, located)
                                .ok()) {
                            context.local_location = located;
                        }
                    }
                    s = selector_.select(req, context, chosen);
                    if (s.ok() || full) {
                        // A hint is not checked against the target's buffers,
                        // so only an unhinted refusal can be a miss.
                        missed = !s.ok() && req.transport_hint == UNSPEC &&
                                 context.buffer_transports == nullptr;
                        return s;
                    }
                }
            };
            TransportType chosen = UNSPEC;
            bool missed = false;
            s = route(request, chosen, missed);
            // The cached descriptor may predate the buffer the request
            // names (the peer registered it since): re-read it, within
            // metadata/miss_refresh_interval_ms, and route once more. A
            // miss that persists fails with the text it had.
            if (missed) {
                bool refreshed = false;
                SegmentDescRef fresh;
                Status r = segments_->refreshAfterMiss(fresh, request.target_id,
                                                       refreshed);
                if (!r.ok()) {
                    LOG(WARNING) << "Batch " << batch_id << " task " << base + i
                                 << ": re-reading the descriptor "
                                 << "after a miss failed: " << r.message();
                } else if (refreshed) {
                    desc = fresh.get();
                    memo.replace(request.target_id, std::move(fresh));
                    entry = memo.entryOf(request.target_id);
                    run_transport = nullptr;  // decided on the old one
                    remote_lookup.reset();
                    remote_all_dram = allDramTarget(*desc);
                    if (facts) onTargetFacts();
                    s = route(request, chosen, missed);
                }
            }
            if (s.ok()) chosen_transport = transportOf(chosen);
            // A hint never misses, so `desc` is still the memo's.
            if (memoised_route && chosen_transport != nullptr) {
                memo.noteRoute(last_target,
                               RemoteDescMemo::routeKey(route_base,
                                                        request.transport_hint),
                               chosen_transport, now, changes);
                run_transport = chosen_transport;
                run_hint = request.transport_hint;
            }
        }
        if (!s.ok()) {
            LOG(WARNING) << "Batch " << batch_id << " task " << base + i
                         << " failed: " << s.message();
            one_transport = false;
            s = Status::OK();
            continue;
        }
        refs[i].transport = chosen_transport;
        if (i == 0) first = chosen_transport;
        if (chosen_transport == nullptr || chosen_transport != first) {
            one_transport = false;
        }
    }

    // One submission per transport, in transports_ order. The common case,
    // every request on one transport, passes the caller's list as is.
    std::vector<Request> requests;
    std::vector<size_t> positions;
    for (Loaded& loaded : transports_) {
        Transport* transport = loaded.transport.get();
        const std::vector<Request>* list = &request_list;
        if (one_transport) {
            if (transport != first) continue;
        } else {
            requests.clear();
            positions.clear();
            for (size_t i = 0; i < count; ++i) {
                if (refs[i].transport != transport) continue;
                requests.push_back(request_list[i]);
                positions.push_back(i);
            }
            if (requests.empty()) continue;
            list = &requests;
        }
        Status issued;
        Transport::SubBatchRef sub = batch->subOf(transport, issued);
        size_t sub_base = 0;
        if (issued.ok()) {
            sub_base = sub->size();
            issued = transport->submitTransferTasks(sub, *list);
        }
        const uint64_t accepted_us = metrics_ ? metricsNowUs() : 0;
        const size_t listed = list->size();
        for (size_t k = 0; k < listed; ++k) {
            EngineBatch::TaskRef& ref = refs[one_transport ? k : positions[k]];
            if (!issued.ok()) {
                // Unrouted, so it reads FAILED, unless another transport
                // may take it (failover.h).
                ref.transport = nullptr;
                if (failover_.enabled() && !isPermanentFailure(issued)) {
                    ref.failed_from = transport;
                    // No transport holds it: the failover reads it here.
                    if (!copy_requests) ref.request = (*list)[k];
                }
                continue;
            }
            ref.sub = sub;
            ref.sub_task = static_cast<int>(sub_base + k);
            ref.accepted_us = accepted_us;
        }
        if (!issued.ok() && metrics_) noteRefused(transport, *list);
        if (!issued.ok()) {
            LOG(WARNING) << "Batch " << batch_id << ": transport "
                         << loaded.entry->name << " rejected " << listed
                         << " request(s): " << issued.message();
        }
    }
    if (hook != nullptr) {
        hook->begin = base;
        hook->end = base + count;
        std::lock_guard<std::mutex> lock(batch->hooks_mu);
        batch->hooks.push_back(std::move(*hook));
        batch->open_hooks.fetch_add(1, std::memory_order_release);
    }
    // Readers may use the new tasks from here on.
    batch->published.store(base + count, std::memory_order_release);
    return Status::OK();
}

}  // namespace mooncake::tent
