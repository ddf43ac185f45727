#include "metrics/thread_slots.h"

#include <algorithm>
#include <mutex>

namespace mooncake {
namespace tent {
namespace metrics {

struct ThreadSlots::Shared {
    explicit Shared(size_t n) : slots(n), retired(n, 0) {}
    const size_t slots;
    mutable std::mutex mu;
    // Blocks a scrape sums: those of running threads and the kept ones.
    std::vector<const Block*> live;
    // Counts of blocks whose threads have exited.
    std::vector<uint64_t> retired;
    // Blocks made for a thread past its thread-local cleanup (a record
    // from another thread_local's destructor): nothing would fold them at
    // its exit, so the set keeps them.
    std::vector<std::unique_ptr<Block>> kept;
    // False once the ThreadSlots is gone: nobody sums this set any more.
    std::atomic<bool> open{true};
};

namespace {

std::atomic<uint64_t> next_id{1};

// One block a thread holds, and the set it belongs to (kept alive by the
// reference so that the fold at the thread's exit has somewhere to go).
struct Held {
    uint64_t id;
    std::shared_ptr<ThreadSlots::Shared> shared;
    std::unique_ptr<ThreadSlots::Block> block;
};

// Folds a block into its set's retired total and unregisters it, in one
// critical section, so a concurrent scrape sees it in exactly one place.
void retire(Held& held) {
    ThreadSlots::Shared& s = *held.shared;
    std::lock_guard<std::mutex> lock(s.mu);
    for (size_t i = 0; i < s.slots; ++i) s.retired[i] += held.block->get(i);
    s.live.erase(std::find(s.live.begin(), s.live.end(), held.block.get()));
}

// Set when tls_held has been destroyed.
thread_local bool tls_exited = false;

// Every block the thread holds; its destructor (the thread's exit) folds
// them into their sets.
struct HeldBlocks {
    std::vector<Held> held;
    ~HeldBlocks() {
        ThreadSlots::forgetLastUsed();
        tls_exited = true;
        for (Held& h : held) retire(h);
    }
};
thread_local HeldBlocks tls_held;

}  // namespace

ThreadSlots::Block::Block(size_t slots)
    : slots_(new std::atomic<uint64_t>[slots]()) {}

ThreadSlots::ThreadSlots(size_t slots)
    : slots_(slots),
      id_(next_id.fetch_add(1, std::memory_order_relaxed)),
      shared_(std::make_shared<Shared>(slots)) {}

ThreadSlots::~ThreadSlots() {
    shared_->open.store(false, std::memory_order_relaxed);
}

void ThreadSlots::forgetLastUsed() { tls_last_ = LastUsed{0, nullptr}; }

ThreadSlots::Writer ThreadSlots::localSlow() {
    if (tls_exited) {
        auto block = std::make_unique<Block>(slots_);
        Block* b = block.get();
        std::lock_guard<std::mutex> lock(shared_->mu);
        shared_->live.push_back(b);
        shared_->kept.push_back(std::move(block));
        tls_last_ = LastUsed{id_, b->slots()};
        return Writer(b->slots());
    }
    std::vector<Held>& held = tls_held.held;
    // Blocks of sets destroyed since are dropped here, so a thread that
    // outlives many engines does not keep a block of each.
    for (size_t i = 0; i < held.size();) {
        if (held[i].shared->open.load(std::memory_order_relaxed)) {
            ++i;
            continue;
        }
        retire(held[i]);
        held[i] = std::move(held.back());
        held.pop_back();
    }
    for (Held& h : held) {
        if (h.id == id_) {
            tls_last_ = LastUsed{id_, h.block->slots()};
            return Writer(h.block->slots());
        }
    }
    held.push_back(Held{id_, shared_, std::make_unique<Block>(slots_)});
    Block* b = held.back().block.get();
    {
        std::lock_guard<std::mutex> lock(shared_->mu);
        shared_->live.push_back(b);
    }
    tls_last_ = LastUsed{id_, b->slots()};
    return Writer(b->slots());
}

void ThreadSlots::sumRange(size_t first, size_t n, uint64_t* out) const {
    std::lock_guard<std::mutex> lock(shared_->mu);
    for (size_t i = 0; i < n; ++i) out[i] = shared_->retired[first + i];
    for (const Block* b : shared_->live)
        for (size_t i = 0; i < n; ++i) out[i] += b->get(first + i);
}

std::vector<uint64_t> ThreadSlots::sum() const {
    std::vector<uint64_t> out(slots_);
    sumRange(0, slots_, out.data());
    return out;
}

size_t ThreadSlots::liveBlocks() const {
    std::lock_guard<std::mutex> lock(shared_->mu);
    return shared_->live.size();
}

}  // namespace metrics
}  // namespace tent
}  // namespace mooncake
