// Request and completion mapping of the MPComm transport, as free functions
// over the adapter so that they are testable without a transport around
// them: WRITE -> putAsync, READ -> getAsync (one MPComm transfer per
// request), provider outcome -> TransferStatusEnum, handle release. Also
// the tasks' container, MpcommSubBatch, with the scratch a submission uses.
//
// A task is shared between the submitting thread and any number of polling
// threads, so its state is atomic:
//  - mpcomm_handle is held by whichever thread exchanged it for the invalid
//    handle: only that thread asks the adapter about it, reads its result
//    and releases it (or puts it back when the transfer is still running).
//    So a handle is used by one thread at a time, never after its release,
//    and released exactly once however many threads poll the task.
//  - transferred_bytes is stored before status_word; status_word is stored
//    with release and read with acquire, so a reader that sees a final
//    status also sees its byte count.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <type_traits>
#include <vector>

#include "tent/common/types.h"
#include "tent/runtime/transport.h"
#include "tent/transport/mpcomm/mpcomm_adapter.h"
#include "tent/transport/mpcomm/mpcomm_peer_registry.h"

namespace mooncake::tent {

struct MpcommTask {
    Request request;
    std::atomic<TransferStatusEnum> status_word{INITIAL};
    std::atomic<size_t> transferred_bytes{0};
    std::atomic<MpcommTransferHandle> mpcomm_handle{
        kInvalidMpcommTransferHandle};

    MpcommTask() = default;
    // A copy loads each field of `other` on its own, so it is a snapshot
    // only of a task no other thread is polling: a task being built, or
    // one whose status is final. (Upstream's tests build tasks by value.)
    MpcommTask(const MpcommTask& other);
    MpcommTask& operator=(const MpcommTask& other);
};

// A segment descriptor read into what a request needs (defined with the
// transport's peer resolution, src/transport/mpcomm/mpcomm_peer_resolver.h).
struct MpcommResolvedPeer;

// The tasks of one submission bound for one target segment (scratch of
// MpcommTransport::submitTransferTasks()). Trivially destructible, so that a
// submission to many targets pays no constructor or destructor per target:
// what only a failing or waiting slot needs lives beside the slots in the
// sub-batch.
struct MpcommSubmitSlot {
    static constexpr uint32_t kNoError = UINT32_MAX;
    static constexpr size_t kNoTask = static_cast<size_t>(-1);

    SegmentID target = LOCAL_SEGMENT_ID;
    // Null when the segment could not be resolved (the slot's error says
    // why). Not owned: this thread's resolution cache holds it, or the
    // sub-batch's `retired` when a later target evicted it.
    MpcommResolvedPeer* peer = nullptr;
    // kNoError, or where MpcommSubBatch::slot_errors holds why the slot's
    // tasks fail.
    uint32_t error = kNoError;
    // Its peer is ready or its error known: the tasks may be issued.
    bool settled = false;
    bool issued = false;
    // The slot's tasks, in submission order, chained through
    // MpcommSubBatch::next_task.
    size_t first = kNoTask;
    size_t last = kNoTask;
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

    // Scratch of a submission, guarded by submit_mu. It grows on the first
    // submissions to what they need and keeps its memory, so later
    // submissions allocate nothing.
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

// "0x1f000": how the transport's messages print addresses.
std::string mpcommHexAddr(uint64_t addr);

// Posts `request` to `host_id`: putAsync for WRITE, getAsync for READ, with
// request.source as the local address and request.target_offset as the
// remote one. kInvalidMpcommTransferHandle when MPComm refused it.
MpcommTransferHandle issueMpcommTransfer(MpcommAdapter& adapter,
                                         const Request& request,
                                         const std::string& host_id);

// Logs that MPComm refused `task` to `host_id` (out of line: the cold
// half of recordMpcommIssue()).
void logMpcommRefusal(const MpcommTask& task, const std::string& host_id);

// Records what issueMpcommTransfer() returned for `task`: PENDING with its
// handle, or FAILED (and logged, naming `host_id`) when MPComm refused it.
// Inline: it runs once per request on the submit path.
inline void recordMpcommIssue(MpcommTask& task, MpcommTransferHandle handle,
                              const std::string& host_id) {
    if (handle == kInvalidMpcommTransferHandle) {
        logMpcommRefusal(task, host_id);
    }
    task.mpcomm_handle.store(handle, std::memory_order_relaxed);
    task.status_word.store(
        handle == kInvalidMpcommTransferHandle ? FAILED : PENDING,
        std::memory_order_relaxed);
}

// Advances a PENDING task: takes the handle; if the transfer is complete,
// reads the outcome, releases the handle, and stores COMPLETED (success
// whose count of bytes posted is at least the request length; the task
// then reports the request length) or FAILED (an error, or success with
// fewer bytes than requested); else puts the handle back. Does nothing for
// a task that is not PENDING or whose handle another poller holds right
// now. Lazy: only called from status polls. True when this call failed
// the task, so that the caller can suspect its peer.
bool pollMpcommTask(MpcommAdapter& adapter, MpcommTask& task);

// Marks a PENDING task FAILED without touching the adapter (its handle is
// dropped: the provider was shut down and owns it). Used after uninstall().
void abandonMpcommTask(MpcommTask& task);

}  // namespace mooncake::tent
