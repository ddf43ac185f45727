// Registered and published memory of one MPComm instance. The target side of
// every one-sided operation goes through here: a request opens an Access
// (key and range checked against one published buffer) and then moves its
// payload straight between the socket and that buffer, bracketing each
// non-blocking socket call with enter() / leave(). Withdrawing a buffer
// (unpublish, unregister, or publishing its start address again) marks it
// withdrawn, so no enter() succeeds any more, and waits for the calls
// already inside: those never block, so the wait is as short as one recv()
// or send(), and once the withdrawing call returns no remote access touches
// that buffer again.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <vector>

#include "mpcomm_public.h"

namespace mpcomm {
namespace detail {

class MemoryTable {
    struct Published;

 public:
    // One remote request's hold on the published buffer it was checked
    // against. Movable, not copyable; an empty Access refuses enter().
    class Access {
     public:
        Access() = default;
        Access(Access&&) noexcept = default;
        Access& operator=(Access&&) noexcept = default;

        // True while the buffer is still published: the caller may touch
        // it until leave(). False once it was withdrawn (the caller must
        // not touch it, and must not call leave()).
        bool enter();
        void leave();

     private:
        friend class MemoryTable;
        Access(const MemoryTable* table, std::shared_ptr<Published> entry)
            : table_(table), entry_(std::move(entry)) {}
        const MemoryTable* table_ = nullptr;
        std::shared_ptr<Published> entry_;
    };

    int registerMemory(uint64_t addr, uint64_t length);
    // Also unpublishes buffers inside the region: the caller says the memory
    // is going away, so no peer may reach it any more.
    void unregisterMemory(uint64_t addr);
    bool isRegistered(uint64_t addr, uint64_t length) const;

    // keys: one per rail. Publishing the same start address again replaces
    // the entry (and its keys).
    int publish(uint64_t addr, uint64_t length, int numa_node,
                const std::vector<uint32_t>& keys);
    void unpublish(uint64_t addr);
    std::vector<RemoteBufferEntry> publishedList() const;

    // MPCOMM_SUCCESS when [addr, addr + length) lies inside one published
    // buffer whose key for `rail` equals `key` (and *access then holds that
    // buffer); else MPCOMM_ERR_REMOTE_ACCESS.
    int openAccess(uint64_t addr, uint64_t length, uint32_t key, uint32_t rail,
                   Access* access) const;

 private:
    struct Published {
        uint64_t addr;
        uint64_t length;
        int numa_node;
        std::vector<uint32_t> keys;
        // Socket calls inside enter() / leave(), and whether the entry was
        // withdrawn. Both sequentially consistent: enter() raises `users`
        // then reads `withdrawn`, withdraw() sets `withdrawn` then reads
        // `users`, so at least one of them sees the other.
        std::atomic<int> users{0};
        std::atomic<bool> withdrawn{false};
    };
    using Entries = std::vector<std::shared_ptr<Published>>;

    std::shared_ptr<Published> findLocked(uint64_t addr, uint64_t length,
                                          uint32_t key, uint32_t rail) const;
    // Marks each entry withdrawn, then waits until no socket call is inside
    // it. Called without mu_ held.
    void withdraw(const Entries& entries);
    void released() const;

    mutable std::shared_mutex mu_;
    std::map<uint64_t, uint64_t> registered_;  // start -> length
    std::map<uint64_t, std::shared_ptr<Published>> published_;  // by start
    // Only withdraw() waits here, for the last leave() of a withdrawn entry.
    mutable std::mutex wait_mu_;
    mutable std::condition_variable wait_cv_;
};

}  // namespace detail
}  // namespace mpcomm
