// TransferEngineImpl batches: submitting requests to the transports the
// router chose (submission_router.h), and freeing batches (their status
// reads: engine_batch_status.cpp).
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

#include "runtime/submission_router.h"
#include "runtime/transfer_engine_impl.h"

namespace mooncake::tent {

namespace {

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
    // transport accepts it (submission_router.h).
    EngineBatch::TaskRef* refs = batch->tasks.data() + base;
    SubmissionRouter router(*this, *segments_, selector_, batch_id);
    Transport* first = nullptr;
    bool one_transport = true;
    // One clock read stamps the whole submission.
    const uint64_t submitted_us = metrics_ ? metricsNowUs() : 0;
    // Read once: the stores into refs below may alias members.
    const bool copy_requests = copy_requests_;
    const bool metered = metrics_ != nullptr;
    // Sizes read once: the compiler cannot hoist them past the stores
    // below, and each is a division.
    const size_t count = request_list.size();
    for (size_t i = 0; i < count; ++i) {
        const Request& request = request_list[i];
        refs[i].clear();
        if (copy_requests) refs[i].request = request;
        if (metered) {
            refs[i].opcode = request.opcode;
            refs[i].length = request.length;
        }
        refs[i].start_us = submitted_us;
        // Null: unrouted (the router logged why), so it reads FAILED.
        Transport* chosen = router.route(request, base + i);
        refs[i].transport = chosen;
        if (i == 0) first = chosen;
        if (chosen == nullptr || chosen != first) one_transport = false;
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
