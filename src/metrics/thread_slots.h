// Per-thread counter blocks for one metric set. Each thread that records
// into the set gets its own block of plain uint64 slots that only it
// writes (a relaxed load and store: no locked read-modify-write, no shared
// cache line), found through one thread-local compare per record call. A
// scrape sums every live block plus the retired total; a thread's exit
// folds its block into that total under the same lock, so no sum ever goes
// down.
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
    // The owner thread's access to its block: a plain pointer, so a run
    // of adds keeps it in a register (a member reloaded after each atomic
    // store would not be).
    class Writer {
     public:
        constexpr explicit Writer(std::atomic<uint64_t>* slots)
            : slots_(slots) {}
        // Only the owner thread writes; the scraper's concurrent relaxed
        // loads see either value.
        void add(size_t slot, uint64_t n) const {
            std::atomic<uint64_t>& s = slots_[slot];
            s.store(s.load(std::memory_order_relaxed) + n,
                    std::memory_order_relaxed);
        }

     private:
        std::atomic<uint64_t>* slots_;
    };

    // One thread's slots.
    class Block {
     public:
        explicit Block(size_t slots);
        std::atomic<uint64_t>* slots() { return slots_.get(); }
        uint64_t get(size_t slot) const {
            return slots_[slot].load(std::memory_order_relaxed);
        }

     private:
        std::unique_ptr<std::atomic<uint64_t>[]> slots_;
    };

    explicit ThreadSlots(size_t slots);
    ~ThreadSlots();
    ThreadSlots(const ThreadSlots&) = delete;
    ThreadSlots& operator=(const ThreadSlots&) = delete;

    size_t size() const { return slots_; }

    // The calling thread's block, made and registered on its first use.
    Writer local() {
        if (__builtin_expect(tls_last_.id == id_, 1))
            return Writer(tls_last_.slots);
        return localSlow();
    }

    // Every slot summed over the live blocks and the retired total.
    std::vector<uint64_t> sum() const;
    // Slots [first, first + n) only, into out[0..n).
    void sumRange(size_t first, size_t n, uint64_t* out) const;

    // Blocks registered and not yet retired (tests).
    size_t liveBlocks() const;

    // Clears the calling thread's cache: its blocks are being retired at
    // its exit.
    static void forgetLastUsed();

    struct Shared;

 private:
    // The record path's cache: the set the thread used last and its block
    // of it. Constant-initialised and trivially destructible, so reading
    // it needs no guard and it stays readable through the whole thread
    // exit.
    struct LastUsed {
        uint64_t id;
        std::atomic<uint64_t>* slots;
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
