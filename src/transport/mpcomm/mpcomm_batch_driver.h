// The MPComm transport's sub-batches (private to the transport): one MPComm
// transfer per request, polled lazily. A request to a peer this thread has
// already resolved and found ready is posted as it is read. From the first
// request that is not, a submission resolves each distinct target once,
// starts every handshake it needs at once, and waits for them together, at
// most connect_timeout_ms: a peer that does not answer fails only its own
// tasks, and the others' tasks are issued as soon as their peers are ready.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <type_traits>
#include <vector>

#include "mpcomm_call_gate.h"
#include "mpcomm_peer_resolver.h"
#include "tent/runtime/transport.h"
#include "tent/transport/mpcomm/mpcomm_peer_registry.h"
#include "tent/transport/mpcomm/mpcomm_task_mapping.h"

namespace mooncake::tent {

// The tasks of one submission bound for one target segment (scratch of
// MpcommBatchDriver::submitTransferTasks()). Trivially destructible, so that a
// submission to many targets pays no constructor or destructor per target: what
// only a failing or waiting slot needs lives beside the slots in the sub-batch.
struct MpcommSubmitSlot {
    static constexpr uint32_t kNoError = UINT32_MAX;

    SegmentID target = LOCAL_SEGMENT_ID;
    // Null when the segment could not be resolved (the slot's error says
    // why). Not owned: this thread's resolution cache holds it, or the
    // sub-batch's `retired` when a later target evicted it (see
    // MpcommPeerResolver::resolve()).
    MpcommResolvedPeer* peer = nullptr;
    // kNoError, or where MpcommSubBatch::slot_errors holds why the slot's
    // tasks fail.
    uint32_t error = kNoError;
    bool settled = false;
    // The slot's tasks, in submission order, chained through
    // MpcommSubBatch::next_task.
    size_t first = static_cast<size_t>(-1);
    size_t last = static_cast<size_t>(-1);
    size_t hash_pos = 0;  // where slot_index holds this slot, if hashed

    bool ok() const { return error == kNoError; }
};
static_assert(std::is_trivially_destructible_v<MpcommSubmitSlot>);

// A fixed-capacity slice of a user batch. Tasks are appended under
// submit_mu and become visible to pollers when `count` is published.
// Final: the transport recognises its sub-batches by exact type.
struct MpcommSubBatch final : Transport::SubBatch {
    MpcommSubBatch(size_t capacity, uint64_t generation);
    size_t size() const override {
        return count.load(std::memory_order_acquire);
    }
    size_t capacity() const { return tasks.size(); }

    std::vector<MpcommTask> tasks;
    std::atomic<size_t> count{0};
    std::mutex submit_mu;
    // The transport installation this sub-batch belongs to; its handles
    // mean nothing to a later installation. Set when the sub-batch is
    // handed out (a pooled one is handed out again, see reuse()).
    uint64_t generation;

    // Makes a freed sub-batch a fresh, empty one of the same capacity for
    // `new_generation`. The scratch below is already empty between
    // submissions, and tasks past `count` are never read, so only the
    // count and the generation change.
    void reuse(uint64_t new_generation) {
        count.store(0, std::memory_order_relaxed);
        generation = new_generation;
    }

    // Scratch of MpcommBatchDriver::submitTransferTasks(), guarded by
    // submit_mu. It grows on the first submissions to what they need and keeps
    // its memory, so later submissions allocate nothing.
    std::vector<MpcommSubmitSlot> slots;
    // Resolutions evicted from this thread's cache during the submission
    // while a slot still points at them; emptied with `slots`.
    std::vector<std::shared_ptr<MpcommResolvedPeer>> retired;
    // The failed slots' errors (MpcommSubmitSlot::error), and one registry
    // ticket per slot while some slot waits for its peer's handshake (the
    // slow path only); emptied with `slots`.
    std::vector<Status> slot_errors;
    std::vector<MpcommPeerRegistry::Ticket> tickets;
    // Per task: the next task of the same slot in this submission.
    std::vector<size_t> next_task;
    // Up to kLinearSlots targets a submission finds its slots by a scan;
    // beyond, through slot_index: open-addressed target -> slot index (-1
    // empty), a power of two of at least twice the capacity, allocated on
    // first need and all -1 between submissions.
    static constexpr size_t kLinearSlots = 8;
    bool hashed = false;
    std::vector<int32_t> slot_index;
};

class MpcommBatchDriver {
 public:
    using SubBatchRef = Transport::SubBatchRef;

    // `adapter` may be null (install() then refuses); everything outlives
    // this.
    MpcommBatchDriver(MpcommAdapter* adapter, MpcommPeerRegistry& registry,
                      MpcommPeerResolver& resolver, MpcommCallGate& gate)
        : adapter_(adapter),
          registry_(registry),
          resolver_(resolver),
          gate_(gate) {}

    // install(), while the gate is closed: sub-batches allocated before
    // now belong to an earlier installation, and a submission waits at most
    // `connect_timeout_ms` for handshakes.
    void start(int64_t connect_timeout_ms) {
        connect_timeout_ms_ = connect_timeout_ms;
        generation_.fetch_add(1);
    }

    // The Transport methods of the same names.
    Status allocateSubBatch(SubBatchRef& batch, size_t max_size);
    Status freeSubBatch(SubBatchRef& batch);
    Status submitTransferTasks(SubBatchRef batch,
                               const std::vector<Request>& request_list);
    Status getTransferStatus(SubBatchRef batch, int task_id,
                             TransferStatus& status);

 private:
    // submitTransferTasks() steps, under the sub-batch's submit_mu: the slot of
    // `target`, made and resolved on first sight; issuing a settled slot's
    // tasks; and waiting, within connect_timeout_ms, for the peers not
    // ready yet.
    size_t slotFor(MpcommSubBatch& sub, SegmentID target,
                   const MpcommResolveScope& scope);
    void issueSlot(MpcommSubBatch& sub, MpcommSubmitSlot& slot);
    // Posts one task to `peer`; FAILED (and logged) when MPComm refuses it.
    void issueTask(MpcommTask& task, const MpcommResolvedPeer& peer);
    // Makes `slot`'s tasks fail with `why` when it is issued.
    static void failSlot(MpcommSubBatch& sub, MpcommSubmitSlot& slot,
                         Status why);
    void settleSlots(MpcommSubBatch& sub);

    MpcommAdapter* const adapter_;
    MpcommPeerRegistry& registry_;
    MpcommPeerResolver& resolver_;
    MpcommCallGate& gate_;
    // Changed only by start(), while the gate is closed.
    std::atomic<uint64_t> generation_{0};
    int64_t connect_timeout_ms_ = 0;
};

}  // namespace mooncake::tent
