// EngineBatchTable: the engine's user batches, found by id without a lock
// (private header).
//
// Why not a mutex and a map: every engine call names its batch by id, and
// a status poll is a few nanoseconds in the transport; a table-wide mutex,
// a map look-up and a shared_ptr copy per call cost more than the poll.
//
// How: a BatchID is (generation << 32) | slot. Slots are never freed while
// the table lives (a freed batch's slot is reused by a later allocation),
// so a pointer read from a slot is always to a live EngineBatch object; the
// generation says whether that object is still the batch the caller means.
// A slot's generation is odd while a batch is allocated in it and even
// while it is free, so an id is valid exactly while its generation is the
// slot's current one. Generations have 31 bits (ids stay positive as a
// signed 64-bit integer): a stale id could match again only after 2^30 reuses
// of its slot.
//
// Status readers take no lock: they pin the batch (a counter) and then
// check the state word. freeBatch() first closes the batch to new readers
// (kClosing, in the compare-and-swap that claims it) and then waits for
// the pins to drain. Both sides use sequentially consistent operations, so
// at least one of them sees the other: either the reader sees kClosing and
// waits outside, or the freer sees the pin and waits for it. With no reader
// inside and none let in, the free moves the generation with a plain store,
// so a free that finds nothing in flight takes one locked instruction: its
// claim. (One that must wait for tasks lets readers in meanwhile, and closes
// the batch again with a sequentially consistent store before it frees.)
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "runtime/failover.h"
#include "tent/common/types.h"
#include "tent/runtime/transport.h"

namespace mooncake::tent {

// A user batch. Each transport that carries one of its requests gets one
// sub-batch (allocated on first use, with the batch's capacity); a user
// task id maps to (transport, sub-task id), or to no transport when the
// request could not be routed or issued (it then reads FAILED).
struct EngineBatch {
    struct TaskRef {
        TaskRef() = default;
        // Copyable for the vector; only a submission writes a whole one.
        TaskRef(const TaskRef& other)
            : transport(other.transport),
              sub(other.sub),
              sub_task(other.sub_task),
              settled(other.settled.load(std::memory_order_relaxed)),
              verdict(other.verdict.load(std::memory_order_relaxed)),
              request(other.request),
              failed_from(other.failed_from),
              moved(other.moved.load(std::memory_order_relaxed)),
              opcode(other.opcode),
              length(other.length),
              start_us(other.start_us),
              accepted_us(other.accepted_us) {}
        TaskRef& operator=(const TaskRef& other) {
            transport = other.transport;
            sub = other.sub;
            sub_task = other.sub_task;
            settled.store(other.settled.load(std::memory_order_relaxed),
                          std::memory_order_relaxed);
            verdict.store(other.verdict.load(std::memory_order_relaxed),
                          std::memory_order_relaxed);
            request = other.request;
            failed_from = other.failed_from;
            moved.store(other.moved.load(std::memory_order_relaxed),
                        std::memory_order_relaxed);
            moving.store(false, std::memory_order_relaxed);
            opcode = other.opcode;
            length = other.length;
            start_us = other.start_us;
            accepted_us = other.accepted_us;
            counted.store(false, std::memory_order_relaxed);
            failure_noted.store(kNoAttempt, std::memory_order_relaxed);
            return *this;
        }

        // Makes it a fresh task for a submission, as assigning TaskRef()
        // would, except for `request`: a submission sets that only when
        // failover or metrics read it, so copying a blank one (a string
        // and an optional) for every task is left out.
        void clear() {
            transport = nullptr;
            sub = nullptr;
            sub_task = -1;
            settled.store(false, std::memory_order_relaxed);
            verdict.store(kOpen, std::memory_order_relaxed);
            failed_from = nullptr;
            moved.store(nullptr, std::memory_order_relaxed);
            moving.store(false, std::memory_order_relaxed);
            start_us = 0;
            accepted_us = 0;
            counted.store(false, std::memory_order_relaxed);
            failure_noted.store(kNoAttempt, std::memory_order_relaxed);
        }

        Transport* transport = nullptr;
        Transport::SubBatchRef sub = nullptr;  // transport's sub-batch
        int sub_task = -1;
        // Set (release) by the first status read that saw the task final:
        // a final status never changes, so freeBatch() need not ask the
        // transport about this task again.
        std::atomic<bool> settled{false};
        // What the task's status reads once final, decided once (compare-
        // and-swap) so that a cancel and a status read racing on it agree:
        // kOpen, kCancelRequested (cancelTransfer() asked; the task reads
        // CANCELED once its transport lets go of it), or kFinal + the
        // TransferStatusEnum it ended.
        static constexpr uint8_t kOpen = 0;
        static constexpr uint8_t kCancelRequested = 1;
        static constexpr uint8_t kFinal = 2;
        std::atomic<uint8_t> verdict{kOpen};

