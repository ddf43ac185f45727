// What the data connections of one peer record share: whether the record
// failed, and the slices waiting for room on a connection.
//
// Each connection carries at most `slots` slices at once
// (MPCOMM_MAX_OUTSTANDING_PER_QP). A slice posted while every connection is
// full waits here, and goes to whichever connection finishes a slice first,
// in the finished slice's slot. Picking the connection at post time instead
// queues slices behind each other on one TCP connection, which serves them
// strictly in order: one whose threads are descheduled then holds up its
// whole queue while the others idle, and a batch waits for its slowest
// connection.
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
    PeerLink(size_t connections, uint32_t slots);

    bool failed() const { return failed_.load(std::memory_order_acquire); }

    // The index of the connection that takes `slice` now, one of its slots
    // taken (the caller posts it there). -1 when every connection is full
    // (the slice waits) or the record failed (the slice is complete with
    // the record's error); either way *slice is moved from.
    int place(WaitingSlice* slice);

    // Connection `index` finished a slice and offers its slot: true hands
    // it the oldest waiting slice in *next, false frees the slot.
    bool takeNext(size_t index, WaitingSlice* next);

    // Fails the record with `reason` (the first reason wins): every waiting
    // slice completes with it now, every later place() at once.
    void fail(int reason);

 private:
    const uint32_t slots_;
    std::atomic<bool> failed_{false};
    std::mutex mu_;
    int reason_ = 0;
    std::vector<uint32_t> busy_;  // slices on each connection
    size_t next_ = 0;             // where the search for room starts
    std::deque<WaitingSlice> waiting_;
};

}  // namespace detail
}  // namespace mpcomm
