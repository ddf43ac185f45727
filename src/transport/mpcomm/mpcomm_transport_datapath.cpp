// The MPComm transport's data path: sub-batches of one MPComm transfer per
// request, polled lazily. A request to a peer this thread has already
// resolved and found ready is posted as it is read. From the first request
// that is not, a submission resolves each distinct target once, starts
// every handshake it needs at once, and waits for them together, at most
// connect_timeout_ms: a peer that does not answer fails only its own tasks,
// and the others' tasks are issued as soon as their peers are ready. Every
// request reaches the adapter from submitTransferTasks() itself, through
// issueMpcommTransfer().
#include <glog/logging.h>

#include <algorithm>
#include <memory>
#include <typeinfo>
#include <utility>
#include <vector>

#include "mpcomm_peer_resolver.h"
#include "tent/transport/mpcomm/mpcomm_transport.h"

namespace mooncake::tent {

namespace {

constexpr size_t kNoTask = MpcommSubmitSlot::kNoTask;

// The sub-batch behind `batch` when this transport allocated it. An exact
// type check (the class is final) instead of dynamic_cast, which walks the
// class hierarchy on every request.
MpcommSubBatch* asMpcomm(Transport::SubBatchRef batch) {
    if (batch == nullptr || typeid(*batch) != typeid(MpcommSubBatch)) {
        return nullptr;
    }
    return static_cast<MpcommSubBatch*>(batch);
}

size_t hashSlotCount(size_t capacity) {
    size_t n = 8;
    while (n < 2 * capacity) n <<= 1;
    return n;
}

// Where `target` starts its probe in a table of `mask + 1` entries.
size_t hashOf(SegmentID target, size_t mask) {
    return static_cast<size_t>(
               static_cast<uint64_t>(target) * 0x9e3779b97f4a7c15ull >> 32) &
           mask;
}

// Sub-batches this thread freed, kept for its next allocations of the same
// capacity: a batch of one request otherwise pays three allocations and
// three frees (the object, its tasks, its task chain), a third of what the
// transport spends on it. Per thread, so keeping and taking share nothing;
// bounded in count and in capacity, so a thread keeps at most
// kPooledSubBatches x kMaxPooledCapacity tasks (under 400 KiB) after its
// largest batches are gone. A sub-batch holds nothing of the transport
// that freed it, so any installation of any MpcommTransport may take it.
constexpr size_t kPooledSubBatches = 4;
constexpr size_t kMaxPooledCapacity = 1024;

struct SubBatchPool {
    std::unique_ptr<MpcommSubBatch> kept[kPooledSubBatches];
    size_t size = 0;

    // Oldest first; the newest of the capacity is taken.
    MpcommSubBatch* take(size_t capacity) {
        for (size_t i = size; i-- > 0;) {
            if (kept[i]->capacity() == capacity) return removeAt(i).release();
        }
        return nullptr;
    }

    // The newest is the likeliest to be asked for again: a full pool lets
    // its oldest go to keep it.
    bool keep(MpcommSubBatch* sub) {
        if (sub->capacity() > kMaxPooledCapacity) return false;
        if (size == kPooledSubBatches) removeAt(0);
        kept[size++].reset(sub);
        return true;
    }