        // A final `status` read from the transport becomes the verdict,
        // decided once: CANCELED when a cancel asked first, else what the
        // transport said; `status` then reads the verdict.
        void settle(TransferStatus& status);

        // Failover (runtime/failover.h). Written by the submission before
        // it publishes the task, fixed after: the request, kept when a
        // transport refused it at submission (or when failover is on and
        // a loaded transport keeps no requests: TransferEngineImpl::
        // copy_requests_), and the transport that refused it when that
        // may be retried (transport is then null).
        Request request;
        Transport* failed_from = nullptr;
        // Where the task runs since its last failover (null: never moved);
        // published with release once the new transport accepted it.
        std::atomic<const FailoverRoute*> moved{nullptr};
        // Held by the one status reader moving the task; others read it
        // PENDING meanwhile.
        std::atomic<bool> moving{false};

        // Metrics (src/metrics), written only when metrics are on: when
        // the submission took the task (steady clock, µs); whether its
        // request was counted (once, at its final status); and which
        // attempt (route, 0 for the first) was last counted as failed, so
        // that concurrent status readers count each failed attempt once.
        static constexpr uintptr_t kNoAttempt = ~uintptr_t{0};
        // The request's opcode and length, what its events carry.
        Request::OpCode opcode = Request::READ;
        uint64_t length = 0;
        uint64_t start_us = 0;
        uint64_t accepted_us = 0;  // when its first transport accepted it
        std::atomic<bool> counted{false};
        // True for the one final status read that counts the request; a
        // load first, so that reads of a task already counted write
        // nothing.
        bool countOnce() {
            return !counted.load(std::memory_order_relaxed) &&
                   !counted.exchange(true, std::memory_order_relaxed);
        }
        std::atomic<uintptr_t> failure_noted{kNoAttempt};

        // Where the task runs now: its failover route when it moved, else
        // where its submission put it (transport null: nowhere).
        struct Where {
            Transport* transport;
            Transport::SubBatchRef sub;
            int sub_task;
            const FailoverRoute* route;
        };
        Where where() const {
            const FailoverRoute* r = moved.load(std::memory_order_acquire);
            if (r != nullptr) return {r->transport, r->sub, r->sub_task, r};
            return {transport, sub, sub_task, nullptr};
        }
    };
    // A submission's notification: sent to `peers` once the tasks
    // [begin, end) all read COMPLETED; dropped when one ends otherwise.
    struct NotifyHook {
        size_t begin = 0;
        size_t end = 0;
        std::vector<std::string> peers;
        Notification notifi;
        bool done = false;
    };
    // A transport's sub-batch, kept with the slot from one batch to the
    // next (a thread that frees a batch and allocates one gets the same
    // slot back, EngineSlotCache): emptied by recycleSubBatch() when its
    // batch is freed, it serves the slot's next batch of the same capacity
    // without an allocation.
    struct SubEntry {
        Transport* transport = nullptr;
        Transport::SubBatchRef sub = nullptr;  // null: none held
        size_t capacity = 0;                   // what `sub` holds room for
        bool live = false;  // the batch allocated now has used it
    };

    // (generation << kFlagBits) | flags. The generation is odd while
    // allocated (see the file comment); a submission or a free owns the
    // batch's routing state while it holds its flag, which replaces a
    // mutex: claiming is one compare-and-swap, letting go a plain store.
    static constexpr uint64_t kSubmitting = 1;
    // Held while freeBatch() counts and waits for tasks in flight: no task
    // is submitted meanwhile and a second freeBatch() is refused.
    static constexpr uint64_t kFreeing = 2;
    // Held with kFreeing while the free waits for the readers inside to
    // leave and counts the tasks in flight once: pin() waits it out rather
    // than enter. A free that must wait for tasks lets readers in again
    // meanwhile, so status reads still answer then.
    static constexpr uint64_t kClosing = 4;
    static constexpr int kFlagBits = 3;
    std::atomic<uint64_t> state{0};
    // Status readers inside this batch right now.
    std::atomic<uint32_t> pins{0};
    // Tasks [0, published) are routed and readable without a claim; a
    // submission fills its TaskRefs first and then moves this (release).
    std::atomic<size_t> published{0};

    // This batch's index in the table; fixed.
    uint32_t slot = 0;
    // Set by allocate() before the id is handed out; fixed while live.
    size_t capacity = 0;
    // Sized to at least `capacity` (it only grows, up to a bound), so that
    // a submission never moves the TaskRefs a reader may be reading.
    std::vector<TaskRef> tasks;

