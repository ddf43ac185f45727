// The MPComm transport's data path: one MPComm transfer per request,
// polled lazily. A request to a peer this thread found ready is posted as it
// is read; from the first one that is not, the submission resolves each
// distinct target once, starts every handshake it needs at once and waits
// for them together, at most connect_timeout_ms, so that a silent peer
// fails only its own tasks.
#include <glog/logging.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <mutex>
#include <type_traits>
#include <typeinfo>
#include <unordered_map>
#include <utility>
#include <vector>

#include "mpcomm_peer_resolver.h"
#include "tent/transport/mpcomm/mpcomm_transport.h"

namespace mooncake::tent {

namespace {
constexpr size_t kNoTask = static_cast<size_t>(-1);
}  // namespace

// The tasks of one submission bound for one target. Trivially
// destructible, so a submission to many targets pays nothing per slot.
struct MpcommSubmitSlot {
    static constexpr uint32_t kNoError = UINT32_MAX;
    SegmentID target = LOCAL_SEGMENT_ID;
    // Not owned: this thread's resolution cache holds it, or the
    // sub-batch's `retired` once a later target evicted it. Null when the
    // segment could not be resolved.
    MpcommResolvedPeer* peer = nullptr;
    uint32_t error = kNoError;  // index into MpcommSubBatch::slot_errors
    bool settled = false;       // its peer is ready or its error known
    bool issued = false;
    // The slot's tasks in submission order, chained through next_task.
    size_t first = kNoTask;
    size_t last = kNoTask;

    bool ok() const { return error == kNoError; }
};
static_assert(std::is_trivially_destructible_v<MpcommSubmitSlot>);

// Tasks are appended under submit_mu and published to pollers by `count`.
// Final: the transport recognises its sub-batches by exact type.
struct MpcommSubBatch final : Transport::SubBatch {
    MpcommSubBatch(size_t capacity, uint64_t generation)
        : tasks(capacity),
          generation(generation),
          next_task(capacity, kNoTask) {}
    size_t size() const override {
        return count.load(std::memory_order_acquire);
    }
    size_t capacity() const { return tasks.size(); }

    std::vector<MpcommTask> tasks;
    std::atomic<size_t> count{0};
    std::mutex submit_mu;
    // The installation its handles belong to.
    uint64_t generation;

    // Scratch of a submission, under submit_mu; empty between submissions
    // but keeping its memory.
    std::vector<MpcommSubmitSlot> slots;
    std::vector<std::shared_ptr<MpcommResolvedPeer>> retired;
    std::vector<Status> slot_errors;
    std::vector<MpcommPeerRegistry::Ticket> tickets;
    std::vector<size_t> next_task;
    std::unordered_map<SegmentID, size_t> slot_of;  // target -> slot
};

namespace {

// An exact type check (the class is final): dynamic_cast walks the
// hierarchy on every request.
MpcommSubBatch* asMpcomm(Transport::SubBatchRef batch) {
    if (batch == nullptr || typeid(*batch) != typeid(MpcommSubBatch)) {
        return nullptr;
    }
    return static_cast<MpcommSubBatch*>(batch);
}

// `batch` when it is an mpcomm sub-batch holding task `task_id`, else null
// (taskRefused() then says why). No Status on the way: a status poll
// passes here for every request.
inline MpcommSubBatch* holderOf(Transport::SubBatchRef batch, int task_id) {
    MpcommSubBatch* sub = asMpcomm(batch);
    if (sub == nullptr || task_id < 0 ||
        static_cast<size_t>(task_id) >= sub->size()) {
        return nullptr;
    }
    return sub;
}

// Why holderOf(batch, task_id) refused, naming `operation`.
[[gnu::cold, gnu::noinline]] Status taskRefused(Transport::SubBatchRef batch,
                                                int task_id,
                                                const char* operation) {
    const MpcommSubBatch* sub = asMpcomm(batch);
    if (sub == nullptr) {
        return Status::InvalidArgument(std::string("MpcommTransport: ") +
                                       operation +
                                       " got a null or foreign sub-batch");
    }
    return Status::InvalidArgument("MpcommTransport: task id " +
                                   std::to_string(task_id) +
                                   " out of range (sub-batch holds " +
                                   std::to_string(sub->size()) + " tasks)");
}

// Sub-batches this thread freed, kept for its next allocations of the same
// capacity (a batch of one request otherwise pays three allocations and
// three frees, a third of its cost). At most kPooledSubBatches of at most
// kMaxPooledCapacity tasks (under 400 KiB) per thread.
constexpr size_t kPooledSubBatches = 4;
constexpr size_t kMaxPooledCapacity = 1024;

struct SubBatchPool {
    std::unique_ptr<MpcommSubBatch> kept[kPooledSubBatches];
    size_t size = 0;

