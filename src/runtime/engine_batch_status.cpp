// TransferEngineImpl batches: reading their tasks' progress back (status
// reads take no lock: see engine_batch.cpp and engine_batch_table.h).
#include <string>
#include <vector>

#include "metrics/metric_clock.h"
#include "metrics/tent_metrics.h"
#include "runtime/transfer_engine_impl.h"

namespace mooncake::tent {

// A final `status` read from the transport becomes the task's verdict
// (see engine_batch_table.h).
void EngineBatch::TaskRef::settle(TransferStatus& status) {
    uint8_t v = verdict.load(std::memory_order_acquire);
    while (v < kFinal) {
        const int ended = v == kCancelRequested ? CANCELED : status.s;
        const auto want = static_cast<uint8_t>(kFinal + ended);
        if (verdict.compare_exchange_weak(v, want, std::memory_order_acq_rel,
                                          std::memory_order_acquire)) {
            v = want;
        }
    }
    status.s = static_cast<TransferStatusEnum>(v - kFinal);
    // A load first, so that polls of a task already settled write nothing.
    if (!settled.load(std::memory_order_relaxed)) {
        settled.store(true, std::memory_order_release);
    }
}

// The first COMPLETED read of a task counts the request and its attempt
// under the task's final transport; later reads write nothing (a load
// first). Stamps come from the time-stamp counter where it is in use.
void TransferEngineImpl::noteCompleted(EngineBatch::TaskRef& ref,
                                       const Transport* transport,
                                       MetricsClock* clock) {
    if (!ref.countOnce()) return;
    uint64_t now = clock ? clock->us : 0;
    if (now == 0) {
        if (__builtin_expect(!metrics::MetricClock::fastNowUs(now), 0)) {
            now = metricsNowUs();
        }
        if (clock) clock->us = now;
    }
    // The spans between the stamps are taken when the event is folded.
    metrics_->recordCompleted(metrics::opOf(ref.opcode), typeOf(transport),
                              ref.length, ref.start_us, ref.accepted_us, now);
}

Status TransferEngineImpl::taskStatus(EngineBatch& batch, size_t task_id,
                                      TransferStatus& status, bool drive,
                                      MetricsClock* clock, bool fire_hooks) {
    EngineBatch::TaskRef& ref = batch.tasks[task_id];
    // Since a failover, the task runs on its route (failover.h).
    const EngineBatch::TaskRef::Where at = ref.where();
    const FailoverRoute* route = at.route;
    // The transport's answer is the one Status object of this call: every
    // return below names `s`, so it is built in the caller's place (a
    // status poll is a few dozen instructions in the transport; a Status
    // built, moved and destroyed on the way out costs a fair part of it).
    Status s = at.transport != nullptr ? at.transport->getTransferStatus(
                                             at.sub, at.sub_task, status)
                                       : Status();
    if (!s.ok()) return s;
    if (!at.transport) {
        status.s = FAILED;
        status.transferred_bytes = 0;
    }
    if (status.s == FAILED && failover_.enabled()) {
        // A poll that may not fail the task over leaves an open one to the
        // progress worker, which moves it or settles it FAILED: settling it
        // here would report FAILED for a task the worker is carrying over
        // (and whose bytes then still arrive).
        const bool may_fail_over = failover_.on_poll || drive;
        const bool worker_decides =
            !may_fail_over && failover_.progress_worker &&
            ref.verdict.load(std::memory_order_acquire) ==
                EngineBatch::TaskRef::kOpen;
        if (worker_decides ||
            (may_fail_over && failOver(batch, task_id, route, status))) {
            if (metrics_)
                noteStatus(ref, at.transport, route, true, PENDING, clock);
            status.s = PENDING;
            status.transferred_bytes = 0;
            if (fire_hooks) fireHooksIfOpen(batch);
            return s;
        }
    }
    if (status.s != PENDING && status.s != INITIAL) {
        ref.settle(status);
        // A poll that sees the task still running records nothing, so it
        // does not pay for the call.
        if (metrics_) {
            if (status.s == COMPLETED) {
                noteCompleted(ref, at.transport, clock);
            } else {
                noteStatus(ref, at.transport, route, status.s == FAILED,
                           status.s, clock);
            }
        }
    }
    if (fire_hooks) fireHooksIfOpen(batch);
    return s;
}

Status TransferEngineImpl::getTransferStatus(BatchID batch_id, size_t task_id,
                                             TransferStatus& status) {
    if (!available()) return notAvailable();
    EngineBatch* batch = pinBatch(batch_id);
    if (batch == nullptr) return unknownBatch("getTransferStatus", batch_id);
    EngineBatchPin pin(batch);
    const size_t count = batch->published.load(std::memory_order_acquire);
    if (task_id >= count) {
        return taskOutOfRange("getTransferStatus", task_id, batch_id, count);
    }
    // Returned as is (no Status copied on the way out): see taskStatus().
    return taskStatus(*batch, task_id, status, /*drive=*/false,
                      /*clock=*/nullptr, /*fire_hooks=*/true);
}

Status TransferEngineImpl::getTransferStatus(
    BatchID batch_id, std::vector<TransferStatus>& status_list) {
    if (!available()) return notAvailable();
    EngineBatch* batch = pinBatch(batch_id);
    if (batch == nullptr) return unknownBatch("getTransferStatus", batch_id);
    EngineBatchPin pin(batch);
    const size_t count = batch->published.load(std::memory_order_acquire);
    status_list.assign(count, TransferStatus());
    MetricsClock clock;
    for (size_t i = 0; i < count; ++i) {
        CHECK_STATUS(taskStatus(*batch, i, status_list[i], false, &clock));
    }
    fireHooksIfOpen(*batch);
    return Status::OK();
}

Status TransferEngineImpl::getTransferStatus(BatchID batch_id,
                                             TransferStatus& overall) {
    std::vector<TransferStatus> list;
    CHECK_STATUS(getTransferStatus(batch_id, list));
    bool pending = false, failed = false;
    overall.transferred_bytes = 0;
    for (const TransferStatus& s : list) {
        overall.transferred_bytes += s.transferred_bytes;
        if (s.s == PENDING || s.s == INITIAL) {
            pending = true;
        } else if (s.s != COMPLETED) {
            failed = true;  // FAILED, TIMEOUT, CANCELED, INVALID
        }
    }
    overall.s = pending ? PENDING : (failed ? FAILED : COMPLETED);
    return Status::OK();
}

Status TransferEngineImpl::progressBatch(BatchID batch_id,
                                         TransferStatus& overall) {
    // Reading every task is the step: transports here make progress on
    // their own threads or when polled. It fails tasks over whatever
    // enable_auto_failover_on_poll says.
    if (!available()) return notAvailable();
    EngineBatch* batch = pinBatch(batch_id);
    if (batch == nullptr) return unknownBatch("progressBatch", batch_id);
    {
        EngineBatchPin pin(batch);
        const size_t count = batch->published.load(std::memory_order_acquire);
        MetricsClock clock;
        for (size_t i = 0; i < count; ++i) {
            TransferStatus status;
            CHECK_STATUS(taskStatus(*batch, i, status, /*drive=*/true, &clock));
        }
    }
    return getTransferStatus(batch_id, overall);
}

}  // namespace mooncake::tent
