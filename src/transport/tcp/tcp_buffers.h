// TcpBufferTable: the buffers registered with TcpTransport and the peer
// accesses in flight on each (private to the transport).
//
// No lock is held across network I/O. A connection that serves a request
// pins the one buffer containing the range (a count and its socket, under
// the table's mutex for the lookup only) and then moves bytes without any
// lock, checking between slices whether the buffer is being retired.
// remove() takes the buffer out of the table at once, so no new access can
// start, and then waits for the accesses already in flight on THAT buffer
// only: up to `wait_ms` for them to finish or notice the retirement, after
// which it shuts their sockets down (a peer stalled mid-request is cut
// off) and waits up to `leave_ms` for them to leave. When remove() returns,
// no peer touches the range again. Registering or removing other buffers
// never waits.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "tent/common/status.h"

namespace mooncake::tent {

// "[0x1000, +0x40)": a byte range as the transport's errors and logs name it.
std::string hexRange(uint64_t addr, uint64_t length);

class TcpBufferTable {
    struct Entry;

 public:
    // An access in flight; unpins on destruction.
    class Pin {
     public:
        Pin() = default;
        Pin(TcpBufferTable* table, std::shared_ptr<Entry> entry, int fd);
        ~Pin();
        Pin(Pin&& other) noexcept;
        Pin& operator=(Pin&&) = delete;
        Pin(const Pin&) = delete;

        explicit operator bool() const { return entry_ != nullptr; }
        // Ends the access early (the memory is no longer touched).
        void release();
        // True once remove() began on the buffer: stop touching it.
        bool retiring() const;
        // True for device memory: its bytes move through the stager.
        bool device() const;

     private:
        TcpBufferTable* table_ = nullptr;
        std::shared_ptr<Entry> entry_;
        int fd_ = -1;
    };

    // Registers [base, base + length); re-registering a base replaces the
    // length. InvalidArgument when the range wraps past 2^64.
    // `device` marks device memory (staged, never touched directly).
    Status add(uint64_t base, uint64_t length, bool device = false);
    // Unregisters the buffer at `base` as described above (`length` only
    // names the range in errors). InvalidArgument when none is registered
    // there; InternalError (naming the range and the key) in the unlikely
    // case that accesses outlive even their shut-down sockets by
    // `leave_ms`: leaving then needs only our own threads to run.
    Status remove(uint64_t base, uint64_t length, int wait_ms, int leave_ms);
    // Pins the one buffer that wholly contains [addr, addr + length) for an
    // access served on socket `fd`; an empty Pin when none does.
    Pin pin(uint64_t addr, uint64_t length, int fd);
    // Accesses in flight, over all buffers.
    size_t activeAccesses() const;

 private:
    struct Entry {
        uint64_t base = 0;
        uint64_t length = 0;
        bool device = false;
        std::atomic<bool> retiring{false};
        // Guarded by the table's mu_.
        std::multiset<int> fds;
    };

    void unpin(Entry& entry, int fd);

    mutable std::mutex mu_;
    std::condition_variable released_;
    std::map<uint64_t, std::shared_ptr<Entry>> buffers_;
    size_t active_ = 0;  // guarded by mu_
};

}  // namespace mooncake::tent