    // The holder of a flag in `state` (or the freer, once the generation
    // moved) owns these: the sub-batches, one entry per transport the
    // slot's batches used, inline for the first two transports so that a
    // batch allocates nothing for them.
    static constexpr size_t kInlineSubs = 2;
    std::array<SubEntry, kInlineSubs> inline_subs{};
    std::vector<SubEntry> more_subs;
    size_t sub_count = 0;

    SubEntry& subAt(size_t i) {
        return i < kInlineSubs ? inline_subs[i] : more_subs[i - kInlineSubs];
    }
    // subOf()'s slow paths: a new entry for `transport`, and a sub-batch of
    // this batch's capacity for `entry` (allocated, or recycled from the
    // one of another capacity it holds).
    SubEntry& addSub(Transport* transport);
    Transport::SubBatchRef refitSub(SubEntry& entry, Status& s);
    // The sub-batch of `transport`, allocated (or taken from the slot's
    // previous batch) on first use; null when the transport refused to
    // allocate one. Caller holds kSubmitting. Inline: a batch's first
    // submission takes the sub-batch its slot kept (one or two transports:
    // a scan beats a map).
    Transport::SubBatchRef subOf(Transport* transport, Status& s) {
        for (size_t i = 0; i < sub_count; ++i) {
            SubEntry& entry = subAt(i);
            if (entry.transport != transport) continue;
            if (!entry.live) {
                // Kept from the slot's previous batch, emptied at its free.
                if (entry.sub == nullptr || entry.capacity != capacity) {
                    return refitSub(entry, s);
                }
                entry.live = true;
            }
            return entry.sub;
        }
        return refitSub(addSub(transport), s);
    }
    // Empties the batch for reuse, its sub-batches recycled (or freed when
    // large); called once no reader or submitter can reach it any more.
    void reset();
    // Frees every sub-batch the slot holds, used or kept (teardown, and
    // only while the transports still exist).
    void releaseSubs();

    // Notifications waiting for their submission's tasks; hooks_mu guards
    // `hooks`, and open_hooks (how many are not done) lets a status read
    // of a batch without any skip the lock.
    std::mutex hooks_mu;
    std::vector<NotifyHook> hooks;
    std::atomic<size_t> open_hooks{0};

    // The routes of its failed-over tasks; released by reset().
    FailoverRoutes routes;

    // Next free slot while this one is on the table's free list.
    std::atomic<uint32_t> next_free{0};

    static uint64_t idleState(uint32_t generation) {
        return static_cast<uint64_t>(generation) << kFlagBits;
    }
    static uint32_t generationIn(uint64_t state_word) {
        return static_cast<uint32_t>(state_word >> kFlagBits);
    }
    uint32_t generation() const {
        return generationIn(state.load(std::memory_order_acquire));
    }

    enum class Claim { kOk, kUnknown, kFreeing };
    // Sets `flags` (kSubmitting, or kFreeing with or without kClosing)
    // while the batch is generation `expected` and holds no flag, waiting
    // out a submission in progress. kUnknown: no longer that batch;
    // kFreeing: a free holds it.
    Claim claim(uint32_t expected, uint64_t flags);
    // Lets go of a flag claimed for generation `generation`.
    void unclaim(uint32_t generation) {
        state.store(idleState(generation), std::memory_order_release);
    }

    // Pins the batch for a lock-free read when it is still generation
    // `expected`; false (and nothing held) otherwise. Waits while a free
    // holds kClosing.
    bool pin(uint32_t expected) {
        uint64_t seen;
        return tryPin(expected, seen) || pinAfterClosing(expected, seen);
    }
    void unpin() { pins.fetch_sub(1, std::memory_order_release); }
    // Returns once no reader is pinned; the caller holds kClosing, so none
    // gets in after.
    void waitUnpinned() const;

 private:
    // One attempt: takes a pin and reads the state word into `seen`; true
    // when that is an open batch of generation `expected` (the pin then
    // stands), false with the pin still to be let go.
    bool tryPin(uint32_t expected, uint64_t& seen) {
        pins.fetch_add(1, std::memory_order_seq_cst);
        seen = state.load(std::memory_order_seq_cst);
        return generationIn(seen) == expected && (seen & kClosing) == 0;
    }
    // pin()'s slow path after a failed tryPin(): unpins, and waits for a
    // closing to end when `seen` was one of generation `expected`.
    bool pinAfterClosing(uint32_t expected, uint64_t seen);
};

// Waiting on another thread (a submission, a closing free, readers to
// leave, tasks to finish): yield first, then sleep, growing to 1 ms a time
// so that a long wait does not burn a core.
void engineBackoff(int round);

// Unpins on scope exit.
class EngineBatchPin {
 public:
    explicit EngineBatchPin(EngineBatch* batch) : batch_(batch) {}
    ~EngineBatchPin() {
        if (batch_ != nullptr) batch_->unpin();
    }
    EngineBatchPin(const EngineBatchPin&) = delete;
    EngineBatchPin& operator=(const EngineBatchPin&) = delete;