    std::unique_ptr<MpcommSubBatch> removeAt(size_t i) {
        std::unique_ptr<MpcommSubBatch> out = std::move(kept[i]);
        for (; i + 1 < size; ++i) kept[i] = std::move(kept[i + 1]);
        --size;
        return out;
    }
};

SubBatchPool& subBatchPool() {
    thread_local SubBatchPool pool;
    return pool;
}

// Makes `slot`'s tasks fail with `why` when it is issued.
void failSlot(MpcommSubBatch& sub, MpcommSubmitSlot& slot, Status why) {
    slot.error = static_cast<uint32_t>(sub.slot_errors.size());
    slot.settled = true;
    sub.slot_errors.push_back(std::move(why));
}

}  // namespace

Status MpcommTransport::allocateSubBatch(SubBatchRef& batch, size_t max_size) {
    MpcommSubBatch* sub = subBatchPool().take(max_size);
    if (sub != nullptr) {
        sub->reuse(generation_.load());
    } else {
        sub = new MpcommSubBatch(max_size, generation_.load());
    }
    batch = sub;
    return Status::OK();
}

Status MpcommTransport::freeSubBatch(SubBatchRef& batch) {
    MpcommSubBatch* sub = asMpcomm(batch);
    if (sub == nullptr) {
        return Status::InvalidArgument(
            "MpcommTransport: freeSubBatch got a null or foreign sub-batch");
    }
    // A finished task gave its handle up already, so a sub-batch whose
    // tasks are all done needs neither the adapter nor the gate: a load
    // per task finds the first one still holding a handle, if any.
    const size_t count = sub->size();
    size_t held = 0;
    while (held < count &&
           sub->tasks[held].mpcomm_handle.load(std::memory_order_acquire) ==
               kInvalidMpcommTransferHandle) {
        ++held;
    }
    const uint64_t open = held < count ? enterCall() : 0;
    if (open != 0) {
        CallTicket ticket{this};
        if (sub->generation == open) {
            // Transfers still in flight are released here; the adapter
            // defers the provider release until each one is done.
            for (size_t i = held; i < count; ++i) {
                std::atomic<MpcommTransferHandle>& slot =
                    sub->tasks[i].mpcomm_handle;
                if (slot.load(std::memory_order_acquire) ==
                    kInvalidMpcommTransferHandle) {
                    continue;
                }
                MpcommTransferHandle handle =
                    slot.exchange(kInvalidMpcommTransferHandle);
                if (handle != kInvalidMpcommTransferHandle) {
                    adapter_->releaseTransfer(handle);
                }
            }
        }
    }
    if (!subBatchPool().keep(sub)) delete sub;
    batch = nullptr;
    return Status::OK();
}

// The slot of `target` in this submission, made (and its peer resolved)
// on first sight. A scan while the submission has named few targets; past
// kLinearSlots, a hash, so that a batch over many peers stays linear.
size_t MpcommTransport::slotFor(MpcommSubBatch& sub, SegmentID target,
                                const MpcommResolveScope& scope) {
    std::vector<MpcommSubmitSlot>& slots = sub.slots;
    if (!sub.hashed) {
        for (size_t i = 0; i < slots.size(); ++i) {
            if (slots[i].target == target) return i;
        }
        if (slots.size() == MpcommSubBatch::kLinearSlots) {
            // Many targets: index the slots so far, and hash from now on.
            if (sub.slot_index.empty()) {
                sub.slot_index.assign(hashSlotCount(sub.capacity()), -1);
            }
            sub.hashed = true;
            for (size_t i = 0; i < slots.size(); ++i) {
                const size_t mask = sub.slot_index.size() - 1;
                size_t pos = hashOf(slots[i].target, mask);
                while (sub.slot_index[pos] >= 0) pos = (pos + 1) & mask;
                sub.slot_index[pos] = static_cast<int32_t>(i);
                slots[i].hash_pos = pos;
            }
        }
    }
    size_t pos = 0;
    if (sub.hashed) {
        const size_t mask = sub.slot_index.size() - 1;
        for (pos = hashOf(target, mask);; pos = (pos + 1) & mask) {
            int32_t index = sub.slot_index[pos];
            if (index < 0) break;
            if (slots[index].target == target) return index;
        }
        sub.slot_index[pos] = static_cast<int32_t>(slots.size());
    }
    size_t index = slots.size();
    MpcommSubmitSlot& slot = slots.emplace_back();
    slot.target = target;
    slot.hash_pos = pos;
    Status resolved = resolver_->resolve(target, scope, slot.peer, sub.retired);
    if (!resolved.ok()) failSlot(sub, slot, std::move(resolved));
    return index;
}

Status MpcommTransport::submitTransferTasks(
    SubBatchRef batch, const std::vector<Request>& request_list) {
    MpcommSubBatch* sub = asMpcomm(batch);
    if (sub == nullptr) {
        return Status::InvalidArgument(
            "MpcommTransport: submitTransferTasks got a null or foreign "
            "sub-batch");
    }
    // The one liveness check: the installation open now, if any, is the
    // one this sub-batch was allocated for.
    const uint64_t open = enterCall();
    if (open == 0) {
        return Status::InvalidArgument(
            "MpcommTransport: not installed; cannot submit transfers");
    }
    CallTicket call_ticket{this};
    if (sub->generation != open) {
        return Status::InvalidArgument(
            "MpcommTransport: sub-batch was allocated before the transport "
            "was installed; allocate a new one");
    }
    std::lock_guard<std::mutex> lock(sub->submit_mu);
    const size_t used = sub->count.load(std::memory_order_relaxed);
    if (request_list.size() > sub->capacity() - used) {
        return Status::TooManyRequests(
            "MpcommTransport: sub-batch capacity is " +
            std::to_string(sub->capacity()) + ", " + std::to_string(used) +
            " tasks submitted, " + std::to_string(request_list.size()) +
            " more requested");
    }

    // A request whose peer this thread has resolved and found ready is
    // issued at once. Any other (unresolved, failed, not ready, suspected)
    // starts the slot path, which groups tasks by target: one resolution
    // and one readiness check per distinct target, each slot's tasks
    // chained in submission order. From the first slot on, every later
    // request takes the slot path too, so that a target's tasks are
    // issued in submission order.
    std::vector<MpcommSubmitSlot>& slots = sub->slots;
    // One clock read, cache look-up and suspicion check for every target.
    const MpcommResolveScope scope = resolver_->scope();
    size_t last_slot = kNoTask;
    // The last target the fast path resolved, and its peer (null: none).
    SegmentID ready_target = LOCAL_SEGMENT_ID;
    const MpcommResolvedPeer* ready_peer = nullptr;
    for (size_t i = 0; i < request_list.size(); ++i) {
        const size_t index = used + i;
        MpcommTask& task = sub->tasks[index];
        task.request = request_list[i];
        task.transferred_bytes.store(0, std::memory_order_relaxed);
        task.mpcomm_handle.store(kInvalidMpcommTransferHandle,
                                 std::memory_order_relaxed);
        const SegmentID target = request_list[i].target_id;
        if (slots.empty()) {
            if (ready_peer == nullptr || ready_target != target) {
                ready_peer =
                    scope.cache->stillReady(resolver_->owner(), target, scope);
                if (ready_peer == nullptr) {
                    ready_peer = resolver_->readyPeer(target, scope);
                }
                ready_target = target;
            }
            if (ready_peer != nullptr) {
                const std::string& host = ready_peer->view.host_id;
                recordMpcommIssue(
                    task, issueMpcommTransfer(*adapter_, task.request, host),
                    host);
                continue;
            }
            if (slots.capacity() == 0) {
                // Once per sub-batch; most submissions name few targets.
                slots.reserve(std::min<size_t>(request_list.size() - i,
                                               MpcommSubBatch::kLinearSlots));
            }
        }
        size_t s = last_slot;
        if (s == kNoTask || slots[s].target != target) {
            // At most one new slot per request left: growing to that
            // bound at once costs one reallocation where doubling from
            // kLinearSlots took three for a batch of 64 targets.
            if (slots.size() == slots.capacity()) {
                slots.reserve(slots.size() + (request_list.size() - i));
            }
            s = slotFor(*sub, target, scope);
        }
        MpcommSubmitSlot& slot = slots[s];
        if (slot.last == kNoTask) {
            slot.first = index;
        } else {
            sub->next_task[slot.last] = index;
        }
        slot.last = index;
        sub->next_task[index] = kNoTask;
        last_slot = s;
    }

    // A peer whose link says ready is what poll() would answer kReady for,
    // without the registry's lock.
    for (MpcommSubmitSlot& slot : slots) {
        if (slot.ok() && slot.peer->linkReady()) slot.settled = true;
    }
    // Issues every settled slot, then waits for the others, one round at
    // a time, so that a slot is issued as soon as its peer is ready.
    bool deadline_set = false;
    MpcommPeerRegistry::Clock::time_point deadline;
    for (;;) {
        bool waiting = false;
        for (MpcommSubmitSlot& slot : slots) {
            if (slot.issued) continue;
            if (!slot.settled) {
                waiting = true;
                continue;
            }
            slot.issued = true;
            for (size_t index = slot.first; index != kNoTask;
                 index = sub->next_task[index]) {
                MpcommTask& task = sub->tasks[index];
                if (!slot.ok()) {
                    task.status_word.store(FAILED, std::memory_order_relaxed);
                    continue;
                }
                const std::string& host = slot.peer->view.host_id;
                recordMpcommIssue(
                    task, issueMpcommTransfer(*adapter_, task.request, host),
                    host);
            }
            if (!slot.ok())
                LOG(ERROR) << sub->slot_errors[slot.error].message();
        }
        if (!waiting) break;
        if (!deadline_set) {
            deadline = MpcommPeerRegistry::Clock::now() +
                       std::chrono::milliseconds(connect_timeout_ms_);
            deadline_set = true;
        }
        settleSome(*sub, deadline);
    }

    // Leaves the scratch empty for the next submission; the slots' memory
    // stays.
    if (sub->hashed) {
        for (const MpcommSubmitSlot& slot : slots) {
            sub->slot_index[slot.hash_pos] = -1;
        }
        sub->hashed = false;
    }
    slots.clear();
    sub->slot_errors.clear();
    sub->tickets.clear();
    // No slot points at an evicted resolution any more.
    sub->retired.clear();
    // Publishes the filled tasks to pollers.
    sub->count.store(used + request_list.size(), std::memory_order_release);
    return Status::OK();
}

// Settles what the registry can say now about the slots still waiting for
// their peers; when it can say nothing new, waits for any of their
// handshakes, until `deadline`. A handshake that failed or ran out of time
// fails the slot's tasks, naming the segment; it goes on and records its
// outcome, only these tasks stop waiting for it.
void MpcommTransport::settleSome(
    MpcommSubBatch& sub, MpcommPeerRegistry::Clock::time_point deadline) {
    auto fail = [&sub](MpcommSubmitSlot& slot, const Status& cause) {
        failSlot(sub, slot,
                 Status(cause.code(), "MpcommTransport: segment " +
                                          slot.peer->view.host_id + ": " +
                                          std::string(cause.message())));
    };
    // One ticket per slot, by index; sized once per submission, so
    // `waiting` may point into it.
    sub.tickets.resize(sub.slots.size());
    std::vector<MpcommPeerRegistry::Ticket*> waiting;
    bool settled_any = false;
    for (size_t i = 0; i < sub.slots.size(); ++i) {
        MpcommSubmitSlot& slot = sub.slots[i];
        if (slot.settled) continue;
        MpcommPeerRegistry::Ticket& ticket = sub.tickets[i];
        Status error;
        switch (registry_.poll(slot.peer->view, ticket, error)) {
            case MpcommPeerRegistry::Progress::kReady:
                // Later requests to this peer skip poll().
                slot.peer->link = ticket.link();
                slot.settled = settled_any = true;
                break;
            case MpcommPeerRegistry::Progress::kFailed:
                fail(slot, error);
                settled_any = true;
                break;
            case MpcommPeerRegistry::Progress::kWaiting:
                waiting.push_back(&ticket);
                break;
        }
    }
    if (settled_any || waiting.empty()) return;
    if (registry_.waitForAny(waiting, deadline)) return;
    for (MpcommSubmitSlot& slot : sub.slots) {
        if (slot.settled) continue;
        fail(slot, MpcommPeerRegistry::handshakeTimeout(slot.peer->view,
                                                        connect_timeout_ms_));
    }
}

Status MpcommTransport::getTransferStatus(SubBatchRef batch, int task_id,
                                          TransferStatus& status) {
    MpcommSubBatch* sub = asMpcomm(batch);
    if (sub == nullptr) {
        return Status::InvalidArgument(
            "MpcommTransport: getTransferStatus got a null or foreign "
            "sub-batch");
    }
    if (task_id < 0 || static_cast<size_t>(task_id) >= sub->size()) {
        return Status::InvalidArgument("MpcommTransport: task id " +
                                       std::to_string(task_id) +
                                       " out of range (sub-batch holds " +
                                       std::to_string(sub->size()) + " tasks)");
    }
    MpcommTask& task = sub->tasks[task_id];
    // A final status never changes again, and nothing the gate guards is
    // needed to read it: no gate traffic for a task already done.
    TransferStatusEnum done = task.status_word.load(std::memory_order_acquire);
    if (done != PENDING) {
        status.s = done;
        status.transferred_bytes =
            task.transferred_bytes.load(std::memory_order_relaxed);
        return Status::OK();
    }
    const uint64_t open = enterCall();
    if (open == 0) {
        abandonMpcommTask(task);
    } else {
        CallTicket ticket{this};
        if (sub->generation != open) {
            abandonMpcommTask(task);
        } else if (pollMpcommTask(*adapter_, task)) {
            resolver_->suspect(task.request.target_id);
        }
    }
    status.s = task.status_word.load(std::memory_order_acquire);
    status.transferred_bytes =
        task.transferred_bytes.load(std::memory_order_relaxed);
    return Status::OK();
}

}  // namespace mooncake::tent
