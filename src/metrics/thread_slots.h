// Per-thread counter blocks for one metric set. Each thread that records
// into the set gets its own block of plain uint64 slots that only it
// writes (a relaxed load and store: no locked read-modify-write, no shared
// cache line), found through one thread-local compare per record call. A
// scrape sums every live block plus the folded total; a thread's exit
// folds its block into that total under the same lock, so no sum ever goes
// down.
//
// A block also holds a ring of events (push()): the most frequent record
// is written raw, a few stores, and the set's fold function turns it into
// slot counts later, off the recording thread. Every sum first drains
// every ring into the folded total, so a sum includes every event pushed
// before it began. A ring a quarter full wakes the set's drain thread; a
// ring full is drained by its own writer, so no event is ever dropped.
//
// Lifetime: the set's state is shared between the ThreadSlots object and
// the threads holding blocks of it. Destroying the ThreadSlots leaves each
// thread's block to that thread, which frees it at its exit or at its next
// first-use of another set; destroying a thread leaves its block's counts
// in the set. Neither order touches freed memory.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace mooncake {
namespace tent {
namespace metrics {

class ThreadSlots {
 public:
    // One event as recorded; what its fields mean is the fold's business.
    struct Event {
        uint64_t v[4];
        uint32_t tag;
        uint32_t aux;
    };
    // Adds one event's counts to `slots` (the set's folded total). Called
    // under the set's lock, on whichever thread drains.
    using Fold = void (*)(const Event& event, uint64_t* slots);
    // Events a ring holds (a power of two), and the fill at which its
    // writer wakes the drain thread: the rest is the slack the drain thread
    // has to wake up in (3072 events: several hundred microseconds of
    // back-to-back requests) before the writer must drain the ring itself.
    static constexpr uint64_t kRingEvents = 4096;
    static constexpr uint64_t kWakeAt = kRingEvents / 4;
    static constexpr uint64_t kRecheck = kRingEvents / 16;

    struct Shared;

    // One thread's slots and event ring.
    class Block {
     public:
        Block(size_t slots, Shared* shared);
        std::atomic<uint64_t>* slots() { return slots_.get(); }
        uint64_t get(size_t slot) const {
            return slots_[slot].load(std::memory_order_relaxed);
        }
        // Owner thread only. The check comes after the store, so that the
        // rare call is the last thing done and the caller keeps nothing
        // across it (the common path then saves no registers).
        void push(const Event& event) {
            const uint64_t h = head_.load(std::memory_order_relaxed);
            events_[h & (kRingEvents - 1)] = event;
            // Release: a drainer that reads the new head reads the event.
            head_.store(h + 1, std::memory_order_release);
            if (__builtin_expect(h + 1 == next_check_, 0)) makeRoom(h + 1);
        }
        // Folds the events pushed so far into `slots` (the set's lock held).
        // Never inlined: benchmark/tools/cost_count.py leaves folds out of
        // the request path's count by this function's name.
        __attribute__((noinline)) void drainLocked(Fold fold, uint64_t* slots);

     private:
        // With `head` events pushed: the ring is full (drains it here, so
        // the next push has a free slot) or filled to kWakeAt (wakes the
        // drain thread); sets the next head at which to look again.
        void makeRoom(uint64_t head);

        // Written by the owner only.
        std::unique_ptr<std::atomic<uint64_t>[]> slots_;
        std::unique_ptr<Event[]> events_;
        Shared* const shared_;
        std::atomic<uint64_t> head_{0};
        // The head at which push() next looks at the tail: where the ring
        // reaches kWakeAt or its end, counted from the tail last read.
        uint64_t next_check_ = kWakeAt;
        // Written by drainers (under the set's lock): on its own line, so
        // a drain does not take the owner's line away.
        alignas(64) std::atomic<uint64_t> tail_{0};
    };

    // The owner thread's access to its block: a plain pointer, so a run
    // of adds keeps it in a register (a member reloaded after each atomic
    // store would not be).
    class Writer {
     public:
        constexpr explicit Writer(Block* block) : block_(block) {}
        // Only the owner thread writes; the scraper's concurrent relaxed
        // loads see either value.
        void add(size_t slot, uint64_t n) const {
            std::atomic<uint64_t>& s = block_->slots()[slot];
            s.store(s.load(std::memory_order_relaxed) + n,
                    std::memory_order_relaxed);
        }
        // Requires a set made with a fold.
        void push(const Event& event) const { block_->push(event); }

     private:
        Block* block_;
    };

    // `fold` turns pushed events into slot counts (null: the set takes no
    // events). Without `drain_thread` (tests) only sums and full rings'
    // writers drain.
    explicit ThreadSlots(size_t slots, Fold fold = nullptr,
                         bool drain_thread = true);
    ~ThreadSlots();
    ThreadSlots(const ThreadSlots&) = delete;
    ThreadSlots& operator=(const ThreadSlots&) = delete;

    size_t size() const { return slots_; }

    // The calling thread's block, made and registered on its first use.
    Writer local() {
        if (__builtin_expect(tls_last_.id == id_, 1))
            return Writer(tls_last_.block);
        return localSlow();
    }

    // Every slot summed over the live blocks and the folded total, after
    // draining every ring.
    std::vector<uint64_t> sum() const;
    // Slots [first, first + n) only, into out[0..n).
    void sumRange(size_t first, size_t n, uint64_t* out) const;

    // Blocks registered and not yet retired (tests).
    size_t liveBlocks() const;
    // Times the drain thread has emptied the rings, and times a writer
    // found its ring full and drained it itself (tests).
    uint64_t drainPasses() const;
    uint64_t fullRings() const;

    // Clears the calling thread's cache: its blocks are being retired at
    // its exit.
    static void forgetLastUsed();

 private:
    // The record path's cache: the set the thread used last and its block
    // of it. Constant-initialised and trivially destructible, so reading
    // it needs no guard and it stays readable through the whole thread
    // exit.
    struct LastUsed {
        uint64_t id;
        Block* block;
    };
    static inline thread_local LastUsed tls_last_{0, nullptr};

    Writer localSlow();

    const size_t slots_;
    // Distinguishes this set from any later one at the same address, for
    // the threads' caches.
    const uint64_t id_;
    std::shared_ptr<Shared> shared_;
};

}  // namespace metrics
}  // namespace tent
}  // namespace mooncake
