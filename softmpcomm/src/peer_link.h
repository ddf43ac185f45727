// What the data connections of one peer record share: whether the record
// failed, and the slices waiting for room on a connection.
//
// Each connection carries at most `slots` slices at once
// (MPCOMM_MAX_OUTSTANDING_PER_QP), and a PUT of at most `put_budget` bytes
// (the data connections' send buffer, SOFTMPCOMM_SEND_BUFFER_BYTES; 0 sets
// no such bound) joins a connection that already carries a slice only
// while the PUT payloads on it stay within that budget. The reader sends
// the next PUT the moment a slice finishes (data_conn.h): one that did not
// fit in the socket beside the PUT still queued there went out only in
// part, and the connection's sender thread had to be woken for the rest,
// a wake-up per slice; kept out by the budget, it waits here instead and
// goes out whole later. A larger PUT goes out in part whatever the
// connection carries, so only the slot count bounds it, and a connection
// with nothing outstanding takes any slice. A slice that finds no room
// waits here, and goes to the first connection that finishes a slice and
// then has room for it, in arrival order. Picking the connection at
// post time instead queues slices behind each other on one TCP connection,
// which serves them strictly in order: one whose threads are descheduled then
// holds up its whole queue while the others idle, and a batch waits for its
// slowest connection.
//
// The first connection to end fails the record: every waiting slice, and
// every slice placed later, completes with that connection's error, so
// nothing waits on a record that cannot carry it, until a new connect()
// replaces the record.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <vector>

#include "transfer_table.h"

namespace mpcomm {
namespace detail {

// One slice of a transfer, not yet on a connection. The key it carries is
// chosen when it gets one: the target rail's key of that connection.
struct WaitingSlice {
    std::shared_ptr<Transfer> transfer;
    bool is_get = false;
    uint64_t local = 0;
    uint64_t remote = 0;
    uint64_t length = 0;
    std::shared_ptr<const std::vector<uint32_t>> rkeys;  // by target rail
};

class PeerLink {
 public:
    PeerLink(size_t connections, uint32_t slots, uint64_t put_budget);

    bool failed() const { return failed_.load(std::memory_order_acquire); }

    // The index of the connection that takes `slice` now, one of its slots
    // taken (the caller posts it there). -1 when every connection is full
    // (the slice waits) or the record failed (the slice is complete with
    // the record's error); either way *slice is moved from.
    int place(WaitingSlice* slice);

    // Connection `index` finished a slice (a GET, or a PUT of
    // `length` bytes) and frees its room: true when the oldest waiting
    // slice now fits there, handed over in *next with its room taken.
    bool takeNext(size_t index, bool finished_get, uint64_t finished_length,
                  WaitingSlice* next);

    // Fails the record with `reason` (the first reason wins): every waiting
    // slice completes with it now, every later place() at once.
    void fail(int reason);

 private:
    // What one connection carries now.
    struct Load {
        uint32_t slices = 0;
        uint64_t put_bytes = 0;  // payload bytes of the PUTs among them
    };
    bool fits(const Load& load, const WaitingSlice& slice) const;
    static void take(Load& load, const WaitingSlice& slice);

    const uint32_t slots_;
    const uint64_t put_budget_;
    std::atomic<bool> failed_{false};
    std::mutex mu_;
    int reason_ = 0;
    std::vector<Load> load_;  // by connection
    size_t next_ = 0;         // where the search for room starts
    std::deque<WaitingSlice> waiting_;
};

}  // namespace detail
}  // namespace mpcomm
