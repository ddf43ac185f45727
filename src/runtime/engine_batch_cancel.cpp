// TransferEngineImpl::cancelTransfer(): a task ends CANCELED, and once the
// call returns no transport touches its buffers again.
//
// The task's verdict (EngineBatch::TaskRef::verdict) is what makes this
// exact: the cancel marks it kCancelRequested unless a status read already
// settled it, and whichever status read then sees the transport finish
// the task settles it as CANCELED. A transport that can cancel
// (supportsCancellation()) drops a task it has not started at once; for
// one that cannot (MPComm: a posted put or get runs to its completion) the
// call waits, polling, for the transport to report the task done, at most
// batch/cancel_timeout_ms. Each handle is released where it always is,
// by the transport when it sees the task complete, so exactly once.
#include <glog/logging.h>

#include <chrono>

#include "runtime/transfer_engine_impl.h"

namespace mooncake::tent {

Status TransferEngineImpl::cancelTransfer(BatchID batch_id, size_t task_id) {
    if (!available()) return notAvailable();
    EngineBatch* batch = pinBatch(batch_id);
    if (batch == nullptr) {
        return Status::InvalidArgument("cancelTransfer: unknown batch id " +
                                       std::to_string(batch_id));
    }
    EngineBatchPin pin(batch);
    const size_t count = batch->published.load(std::memory_order_acquire);
    if (task_id >= count) {
        return Status::InvalidArgument(
            "cancelTransfer: task id " + std::to_string(task_id) +
            " out of range (batch " + std::to_string(batch_id) + " has " +
            std::to_string(count) + " tasks)");
    }
    using Ref = EngineBatch::TaskRef;
    Ref& ref = batch->tasks[task_id];
    TransferStatus status;
    CHECK_STATUS(taskStatus(*batch, task_id, status));
    uint8_t verdict = Ref::kOpen;
    if (status.s == PENDING || status.s == INITIAL) {
        ref.verdict.compare_exchange_strong(verdict, Ref::kCancelRequested,
                                            std::memory_order_acq_rel);
    } else {
        verdict = ref.verdict.load(std::memory_order_acquire);
    }
    // Final before the cancel could ask: it stays what it ended as.
    if (verdict >= Ref::kFinal) return Status::OK();

    if (ref.transport != nullptr && ref.transport->supportsCancellation()) {
        Status s = ref.transport->cancelTransferTask(ref.sub, ref.sub_task);
        if (!s.ok()) {
            LOG(WARNING) << "cancelTransfer: transport "
                         << ref.transport->getName()
                         << " could not cancel batch " << batch_id << " task "
                         << task_id << ": " << s.message()
                         << "; waiting for it to finish";
        }
    }
    const int wait_ms =
        conf_->get("batch/cancel_timeout_ms", kDefaultCancelTimeoutMs);
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::milliseconds(wait_ms);
    for (int round = 0;; ++round) {
        CHECK_STATUS(taskStatus(*batch, task_id, status));
        if (status.s != PENDING && status.s != INITIAL) return Status::OK();
        if (std::chrono::steady_clock::now() >= deadline) break;
        engineBackoff(round);
    }
    return Status::InvalidArgument(
        "cancelTransfer: batch " + std::to_string(batch_id) + " task " +
        std::to_string(task_id) +
        " is still in flight after batch/cancel_timeout_ms=" +
        std::to_string(wait_ms) +
        " ms; it reads CANCELED once its transport finishes it");
}

}  // namespace mooncake::tent
