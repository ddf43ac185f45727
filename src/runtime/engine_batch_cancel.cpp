// TransferEngineImpl::cancelTransfer(): best effort, and it never waits.
//
// The task's verdict (EngineBatch::TaskRef::verdict) is what makes the end
// state exact: the cancel marks it kCancelRequested unless a status read
// already settled it, and whichever status read then sees the transport
// finish the task settles it as CANCELED. A transport that can cancel
// (supportsCancellation(): TCP) drops a task it has not started, which
// then reads CANCELED before the call returns, and gives a task in flight
// no further slice; one that cannot (MPComm: a posted put or get runs to
// its completion) is left to finish. Either way the call returns at once
// and the task keeps reading PENDING until its transport lets go of it, so
// a final status still means no transport touches its buffers any more
// (NIXL's release path cancels, polls, and parks a batch that has not
// settled). Each handle is released where it always is, by the transport
// when it sees the task complete, so exactly once.
#include <glog/logging.h>

#include "runtime/transfer_engine_impl.h"

namespace mooncake::tent {

Status TransferEngineImpl::cancelTransfer(BatchID batch_id, size_t task_id) {
    if (!available()) return notAvailable();
    EngineBatch* batch = pinBatch(batch_id);
    if (batch == nullptr) return unknownBatch("cancelTransfer", batch_id);
    EngineBatchPin pin(batch);
    const size_t count = batch->published.load(std::memory_order_acquire);
    if (task_id >= count) {
        return taskOutOfRange("cancelTransfer", task_id, batch_id, count);
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

    // Where the task runs now: a failover may have moved it.
    const Ref::Where at = ref.where();
    if (at.transport != nullptr && at.transport->supportsCancellation()) {
        Status s = at.transport->cancelTransferTask(at.sub, at.sub_task);
        if (!s.ok()) {
            LOG(WARNING) << "cancelTransfer: transport "
                         << at.transport->getName()
                         << " could not cancel batch " << batch_id << " task "
                         << task_id << ": " << s.message()
                         << "; it reads CANCELED once the transport finishes "
                            "it";
        }
    }
    // One read, not a wait: a task the transport dropped before it started
    // is final now and settles CANCELED here, so the caller's next read
    // finds it so.
    return taskStatus(*batch, task_id, status);
}

}  // namespace mooncake::tent