    MpcommSubBatch* take(size_t capacity) {
        for (size_t i = size; i-- > 0;) {
            if (kept[i]->capacity() == capacity) return removeAt(i).release();
        }
        return nullptr;
    }

    // A full pool lets its oldest go.
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

void failSlot(MpcommSubBatch& sub, MpcommSubmitSlot& slot, Status why) {
    slot.error = static_cast<uint32_t>(sub.slot_errors.size());
    slot.settled = true;
    sub.slot_errors.push_back(std::move(why));
}

[[gnu::cold, gnu::noinline]] void logRefusal(const MpcommTask& task,
                                             const std::string& host_id) {
    LOG(ERROR) << "MpcommTransport: MPComm refused a "
               << (task.request.opcode == Request::WRITE ? "WRITE" : "READ")
               << " of " << task.request.length << " bytes to " << host_id
               << " at " << mpcommHexAddr(task.request.target_offset);
}

// What issueMpcommTransfer() returned for `task`: PENDING with its handle,
// or FAILED when MPComm refused it.
inline void recordIssue(MpcommTask& task, MpcommTransferHandle handle,
                        const std::string& host_id) {
    if (handle == kInvalidMpcommTransferHandle) logRefusal(task, host_id);
    task.mpcomm_handle.store(handle, std::memory_order_relaxed);
    task.status_word.store(
        handle == kInvalidMpcommTransferHandle ? FAILED : PENDING,
        std::memory_order_relaxed);
}

// The first of `sub`'s `count` tasks that still holds an MPComm handle,
// or `count`: finished tasks gave their handles up, so a sub-batch of
// finished tasks is freed or recycled without the adapter or the gate.
inline size_t firstHeldHandle(const MpcommSubBatch& sub, size_t count) {
    size_t i = 0;
    while (i < count &&
           sub.tasks[i].mpcomm_handle.load(std::memory_order_acquire) ==
               kInvalidMpcommTransferHandle) {
        ++i;
    }
    return i;
}

}  // namespace

Status MpcommTransport::allocateSubBatch(SubBatchRef& batch, size_t max_size) {
    MpcommSubBatch* sub = subBatchPool().take(max_size);
    if (sub != nullptr) {
        sub->count.store(0, std::memory_order_relaxed);
        sub->generation = generation_.load();
    } else {
        sub = new MpcommSubBatch(max_size, generation_.load());
    }
    batch = sub;
    return Status::OK();
}

void MpcommTransport::releaseHandles(MpcommSubBatch& sub, size_t from,
                                     size_t count) {
    const uint64_t open = enterCall();
    if (open == 0) return;
    CallTicket ticket{this};
    if (sub.generation != open) return;
    // The adapter defers the release of a transfer still running.
    for (size_t i = from; i < count; ++i) {
        std::atomic<MpcommTransferHandle>& slot = sub.tasks[i].mpcomm_handle;
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

Status MpcommTransport::freeSubBatch(SubBatchRef& batch) {
    MpcommSubBatch* sub = asMpcomm(batch);
    if (sub == nullptr) {
        return Status::InvalidArgument(
            "MpcommTransport: freeSubBatch got a null or foreign sub-batch");
    }
    const size_t count = sub->size();
    const size_t held = firstHeldHandle(*sub, count);
    if (held < count) releaseHandles(*sub, held, count);
    if (!subBatchPool().keep(sub)) delete sub;
    batch = nullptr;
    return Status::OK();
}

Status MpcommTransport::recycleSubBatch(SubBatchRef& batch, size_t max_size) {
    MpcommSubBatch* sub = asMpcomm(batch);
    if (sub == nullptr || sub->capacity() != max_size) {
        return Transport::recycleSubBatch(batch, max_size);
    }
    const size_t count = sub->size();
    const size_t held = firstHeldHandle(*sub, count);
    if (held < count) releaseHandles(*sub, held, count);
    // What allocateSubBatch() sets on one taken from the pool.
    sub->count.store(0, std::memory_order_relaxed);
    sub->generation = generation_.load();
    return Status::OK();
}

// The slot of `target`, made (and its peer resolved) on first sight.
size_t MpcommTransport::slotFor(MpcommSubBatch& sub, SegmentID target,
                                const MpcommResolveScope& scope) {
    auto [it, fresh] = sub.slot_of.try_emplace(target, sub.slots.size());
    if (!fresh) return it->second;
    MpcommSubmitSlot& slot = sub.slots.emplace_back();
    slot.target = target;
    Status resolved = resolver_->resolve(target, scope, slot.peer, sub.retired);
    if (!resolved.ok()) failSlot(sub, slot, std::move(resolved));
    return it->second;
}

Status MpcommTransport::submitTransferTasks(
    SubBatchRef batch, const std::vector<Request>& request_list) {
    MpcommSubBatch* sub = asMpcomm(batch);
    if (sub == nullptr) {
        return Status::InvalidArgument(
            "MpcommTransport: submitTransferTasks got a null or foreign "
            "sub-batch");
    }
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

    // A request whose peer this thread found ready is issued at once. Any
    // other starts the slot path (one resolution and readiness check per
    // target), which every later request then takes too, so that a
    // target's tasks are issued in submission order.
    std::vector<MpcommSubmitSlot>& slots = sub->slots;
    const MpcommResolveScope scope = resolver_->scope();
    size_t last_slot = kNoTask;
    SegmentID ready_target = LOCAL_SEGMENT_ID;
    const MpcommResolvedPeer* ready_peer = nullptr;
    // Whether no request has taken the slot path yet.
    bool direct = slots.empty();
    for (size_t i = 0; i < request_list.size(); ++i) {
        const size_t index = used + i;
        MpcommTask& task = sub->tasks[index];
        task.request = request_list[i];
        task.transferred_bytes.store(0, std::memory_order_relaxed);
        task.mpcomm_handle.store(kInvalidMpcommTransferHandle,
                                 std::memory_order_relaxed);
        const SegmentID target = request_list[i].target_id;
        if (direct) {
            if (ready_target != target || ready_peer == nullptr) {
                ready_target = target;
                ready_peer = scope.cache->stillReady(target, scope);
                if (ready_peer == nullptr) {
                    ready_peer = resolver_->readyPeer(target, scope);
                }
            }
            if (ready_peer != nullptr) {
                const std::string& host = ready_peer->view.host_id;
                recordIssue(task,
                            issueMpcommTransfer(*adapter_, task.request, host),
                            host);
                continue;
            }
            direct = false;
        }
        size_t s = last_slot;
        if (s == kNoTask || slots[s].target != target) {
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

    for (MpcommSubmitSlot& slot : slots) {
        if (slot.ok() && slot.peer->linkReady()) slot.settled = true;
    }
    // Issues every settled slot, then waits for the others a round at a
    // time, so that a slot is issued as soon as its peer is ready.
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
                recordIssue(task,
                            issueMpcommTransfer(*adapter_, task.request, host),
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

    slots.clear();
    // clear() zeroes the buckets even when empty; the fast path skips it.
    if (!sub->slot_of.empty()) sub->slot_of.clear();
    sub->slot_errors.clear();
    sub->tickets.clear();
    sub->retired.clear();
    sub->count.store(used + request_list.size(), std::memory_order_release);
    return Status::OK();
}

// Settles what the registry can say now about the waiting slots; when
// nothing, waits for any of their handshakes until `deadline`, then fails
// the slots still waiting (their handshakes go on and record the outcome).
void MpcommTransport::settleSome(
    MpcommSubBatch& sub, MpcommPeerRegistry::Clock::time_point deadline) {
    auto fail = [&sub](MpcommSubmitSlot& slot, const Status& cause) {
        failSlot(sub, slot,
                 Status(cause.code(), "MpcommTransport: segment " +
                                          slot.peer->view.host_id + ": " +
                                          std::string(cause.message())));
    };
    // Sized once per submission, so `waiting` may point into it.
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

Status MpcommTransport::getTaskRequest(SubBatchRef batch, int task_id,
                                       Request& request) {
    MpcommSubBatch* sub = holderOf(batch, task_id);
    if (sub == nullptr) return taskRefused(batch, task_id, "getTaskRequest");
    request = sub->tasks[task_id].request;
    return Status::OK();
}

Status MpcommTransport::getTransferStatus(SubBatchRef batch, int task_id,
                                          TransferStatus& status) {
    MpcommSubBatch* sub = holderOf(batch, task_id);
    if (sub == nullptr) return taskRefused(batch, task_id, "getTransferStatus");
    MpcommTask& task = sub->tasks[task_id];
    // A final status needs no gate.
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