 private:
    EngineBatch* batch_;
};

// One freed slot per thread (EngineThreadState). A thread that frees a
// batch and allocates the next, the usual loop, then takes no compare-and-
// swap on the shared free list for either; the slot is this thread's
// alone while cached.
struct EngineSlotCache {
    uint64_t table = 0;  // uid of the slot's table; 0 while empty
    EngineBatch* batch = nullptr;

    // Gives the cached slot back to its table, if the table still exists.
    void drop();
    ~EngineSlotCache() { drop(); }
};

// The calling thread's slot cache (kept with the rest of the thread's
// engine state, engine_thread_state.cpp).
EngineSlotCache& threadSlotCache();

class EngineBatchTable {
 public:
    // Slots per chunk, and chunks at most: 4M batches allocated at once.
    static constexpr uint32_t kChunkBits = 10;
    static constexpr uint32_t kChunkSlots = 1u << kChunkBits;
    static constexpr uint32_t kMaxChunks = 4096;

    EngineBatchTable();
    ~EngineBatchTable();
    EngineBatchTable(const EngineBatchTable&) = delete;
    EngineBatchTable& operator=(const EngineBatchTable&) = delete;

    // A fresh id for a batch of `capacity` tasks; 0 when the table is full.
    BatchID allocate(size_t capacity);
    // The batch object `id` names, or null when the id was never handed
    // out. Whether it is still `id`'s batch is for the caller to check
    // against generationOf(id): with claim(), or with pin(). Inline: every
    // engine call on a batch starts here.
    EngineBatch* lookup(BatchID id) const {
        // Only odd generations are handed out: an even one names no batch,
        // even when it matches a free slot's.
        if ((generationOf(id) & 1) == 0) return nullptr;
        return slotOf(id);
    }
    static uint32_t generationOf(BatchID id) {
        return static_cast<uint32_t>(id >> 32);
    }
    // The generation a free moves a live batch to.
    static uint32_t nextGeneration(uint32_t generation);
    // Puts a freed batch's slot back for reuse and frees its sub-batches.
    // The caller moved its generation already, after it waited out the
    // readers pinned while it held kClosing (EngineBatch::waitUnpinned), so
    // none is left and no new reader or submitter gets in.
    void recycle(EngineBatch* batch);
    // Frees the sub-batches every slot holds, of batches still allocated
    // and those kept for reuse, and frees the batches still allocated
    // (teardown, no call running).
    void releaseAll();
    // Calls `visit` with every batch allocated now, each pinned by its
    // current generation while visited (the progress worker).
    template <typename Visit>
    void forEachLive(Visit visit) {
        uint32_t count;
        {
            std::lock_guard<std::mutex> lock(mu_);
            count = slot_count_;
        }
        for (uint32_t slot = 0; slot < count; ++slot) {
            EngineBatch* batch = slotOf(slot);
            if (batch == nullptr) continue;
            const uint32_t generation = batch->generation();
            if ((generation & 1) == 0 || !batch->pin(generation)) continue;
            EngineBatchPin pin(batch);
            visit(*batch);
        }
    }

 private:
    using Chunk = std::array<std::atomic<EngineBatch*>, kChunkSlots>;

    // The object in the slot of `id`'s low 32 bits, or null.
    EngineBatch* slotOf(BatchID id) const {
        const uint32_t slot = static_cast<uint32_t>(id);
        if ((slot >> kChunkBits) >= kMaxChunks) return nullptr;
        Chunk* chunk =
            chunks_[slot >> kChunkBits].load(std::memory_order_acquire);
        if (chunk == nullptr) return nullptr;
        return (*chunk)[slot & (kChunkSlots - 1)].load(
            std::memory_order_acquire);
    }
    EngineBatch* popFree();
    void pushFree(EngineBatch* batch);
    friend struct EngineSlotCache;

    // Names this table in the threads' slot caches; process-wide unique.
    const uint64_t uid_;

    // Free slots, a lock-free stack: (pop count << 32) | (slot + 1), 0 in
    // the low half when empty. The count in the high half makes a pop
    // that raced with a pop and a push of the same slot fail its swap.
    std::atomic<uint64_t> free_head_{0};
    std::mutex mu_;  // guards making new slots
    uint32_t slot_count_ = 0;
    std::array<std::atomic<Chunk*>, kMaxChunks> chunks_{};
};

}  // namespace mooncake::tent
