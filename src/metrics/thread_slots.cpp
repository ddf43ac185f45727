#include "metrics/thread_slots.h"

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <thread>

namespace mooncake {
namespace tent {
namespace metrics {

struct ThreadSlots::Shared {
    Shared(size_t n, Fold f, bool drain_thread)
        : slots(n), fold(f), folded(n, 0), stopping(!drain_thread) {}
    const size_t slots;
    const Fold fold;
    mutable std::mutex mu;
    // Blocks a scrape sums: those of running threads and the kept ones.
    std::vector<Block*> live;
    // Counts of blocks whose threads have exited and of drained events.
    std::vector<uint64_t> folded;
    // Blocks made for a thread past its thread-local cleanup (a record
    // from another thread_local's destructor): nothing would fold them at
    // its exit, so the set keeps them.
    std::vector<std::unique_ptr<Block>> kept;
    // False once the ThreadSlots is gone: nobody sums this set any more.
    std::atomic<bool> open{true};

    // The drain thread, started by the first ring that reaches kWakeAt (a
    // set whose rings never do runs none) and joined by ~ThreadSlots;
    // `stopping` from the start: the set runs none.
    std::mutex drain_mu;
    std::condition_variable drain_cv;
    bool kicked = false;
    bool stopping;
    std::thread drainer;
    std::atomic<uint64_t> drain_passes{0};
    std::atomic<uint64_t> full_rings{0};

    void drainAllLocked() {
        for (Block* b : live) b->drainLocked(fold, folded.data());
    }

    // Wakes the drain thread (starting it the first time).
    void kick() {
        std::lock_guard<std::mutex> lock(drain_mu);
        if (stopping) return;
        kicked = true;
        if (!drainer.joinable()) drainer = std::thread([this] { drainLoop(); });
        drain_cv.notify_one();
    }

    void drainLoop() {
        std::unique_lock<std::mutex> lock(drain_mu);
        for (;;) {
            drain_cv.wait(lock, [this] { return kicked || stopping; });
            if (stopping) return;
            kicked = false;
            lock.unlock();
            {
                std::lock_guard<std::mutex> sum_lock(mu);
                drainAllLocked();
            }
            drain_passes.fetch_add(1, std::memory_order_relaxed);
            lock.lock();
        }
    }

    void stopDrainer() {
        std::thread t;
        {
            std::lock_guard<std::mutex> lock(drain_mu);
            stopping = true;
            t = std::move(drainer);
        }
        drain_cv.notify_one();
        if (t.joinable()) t.join();
    }
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

// Folds a block (its ring and its slots) into its set's folded total and
// unregisters it, in one critical section, so a concurrent scrape sees it
// in exactly one place.
void retire(Held& held) {
    ThreadSlots::Shared& s = *held.shared;
    std::lock_guard<std::mutex> lock(s.mu);
    held.block->drainLocked(s.fold, s.folded.data());
    for (size_t i = 0; i < s.slots; ++i) s.folded[i] += held.block->get(i);
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

ThreadSlots::Block::Block(size_t slots, Shared* shared)
    : slots_(new std::atomic<uint64_t>[slots]()),
      // Only a set with a fold takes events.
      events_(shared->fold ? new Event[kRingEvents] : nullptr),
      shared_(shared) {}

void ThreadSlots::Block::drainLocked(Fold fold, uint64_t* slots) {
    // Only drainers write the tail, and they hold the set's lock.
    const uint64_t t = tail_.load(std::memory_order_relaxed);
    const uint64_t h = head_.load(std::memory_order_acquire);
    if (t == h) return;
    for (uint64_t i = t; i != h; ++i)
        fold(events_[i & (kRingEvents - 1)], slots);
    // Release: the owner that reads the new tail may overwrite the events.
    tail_.store(h, std::memory_order_release);
}

void ThreadSlots::Block::makeRoom(uint64_t head) {
    uint64_t t = tail_.load(std::memory_order_acquire);
    if (head - t >= kRingEvents) {
        // Full: the drain thread has not kept up (or could not start).
        shared_->full_rings.fetch_add(1, std::memory_order_relaxed);
        std::lock_guard<std::mutex> lock(shared_->mu);
        drainLocked(shared_->fold, shared_->folded.data());
        t = head;
    }
    if (head - t >= kWakeAt) {
        shared_->kick();
        // Lets the drain thread run now if it shares this CPU (or, under
        // valgrind, the one lock every thread runs under): otherwise the
        // writer may fill the ring and fold it itself, which is the very
        // cost the ring moves off the request path. Until the drain thread
        // has caught up, the writer asks again every kRecheck events.
        std::this_thread::yield();
        next_check_ = std::min(t + kRingEvents, head + kRecheck);
    } else {
        next_check_ = t + kWakeAt;
    }
}

ThreadSlots::ThreadSlots(size_t slots, Fold fold, bool drain_thread)
    : slots_(slots),
      id_(next_id.fetch_add(1, std::memory_order_relaxed)),
      shared_(std::make_shared<Shared>(slots, fold, drain_thread)) {}

ThreadSlots::~ThreadSlots() {
    shared_->stopDrainer();
    shared_->open.store(false, std::memory_order_relaxed);
}

void ThreadSlots::forgetLastUsed() { tls_last_ = LastUsed{0, nullptr}; }

ThreadSlots::Writer ThreadSlots::localSlow() {
    if (tls_exited) {
        auto block = std::make_unique<Block>(slots_, shared_.get());
        Block* b = block.get();
        std::lock_guard<std::mutex> lock(shared_->mu);
        shared_->live.push_back(b);
        shared_->kept.push_back(std::move(block));
        tls_last_ = LastUsed{id_, b};
        return Writer(b);
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
            tls_last_ = LastUsed{id_, h.block.get()};
            return Writer(h.block.get());
        }
    }
    held.push_back(
        Held{id_, shared_, std::make_unique<Block>(slots_, shared_.get())});
    Block* b = held.back().block.get();
    {
        std::lock_guard<std::mutex> lock(shared_->mu);
        shared_->live.push_back(b);
    }
    tls_last_ = LastUsed{id_, b};
    return Writer(b);
}

void ThreadSlots::sumRange(size_t first, size_t n, uint64_t* out) const {
    std::lock_guard<std::mutex> lock(shared_->mu);
    shared_->drainAllLocked();
    for (size_t i = 0; i < n; ++i) out[i] = shared_->folded[first + i];
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

uint64_t ThreadSlots::fullRings() const {
    return shared_->full_rings.load(std::memory_order_relaxed);
}

uint64_t ThreadSlots::drainPasses() const {
    return shared_->drain_passes.load(std::memory_order_relaxed);
}

}  // namespace metrics
}  // namespace tent
}  // namespace mooncake
