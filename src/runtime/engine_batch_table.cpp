// EngineBatchTable: slot allocation, recycling and teardown (see the
// header for why ids resolve without a lock).
#include "runtime/engine_batch_table.h"

#include <glog/logging.h>

#include <chrono>
#include <thread>

namespace mooncake::tent {

namespace {

// Generations stay below 2^31 so that an id stays positive as an int64
// (the C API hands ids out as signed integers).
constexpr uint32_t kGenerationMask = 0x7fffffffu;

// A batch freed with more TaskRefs than this gives the memory back instead
// of keeping it for the slot's next batch.
constexpr size_t kKeptTasks = 4096;

}  // namespace

Transport::SubBatchRef EngineBatch::subOf(Transport* transport, Status& s) {
    // A batch uses one or two transports: a scan beats a map.
    for (size_t i = 0; i < sub_count; ++i) {
        if (subAt(i).first == transport) return subAt(i).second;
    }
    Transport::SubBatchRef sub = nullptr;
    s = transport->allocateSubBatch(sub, capacity);
    if (!s.ok()) return nullptr;
    if (sub_count < kInlineSubs) {
        inline_subs[sub_count] = {transport, sub};
    } else {
        more_subs.emplace_back(transport, sub);
    }
    ++sub_count;
    return sub;
}

void EngineBatch::reset() {
    for (size_t i = 0; i < sub_count; ++i) {
        SubEntry& entry = subAt(i);
        Status s = entry.first->freeSubBatch(entry.second);
        if (!s.ok()) {
            LOG(WARNING) << "Transport " << entry.first->getName()
                         << " could not free a sub-batch: " << s.message();
        }
        entry = SubEntry();
    }
    more_subs.clear();
    sub_count = 0;
    freeing = false;
    published.store(0, std::memory_order_relaxed);
    if (tasks.size() > kKeptTasks) std::vector<TaskRef>().swap(tasks);
}

EngineBatchTable::~EngineBatchTable() {
    for (std::atomic<Chunk*>& chunk_ref : chunks_) {
        Chunk* chunk = chunk_ref.load(std::memory_order_acquire);
        if (chunk == nullptr) break;  // chunks are created in order
        for (std::atomic<EngineBatch*>& slot : *chunk) {
            delete slot.load(std::memory_order_acquire);
        }
        delete chunk;
    }
}

BatchID EngineBatchTable::allocate(size_t capacity) {
    EngineBatch* batch = nullptr;
    {
        std::lock_guard<std::mutex> lock(mu_);
        if (!free_.empty()) {
            batch = slotOf(free_.back());
            free_.pop_back();
        } else {
            if (slot_count_ == kChunkSlots * kMaxChunks) {
                LOG(ERROR) << "allocateBatch: " << slot_count_
                           << " batches are allocated already, the most "
                              "one engine holds at once";
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
    }
    // The slot is this thread's alone until the id is returned: a stale
    // id fails the generation check before it reads anything else.
    batch->capacity = capacity;
    if (batch->tasks.size() < capacity) batch->tasks.resize(capacity);
    const uint32_t generation =
        (batch->generation.load(std::memory_order_relaxed) + 1) &
        kGenerationMask;
    batch->generation.store(generation, std::memory_order_release);
    return (static_cast<BatchID>(generation) << 32) | batch->slot;
}

EngineBatch* EngineBatchTable::lookup(BatchID id) const {
    // Only odd generations are handed out: an even one names no batch,
    // even when it matches a free slot's.
    if ((generationOf(id) & 1) == 0) return nullptr;
    return slotOf(id);
}

EngineBatch* EngineBatchTable::slotOf(BatchID id) const {
    const uint32_t slot = static_cast<uint32_t>(id);
    if ((slot >> kChunkBits) >= kMaxChunks) return nullptr;
    Chunk* chunk = chunks_[slot >> kChunkBits].load(std::memory_order_acquire);
    if (chunk == nullptr) return nullptr;
    return (*chunk)[slot & (kChunkSlots - 1)].load(std::memory_order_acquire);
}

void EngineBatchTable::recycle(EngineBatch* batch) {
    // Readers that pinned the batch before its generation moved may still
    // be polling its sub-batches; they leave within one status call.
    for (int round = 0; batch->pins.load(std::memory_order_seq_cst) != 0;
         ++round) {
        if (round < 100) {
            std::this_thread::yield();
        } else {
            std::this_thread::sleep_for(std::chrono::microseconds(10));
        }
    }
    batch->reset();
    std::lock_guard<std::mutex> lock(mu_);
    free_.push_back(batch->slot);
}

void EngineBatchTable::releaseAll() {
    std::lock_guard<std::mutex> lock(mu_);
    for (uint32_t slot = 0; slot < slot_count_; ++slot) {
        EngineBatch* batch = slotOf(slot);
        const uint32_t generation =
            batch->generation.load(std::memory_order_relaxed);
        if ((generation & 1) == 0) continue;  // free already
        batch->generation.store((generation + 1) & kGenerationMask,
                                std::memory_order_seq_cst);
        batch->reset();
        free_.push_back(slot);
    }
}

uint32_t EngineBatchTable::nextGeneration(uint32_t generation) {
    return (generation + 1) & kGenerationMask;
}

}  // namespace mooncake::tent
