// EngineBatchTable: slot allocation, recycling and teardown (see the
// header for why ids resolve without a lock).
#include "runtime/engine_batch_table.h"

#include <glog/logging.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <unordered_map>

namespace mooncake::tent {

namespace {

// Generations stay below 2^31 so that an id stays positive for a caller
// that keeps it in a signed 64-bit integer (a binding, a log field).
constexpr uint32_t kGenerationMask = 0x7fffffffu;

// A batch freed with more TaskRefs than this gives the memory back instead
// of keeping it for the slot's next batch.
constexpr size_t kKeptTasks = 4096;

// The tables alive, by uid: a thread's cached slot goes back to its
// table only while the table exists. Touched on construction, destruction
// and when a thread's cache changes table or the thread exits, never on
// the per-batch path.
std::mutex& tablesMu() {
    static std::mutex mu;
    return mu;
}
std::unordered_map<uint64_t, EngineBatchTable*>& liveTables() {
    static auto* tables = new std::unordered_map<uint64_t, EngineBatchTable*>;
    return *tables;
}

}  // namespace

void EngineSlotCache::drop() {
    if (table == 0) return;
    std::lock_guard<std::mutex> lock(tablesMu());
    auto it = liveTables().find(table);
    if (it != liveTables().end()) it->second->pushFree(batch);
    table = 0;
    batch = nullptr;
}

namespace {

std::atomic<uint64_t> g_next_table_uid{1};

// A transport refused to `verb` ("free", "recycle") `entry`'s sub-batch.
void warnSubFailed(const EngineBatch::SubEntry& entry, const char* verb,
                   const Status& s) {
    LOG(WARNING) << "Transport " << entry.transport->getName() << " could not "
                 << verb << " a sub-batch: " << s.message();
}

}  // namespace

void engineBackoff(int round) {
    if (round < 100) {
        std::this_thread::yield();
    } else {
        std::this_thread::sleep_for(
            std::chrono::microseconds(std::min(1000, 10 * (round - 99))));
    }
}

EngineBatchTable::EngineBatchTable()
    : uid_(g_next_table_uid.fetch_add(1, std::memory_order_relaxed)) {
    std::lock_guard<std::mutex> lock(tablesMu());
    liveTables()[uid_] = this;
}

EngineBatch::SubEntry& EngineBatch::addSub(Transport* transport) {
    SubEntry& entry = sub_count < kInlineSubs ? inline_subs[sub_count]
                                              : more_subs.emplace_back();
    entry.transport = transport;
    ++sub_count;
    return entry;
}

Transport::SubBatchRef EngineBatch::refitSub(SubEntry& entry, Status& s) {
    if (entry.sub == nullptr) {
        s = entry.transport->allocateSubBatch(entry.sub, capacity);
    } else {
        s = entry.transport->recycleSubBatch(entry.sub, capacity);
    }
    if (!s.ok()) {
        // Left for the next submission to try again.
        entry.sub = nullptr;
        return nullptr;
    }
    entry.capacity = capacity;
    entry.live = true;
    return entry.sub;
}

EngineBatch::Claim EngineBatch::claim(uint32_t expected, uint64_t flags) {
    const uint64_t idle = idleState(expected);
    for (int round = 0;; ++round) {
        uint64_t seen = idle;
        // Sequentially consistent: a claim of kClosing is one side of the
        // exchange with pin() (see the header's file comment).
        if (state.compare_exchange_weak(seen, idle | flags,
                                        std::memory_order_seq_cst,
                                        std::memory_order_relaxed)) {
            return Claim::kOk;
        }
        if (generationIn(seen) != expected) return Claim::kUnknown;
        if ((seen & kFreeing) != 0) return Claim::kFreeing;
        if (seen == idle) continue;  // a spurious failure
        // Another submission to this batch. Most are short, but one may
        // wait on a peer's handshake (up to transports/mpcomm/
        // connect_timeout_ms), so the pause grows to 1 ms rather than
        // spin a core for that long, as the mutex this replaces slept.
        engineBackoff(round);
    }
}

bool EngineBatch::pinAfterClosing(uint32_t expected, uint64_t seen) {
    do {
        unpin();
        if (generationIn(seen) != expected) return false;
        // A free holds kClosing while it waits for the readers inside and
        // counts the tasks in flight once, both short: wait for it to
        // finish (the id is then unknown) or to let readers in again.
        for (int waited = 0; state.load(std::memory_order_acquire) == seen;
             ++waited) {
            engineBackoff(waited);
        }
    } while (!tryPin(expected, seen));
    return true;
}

void EngineBatch::waitUnpinned() const {
    // Readers pinned before the closing leave within one status call.
    for (int round = 0; pins.load(std::memory_order_seq_cst) != 0; ++round) {
        engineBackoff(round);
    }
}

void EngineBatch::reset() {
    for (size_t i = 0; i < sub_count; ++i) {
        SubEntry& entry = subAt(i);
        if (!entry.live) continue;
        entry.live = false;
        // Emptied now, not when the slot is next used: what its tasks
        // hold goes back at the free. A large one is freed, as the tasks
        // are (kKeptTasks).
        const bool keep = entry.capacity <= kKeptTasks;
        Status s =
            keep ? entry.transport->recycleSubBatch(entry.sub, entry.capacity)
                 : entry.transport->freeSubBatch(entry.sub);
        if (keep && s.ok()) continue;
        if (!s.ok()) warnSubFailed(entry, keep ? "recycle" : "free", s);
        entry.sub = nullptr;
    }
    // Only a failover adds a route, and no reader is left (see below).
    if (!routes.emptyUnsynchronized()) routes.release();
    // No reader or submitter can reach the batch (see the declaration), so
    // the hooks are this call's alone: the lock is taken only to clear
    // some, and a batch without any pays nothing for them.
    if (!hooks.empty()) {
        std::lock_guard<std::mutex> lock(hooks_mu);
        hooks.clear();
    }
    open_hooks.store(0, std::memory_order_relaxed);
    published.store(0, std::memory_order_relaxed);
    if (tasks.size() > kKeptTasks) std::vector<TaskRef>().swap(tasks);
}

void EngineBatch::releaseSubs() {
    for (size_t i = 0; i < sub_count; ++i) {
        SubEntry& entry = subAt(i);
        if (entry.sub != nullptr) {
            Status s = entry.transport->freeSubBatch(entry.sub);
            if (!s.ok()) warnSubFailed(entry, "free", s);
        }
        entry = SubEntry();
    }
    more_subs.clear();
    sub_count = 0;
}

EngineBatchTable::~EngineBatchTable() {
    {
        // From here on no thread's cache gives a slot back to this table;
        // one still cached is deleted below with the rest.
        std::lock_guard<std::mutex> lock(tablesMu());
        liveTables().erase(uid_);
    }
    for (std::atomic<Chunk*>& chunk_ref : chunks_) {
        Chunk* chunk = chunk_ref.load(std::memory_order_acquire);
        if (chunk == nullptr) break;  // chunks are created in order
        for (std::atomic<EngineBatch*>& slot : *chunk) {
            delete slot.load(std::memory_order_acquire);
        }
        delete chunk;
    }
}

EngineBatch* EngineBatchTable::popFree() {
    uint64_t head = free_head_.load(std::memory_order_acquire);
    for (;;) {
        const uint32_t top = static_cast<uint32_t>(head);
        if (top == 0) return nullptr;
        EngineBatch* batch = slotOf(top - 1);
        // May be stale when another thread pops `top` meanwhile; the swap
        // then fails, because the pop count moved.
        const uint32_t next = batch->next_free.load(std::memory_order_relaxed);
        const uint64_t popped = ((head >> 32) + 1) << 32 | next;
        if (free_head_.compare_exchange_weak(head, popped,
                                             std::memory_order_acquire,
                                             std::memory_order_acquire)) {
            return batch;
        }
    }
}

void EngineBatchTable::pushFree(EngineBatch* batch) {
    uint64_t head = free_head_.load(std::memory_order_relaxed);
    uint64_t pushed;
    do {
        batch->next_free.store(static_cast<uint32_t>(head),
                               std::memory_order_relaxed);
        pushed = (head & ~0xffffffffull) | (batch->slot + 1);
        // Release: the next owner sees the batch emptied by reset().
    } while (!free_head_.compare_exchange_weak(
        head, pushed, std::memory_order_release, std::memory_order_relaxed));
}

BatchID EngineBatchTable::allocate(size_t capacity) {
    EngineBatch* batch = nullptr;
    EngineSlotCache& cache = threadSlotCache();
    if (cache.table == uid_) {
        batch = cache.batch;
        cache.table = 0;
        cache.batch = nullptr;
    } else {
        batch = popFree();
    }
    if (batch == nullptr) {
        std::lock_guard<std::mutex> lock(mu_);
        if (slot_count_ == kChunkSlots * kMaxChunks) {
            LOG(ERROR) << "allocateBatch: " << slot_count_
                       << " batches are allocated already, the most one "
                          "engine holds at once";
            return 0;
        }
        const uint32_t slot = slot_count_;
        std::atomic<Chunk*>& chunk_ref = chunks_[slot >> kChunkBits];
        Chunk* chunk = chunk_ref.load(std::memory_order_relaxed);
        if (chunk == nullptr) {
            chunk = new Chunk();
            for (std::atomic<EngineBatch*>& entry : *chunk) {
                entry.store(nullptr, std::memory_order_relaxed);
            }
            chunk_ref.store(chunk, std::memory_order_release);
        }
        batch = new EngineBatch();
        batch->slot = slot;
        (*chunk)[slot & (kChunkSlots - 1)].store(batch,
                                                 std::memory_order_release);
        ++slot_count_;
    }
    // The slot is this thread's alone until the id is returned: a stale
    // id fails the generation check before it reads anything else.
    batch->capacity = capacity;
    if (batch->tasks.size() < capacity) batch->tasks.resize(capacity);
    const uint32_t generation = nextGeneration(EngineBatch::generationIn(
        batch->state.load(std::memory_order_relaxed)));
    batch->state.store(EngineBatch::idleState(generation),
                       std::memory_order_release);
    return (static_cast<BatchID>(generation) << 32) | batch->slot;
}

void EngineBatchTable::recycle(EngineBatch* batch) {
    batch->reset();
    EngineSlotCache& cache = threadSlotCache();
    if (cache.table != 0 && cache.table != uid_) {
        // This thread moved to another engine: the old one gets its slot
        // back.
        cache.drop();
    }
    if (cache.table == 0) {
        cache.table = uid_;
        cache.batch = batch;
    } else {
        pushFree(batch);
    }
}

void EngineBatchTable::releaseAll() {
    std::lock_guard<std::mutex> lock(mu_);
    for (uint32_t slot = 0; slot < slot_count_; ++slot) {
        EngineBatch* batch = slotOf(slot);
        // Free slots keep their last batch's sub-batches too.
        batch->releaseSubs();
        const uint32_t generation = batch->generation();
        if ((generation & 1) == 0) continue;  // free already
        batch->state.store(EngineBatch::idleState(nextGeneration(generation)),
                           std::memory_order_seq_cst);
        batch->reset();
        pushFree(batch);
    }
}

uint32_t EngineBatchTable::nextGeneration(uint32_t generation) {
    return (generation + 1) & kGenerationMask;
}

}  // namespace mooncake::tent
