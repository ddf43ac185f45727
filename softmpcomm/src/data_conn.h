// The initiator side of one data connection (a "QP"): a send queue drained
// by a sender thread, so posting never blocks on the network and every QP
// of a transfer moves bytes in parallel, and a reader thread that completes
// slices. A slice is completed exactly once, by whoever removes it from the
// pending table: the reader on a response or when the connection dies, the
// poster when the connection is already dead, the sender when it cannot
// send.
//
// Like an RC queue pair, a connection whose peer stops making progress goes
// to an error state: when slices are outstanding (queued or in flight) and
// no byte has moved either way for the progress timeout, whichever thread
// notices first ends the connection, and every outstanding slice completes
// with MPCOMM_ERR_RETRY_EXCEEDED. Both threads wait in poll() against that
// clock, so neither can block without a bound on a stopped peer.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>

#include "peer_link.h"
#include "protocol.h"
#include "transfer_table.h"

namespace mpcomm {
namespace detail {

struct DataConnParams {
    std::string addr;
    int port = 0;
    std::string my_host;
    std::string expected_host;  // what the target must announce
    uint32_t rail = 0;          // the target's rail
    uint32_t qp = 0;
    size_t index = 0;  // which of `link`'s slot counts is this connection's
    int handshake_timeout_ms = kDefaultHandshakeTimeoutMs;
    int progress_timeout_ms = kDefaultProgressTimeoutMs;
    int send_buffer_bytes = 0;        // SO_SNDBUF; 0: the kernel's
    SocketSet* handshakes = nullptr;  // lets shutdown() wake the handshake
    // Shared with the peer record's other connections (peer_link.h);
    // the first connection to end fails it. Required.
    std::shared_ptr<PeerLink> link;
};

class DataConn {
 public:
    // Connects, says HELLO as a data connection on the target's rail, and
    // checks that the target announces the expected host. Null on failure.
    static std::shared_ptr<DataConn> open(const DataConnParams& params,
                                          std::string* error);
    ~DataConn();
    DataConn(const DataConn&) = delete;
    DataConn& operator=(const DataConn&) = delete;

    uint32_t rail() const { return rail_; }

    // Posts a slice that PeerLink::place() gave this connection, with the
    // key of this connection's target rail; its bytes count as posted once
    // it is queued. Either way the slice is completed exactly once. When
    // it completes, the slot goes to the next waiting slice, if any.
    void start(WaitingSlice slice) {
        startSlice(std::move(slice), PostedBy::kApplication);
    }

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

    // Which thread posts a request, which decides how much of it may go
    // out on that thread (see enqueue()): the application's, through
    // start(), or the reader, handing a freed slot to a waiting slice.
    enum class PostedBy { kApplication, kReader };

    DataConn(int fd, const DataConnParams& params);
    void startSlice(WaitingSlice slice, PostedBy by);
    // True when the request was queued; otherwise the slice is completed.
    bool post(const std::shared_ptr<Transfer>& transfer, bool is_get,
              uint64_t local, uint64_t remote, uint64_t length, uint32_t key,
              PostedBy by);
    // A queued request. A put's payload is read from user memory by the
    // thread that sends it, so a put slice carries a second completion
    // event, "the sender is done with the payload", fired by the thread
    // that sent the request's last byte or failed to, or by the reader's
    // final sweep of the queue. A transfer therefore never completes while
    // a sender may still read its buffer, even when the connection dies
    // mid-send.
    struct Queued {
        FrameHeader request;  // seq and header set by enqueue()
        uint8_t head[kHeaderSize] = {};
        uint64_t local = 0;  // the payload in user memory, for puts
        uint64_t sent = 0;   // bytes of header + payload already sent
        std::shared_ptr<Transfer> put_transfer;  // null for gets
    };
    // Requests whose payload is at most this go out from the application's
    // posting thread when the socket is idle (GETs always: they carry
    // none); larger ones would hold the application in a copy. The reader
    // sends a request of any size that way: its time is the transport's,
    // and handing each PUT of a busy connection to the sender cost a
    // wake-up per slice, which left the cores idle between slices (writes
    // of 256 KiB-1 MiB moved a median 1.09x more with it;
    // docs/performance.md, "PUTs sent by the reader").
    static constexpr uint64_t kInlinePayloadBytes = 64 * 1024;

    // Registers the slice and queues its request, or sends it at once (see
    // kInlinePayloadBytes); false when the connection is already dead.
    bool enqueue(Pending pending, Queued queued, PostedBy by);
    // Sends what the socket takes without waiting and hands the rest of the
    // request to the sender; completes the put's "done with the payload"
    // once the request is out, and fails the slice if the send fails.
    void sendFromPoster(Queued queued);
    // Removes and completes a slice if nobody else did yet.
    void failPending(uint64_t seq, int status);
    void readerLoop();
    void senderLoop();
    // Handles one response; returns MPCOMM_SUCCESS or the error that ends
    // the connection.
    int handleResponse(const FrameHeader& header);

    // Move bytes, waiting at most until the connection stalls. Return
    // MPCOMM_SUCCESS, MPCOMM_ERR_RETRY_EXCEEDED or MPCOMM_ERR_CONNECTION_LOST.
    // sendFrame() sends a request header and its payload (read straight
    // from user memory), continuing at queued->sent; with may_wait false it
    // returns as soon as the socket is full. recvPayload() receives a GET's
    // data straight into user memory, recvBytes() anything else. Payloads
    // go through payload_io.h.
    int sendFrame(Queued* queued, bool may_wait);
    int recvBytes(void* data, size_t length) {
        return recvInto(data, length, false);
    }
    int recvPayload(void* data, size_t length) {
        return recvInto(data, length, true);
    }
    int recvInto(void* data, size_t length, bool payload);
    // Waits in poll() for `events`. The sender always has bytes to push, so
    // its wait always runs the stall clock; the reader's only while slices
    // are outstanding (otherwise it wakes every progress timeout to look).
    int waitForProgress(short events);
    void noteProgress();
    // Milliseconds left before the connection counts as stalled; -1 while
    // nothing is outstanding, 0 once it has stalled.
    int64_t stallBudgetMs(bool sending);
    // Records why the connection ends (the first reason wins), marks the
    // peer record failed and wakes both threads. Returns the first reason.
    int markDead(int reason);

    const int fd_;
    const uint32_t rail_;
    const size_t index_;
    const std::string peer_;
    const int progress_timeout_ms_;
    const std::shared_ptr<PeerLink> link_;
    // Steady-clock milliseconds of the last byte moved either way, or of the
    // moment the connection last went from idle to having work.
    std::atomic<int64_t> last_progress_ms_{0};
    // pending_mu_ guards the pending table, the send queue and the flags.
    std::mutex pending_mu_;
    std::condition_variable queue_cv_;
    bool dead_ = false;            // set by the reader when the connection ends
    bool stopping_ = false;        // set by close() to release the sender
    bool writing_ = false;         // a thread is sending a request
    int reason_ = MPCOMM_SUCCESS;  // why the connection ended, once it did
    uint64_t next_seq_ = 1;
    std::unordered_map<uint64_t, Pending> pending_;
    std::deque<Queued> queue_;
    std::mutex close_mu_;
    std::thread reader_;
    std::thread sender_;
};

}  // namespace detail
}  // namespace mpcomm
