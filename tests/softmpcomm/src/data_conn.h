// The initiator side of one data connection (a "QP"): a send queue drained
// by a sender thread, so posting never blocks on the network and every QP
// of a transfer moves bytes in parallel, and a reader thread that completes
// slices. A slice is completed exactly once, by whoever removes it from the
// pending table: the reader on a response or when the connection dies, the
// poster when the connection is already dead, the sender when it cannot
// send.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>

#include "protocol.h"
#include "transfer_table.h"

namespace mpcomm {
namespace detail {

class DataConn {
 public:
    // Connects, says HELLO as a data connection on the target's `rail`, and
    // checks that the target announces `expected_host`. Null on failure.
    static std::shared_ptr<DataConn> open(const std::string& addr, int port,
                                          const std::string& my_host,
                                          const std::string& expected_host,
                                          uint32_t rail, uint32_t qp,
                                          std::string* error);
    ~DataConn();
    DataConn(const DataConn&) = delete;
    DataConn& operator=(const DataConn&) = delete;

    uint32_t rail() const { return rail_; }

    // Returns true when the request was queued (its bytes count as posted);
    // either way the slice is completed on `transfer` exactly once.
    bool postPut(const std::shared_ptr<Transfer>& transfer, uint64_t local,
                 uint64_t remote, uint64_t length, uint32_t key);
    bool postGet(const std::shared_ptr<Transfer>& transfer, uint64_t local,
                 uint64_t remote, uint64_t length, uint32_t key);

    // Shuts the socket down and joins both threads; the reader fails
    // whatever is still queued or in flight. Idempotent.
    void close();

 private:
    struct Pending {
        std::shared_ptr<Transfer> transfer;
        bool is_get = false;
        uint64_t local = 0;
        uint64_t length = 0;
        uint64_t received = 0;
    };

    DataConn(int fd, uint32_t rail);
    bool post(const std::shared_ptr<Transfer>& transfer, bool is_get,
              uint64_t local, uint64_t remote, uint64_t length, uint32_t key);
    // A queued request. A put's payload is read from user memory by the
    // sender thread, so a put slice carries a second completion event,
    // "the sender is done with the payload", fired by whoever takes the
    // request off the queue (the sender after sendFrame(), or the reader's
    // final sweep). A transfer therefore never completes while the sender
    // may still read its buffer, even when the connection dies mid-send.
    struct Queued {
        FrameHeader request;
        std::shared_ptr<Transfer> put_transfer;  // null for gets
    };

    // Registers the slice and queues its request; false when the connection
    // is already dead.
    bool enqueue(Pending pending, Queued queued);
    // Removes and completes a slice if nobody else did yet.
    void failPending(uint64_t seq, int status);
    void readerLoop();
    void senderLoop();
    // Handles one response; returns MPCOMM_SUCCESS or the error that ends
    // the connection.
    int handleResponse(const FrameHeader& header);

    const int fd_;
    const uint32_t rail_;
    // pending_mu_ guards the pending table, the send queue and the flags.
    std::mutex pending_mu_;
    std::condition_variable queue_cv_;
    bool dead_ = false;      // set by the reader when the connection ends
    bool stopping_ = false;  // set by close() to release the sender
    uint64_t next_seq_ = 1;
    std::unordered_map<uint64_t, Pending> pending_;
    std::deque<Queued> queue_;
    std::mutex close_mu_;
    std::thread reader_;
    std::thread sender_;
};

}  // namespace detail
}  // namespace mpcomm
