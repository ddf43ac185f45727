#include "data_conn.h"

#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <vector>

#include "log.h"
#include "payload_io.h"

namespace mpcomm {
namespace detail {

namespace {

int64_t nowMs() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

}  // namespace

std::shared_ptr<DataConn> DataConn::open(const DataConnParams& params,
                                         std::string* error) {
    int raw_fd =
        connectTcp(params.addr, params.port, params.handshake_timeout_ms, error,
                   params.handshakes);
    if (raw_fd < 0) return nullptr;
    TrackedSocket socket(raw_fd, params.handshakes);
    std::string peer;
    uint32_t peer_rails = 0;
    if (!clientHello(socket.fd(), ConnKind::kData, params.my_host, params.rail,
                     params.qp, Deadline::in(params.handshake_timeout_ms),
                     &peer, &peer_rails, error))
        return nullptr;
    if (peer != params.expected_host) {
        *error = "data connection reached host '" + peer + "', expected '" +
                 params.expected_host + "'";
        return nullptr;
    }
    setSendBuffer(socket.fd(), params.send_buffer_bytes);  // PUT payloads
    // From here on close() wakes the connection's threads, not shutdown()'s
    // cancellation of handshakes.
    std::shared_ptr<DataConn> conn(new DataConn(socket.release(), params));
    // Named so that top -H and perf tell a connection's threads apart.
    conn->reader_ = std::thread([raw = conn.get()] {
        pthread_setname_np(pthread_self(), "smpc-reader");
        raw->readerLoop();
    });
    conn->sender_ = std::thread([raw = conn.get()] {
        pthread_setname_np(pthread_self(), "smpc-sender");
        raw->senderLoop();
    });
    return conn;
}

DataConn::DataConn(int fd, const DataConnParams& params)
    : fd_(fd),
      rail_(params.rail),
      index_(params.index),
      peer_(params.expected_host),
      progress_timeout_ms_(params.progress_timeout_ms),
      link_(params.link) {
    noteProgress();
}

DataConn::~DataConn() {
    close();
    closeSocket(fd_);
}

void DataConn::close() {
    std::lock_guard<std::mutex> lock(close_mu_);
    {
        std::lock_guard<std::mutex> pending_lock(pending_mu_);
        stopping_ = true;
    }
    queue_cv_.notify_all();
    shutdownSocket(fd_);
    if (sender_.joinable()) sender_.join();
    if (reader_.joinable()) reader_.join();
}

void DataConn::noteProgress() {
    last_progress_ms_.store(nowMs(), std::memory_order_relaxed);
}

int64_t DataConn::stallBudgetMs(bool sending) {
    if (!sending) {
        std::lock_guard<std::mutex> lock(pending_mu_);
        if (pending_.empty()) return -1;
    }
    int64_t quiet = nowMs() - last_progress_ms_.load(std::memory_order_relaxed);
    return std::max<int64_t>(0, progress_timeout_ms_ - quiet);
}

int DataConn::waitForProgress(short events) {
    const bool sending = (events & POLLOUT) != 0;
    for (;;) {
        int64_t budget = stallBudgetMs(sending);
        if (budget == 0) return MPCOMM_ERR_RETRY_EXCEEDED;
        // Nothing outstanding: look again after one timeout, so a slice
        // posted meanwhile is watched from then on.
        int timeout = static_cast<int>(std::min<int64_t>(
            budget < 0 ? progress_timeout_ms_ : budget, INT_MAX));
        pollfd pfd{fd_, events, 0};
        int ready = ::poll(&pfd, 1, timeout);
        // Readiness, an error or a hang-up: the next send/recv tells which.
        if (ready > 0) return MPCOMM_SUCCESS;
        if (ready < 0 && errno != EINTR) return MPCOMM_ERR_CONNECTION_LOST;
    }
}

int DataConn::sendFrame(Queued* queued, bool may_wait) {
    FrameParts parts;
    parts.head = queued->head;
    parts.head_length = kHeaderSize;
    parts.payload = reinterpret_cast<const void*>(queued->local);
    parts.payload_length = queued->request.payload_len;
    const uint64_t total = parts.total();
    // Header and payload leave in one sendmsg(), so a PUT costs no extra
    // small segment and no copy of the payload.
    while (queued->sent < total) {
        ssize_t n = sendPayloadOnce(fd_, parts, queued->sent);
        if (n > 0) {
            noteProgress();
            queued->sent += static_cast<uint64_t>(n);
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK))
            return MPCOMM_ERR_CONNECTION_LOST;
        if (!may_wait) return MPCOMM_SUCCESS;  // the rest is the sender's
        int rc = waitForProgress(POLLOUT);
        if (rc != MPCOMM_SUCCESS) return rc;
    }
    return MPCOMM_SUCCESS;
}

int DataConn::recvInto(void* data, size_t length, bool payload) {
    char* cursor = static_cast<char*>(data);
    while (length > 0) {
        ssize_t got = payload ? recvPayloadOnce(fd_, cursor, length)
                              : ::recv(fd_, cursor, length, MSG_DONTWAIT);
        if (got > 0) {
            noteProgress();
            cursor += got;
            length -= static_cast<size_t>(got);
            continue;
        }
        if (got == 0) return MPCOMM_ERR_CONNECTION_LOST;
        if (errno == EINTR) continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK)
            return MPCOMM_ERR_CONNECTION_LOST;
        int rc = waitForProgress(POLLIN);
        if (rc != MPCOMM_SUCCESS) return rc;
    }
    return MPCOMM_SUCCESS;
}

int DataConn::markDead(int reason) {
    int first;
    {
        std::lock_guard<std::mutex> lock(pending_mu_);
        if (reason_ == MPCOMM_SUCCESS) reason_ = reason;
        first = reason_;
    }
    shutdownSocket(fd_);
    // Slices still waiting for a slot on the record fail with the reason.
    link_->fail(first);
    return first;
}

bool DataConn::enqueue(Pending pending, Queued queued, PostedBy by) {
    bool send_here;
    {
        std::lock_guard<std::mutex> lock(pending_mu_);
        if (dead_ || stopping_) return false;
        // The stall clock starts when work arrives, not at the last byte
        // of a long-idle connection.
        if (pending_.empty()) noteProgress();
        queued.request.seq = next_seq_++;
        encodeHeader(queued.request, queued.head);
        pending_.emplace(queued.request.seq, std::move(pending));
        // A request on an idle socket goes out from the posting thread when
        // waking the sender would cost more than sending it here.
        send_here = !writing_ && queue_.empty() &&
                    (by == PostedBy::kReader ||
                     queued.request.payload_len <= kInlinePayloadBytes);
        if (send_here)
            writing_ = true;
        else
            queue_.push_back(std::move(queued));
    }
    if (send_here)
        sendFromPoster(std::move(queued));
    else
        queue_cv_.notify_one();
    return true;
}

void DataConn::sendFromPoster(Queued queued) {
    // Never waits: what the socket does not take now is the sender's.
    int rc = sendFrame(&queued, false);
    const bool whole = queued.sent == kHeaderSize + queued.request.payload_len;
    bool handed_over = false;
    bool wake = false;
    if (rc == MPCOMM_SUCCESS) {
        std::lock_guard<std::mutex> lock(pending_mu_);
        writing_ = false;
        // Once the reader swept the queue (dead_), nobody would send or fail
        // a request put back now: it fails below instead.
        if (!whole && !dead_) {
            queue_.push_front(std::move(queued));  // the rest goes out first
            handed_over = true;
        } else if (!whole) {
            rc = reason_;
        }
        wake = !queue_.empty();
    } else {
        // A half-written request poisons the stream, as in senderLoop().
        rc = markDead(rc);
        std::lock_guard<std::mutex> lock(pending_mu_);
        writing_ = false;
    }
    if (wake) queue_cv_.notify_one();
    if (handed_over) return;
    if (queued.put_transfer) queued.put_transfer->sliceDone(rc);
    if (rc != MPCOMM_SUCCESS) failPending(queued.request.seq, rc);
}

void DataConn::failPending(uint64_t seq, int status) {
    std::shared_ptr<Transfer> transfer;
    {
        std::lock_guard<std::mutex> lock(pending_mu_);
        auto it = pending_.find(seq);
        if (it == pending_.end()) return;
        transfer = std::move(it->second.transfer);
        pending_.erase(it);
    }
    transfer->sliceDone(status);
}

void DataConn::startSlice(WaitingSlice slice, PostedBy by) {
    for (;;) {
        const std::vector<uint32_t>& keys = *slice.rkeys;
        if (rail_ < keys.size()) {
            if (post(slice.transfer, slice.is_get, slice.local, slice.remote,
                     slice.length, keys[rail_], by))
                slice.transfer->addPostedBytes(slice.length);
            return;
        }
        // The target published no key for this rail: the slice fails here
        // and its room goes on.
        slice.transfer->sliceDone(MPCOMM_ERR_REMOTE_ACCESS);
        if (!link_->takeNext(index_, slice.is_get, slice.length, &slice))
            return;
    }
}

bool DataConn::post(const std::shared_ptr<Transfer>& transfer, bool is_get,
                    uint64_t local, uint64_t remote, uint64_t length,
                    uint32_t key, PostedBy by) {
    Pending pending;
    pending.transfer = transfer;
    pending.is_get = is_get;
    pending.local = local;
    pending.length = length;
    Queued queued;
    queued.request.type = is_get ? MsgType::kGetReq : MsgType::kPutReq;
    queued.request.addr = remote;
    queued.request.length = length;
    queued.request.payload_len = is_get ? 0 : length;
    queued.request.key = key;
    queued.local = local;
    if (!is_get) {
        transfer->addSlices(1);  // the sender's "done with the payload"
        queued.put_transfer = transfer;
    }
    if (enqueue(std::move(pending), std::move(queued), by)) return true;
    transfer->sliceDone(MPCOMM_ERR_CONNECTION_LOST);
    if (!is_get) transfer->sliceDone(MPCOMM_ERR_CONNECTION_LOST);
    return false;
}

void DataConn::senderLoop() {
    for (;;) {
        Queued queued;
        bool found = false;
        {
            std::unique_lock<std::mutex> lock(pending_mu_);
            // A poster sending inline owns the socket until it is done.
            queue_cv_.wait(lock, [this] {
                return stopping_ || dead_ || (!queue_.empty() && !writing_);
            });
            // Whatever is still queued stays there and in the pending table,
            // where the reader's final sweep fails it.
            if (stopping_ || dead_) return;
            queued = std::move(queue_.front());
            queue_.pop_front();
            // A slice failed meanwhile is skipped, unless part of it already
            // went out (only a dead connection fails slices, see above).
            found = queued.sent > 0 || pending_.count(queued.request.seq) > 0;
            writing_ = found;
        }
        const FrameHeader& request = queued.request;
        int rc = MPCOMM_SUCCESS;
        if (found) {
            rc = sendFrame(&queued, true);
            // A half-written request poisons the stream: end the connection
            // (before anyone else may write) so the reader fails every other
            // slice on it too, with the same code.
            if (rc != MPCOMM_SUCCESS) rc = markDead(rc);
            std::lock_guard<std::mutex> lock(pending_mu_);
            writing_ = false;
        }
        if (queued.put_transfer) queued.put_transfer->sliceDone(rc);
        if (rc != MPCOMM_SUCCESS) {
            failPending(request.seq, rc);
            return;
        }
    }
}

int DataConn::handleResponse(const FrameHeader& header) {
    if (!checkReply(ConnStage::kData, header)) return MPCOMM_ERR_PROTOCOL;
    if (header.type == MsgType::kGetData) {
        uint64_t local, length, received;
        {
            std::lock_guard<std::mutex> lock(pending_mu_);
            auto it = pending_.find(header.seq);
            if (it == pending_.end() || !it->second.is_get)
                return MPCOMM_ERR_PROTOCOL;
            local = it->second.local;
            length = it->second.length;
            received = it->second.received;
        }
        // Data must arrive in order and inside the slice: the initiator's
        // memory is only ever written within [local, local + length).
        if (header.addr != received || header.payload_len > length - received)
            return MPCOMM_ERR_PROTOCOL;
        int rc = recvPayload(reinterpret_cast<void*>(local + received),
                             header.payload_len);
        if (rc != MPCOMM_SUCCESS) return rc;
        std::lock_guard<std::mutex> lock(pending_mu_);
        auto it = pending_.find(header.seq);
        if (it != pending_.end()) it->second.received += header.payload_len;
        return MPCOMM_SUCCESS;
    }
    Pending done;
    {
        std::lock_guard<std::mutex> lock(pending_mu_);
        auto it = pending_.find(header.seq);
        bool want_get = header.type == MsgType::kGetDone;
        if (it == pending_.end() || it->second.is_get != want_get)
            return MPCOMM_ERR_PROTOCOL;
        done = std::move(it->second);
        pending_.erase(it);
    }
    int status = sanitizeRemoteStatus(header.status);
    int connection_error = MPCOMM_SUCCESS;
    if (status == MPCOMM_SUCCESS && done.is_get &&
        done.received != done.length) {
        status = MPCOMM_ERR_PROTOCOL;
        connection_error = MPCOMM_ERR_PROTOCOL;
    }
    done.transfer->sliceDone(status);
    // The room goes to the oldest slice waiting for it, unless this
    // connection is about to end (which fails the waiting slices).
    WaitingSlice next;
    if (connection_error == MPCOMM_SUCCESS &&
        link_->takeNext(index_, done.is_get, done.length, &next))
        startSlice(std::move(next), PostedBy::kReader);
    return connection_error;
}

void DataConn::readerLoop() {
    int reason = MPCOMM_SUCCESS;
    while (reason == MPCOMM_SUCCESS) {
        uint8_t raw[kHeaderSize];
        reason = recvBytes(raw, kHeaderSize);
        if (reason != MPCOMM_SUCCESS) break;
        FrameHeader header;
        reason = decodeHeader(raw, &header) ? handleResponse(header)
                                            : MPCOMM_ERR_PROTOCOL;
    }
    reason = markDead(reason);
    std::unordered_map<uint64_t, Pending> orphans;
    std::deque<Queued> unsent;
    {
        std::lock_guard<std::mutex> lock(pending_mu_);
        dead_ = true;
        orphans.swap(pending_);
        unsent.swap(queue_);
    }
    for (auto& queued : unsent) {
        if (queued.put_transfer) queued.put_transfer->sliceDone(reason);
    }
    queue_cv_.notify_all();
    if (reason == MPCOMM_ERR_RETRY_EXCEEDED)
        MPCOMM_LOG(kWarn) << "data connection to '" << peer_ << "' on rail "
                          << rail_ << " made no progress for "
                          << progress_timeout_ms_
                          << " ms (SOFTMPCOMM_PROGRESS_TIMEOUT_MS); failing "
                          << orphans.size()
                          << " slice(s) with MPCOMM_ERR_RETRY_EXCEEDED";
    else if (!orphans.empty())
        MPCOMM_LOG(kWarn) << "data connection to '" << peer_ << "' on rail "
                          << rail_ << " ended; failing " << orphans.size()
                          << " in-flight slice(s) with error " << reason;
    for (auto& entry : orphans) entry.second.transfer->sliceDone(reason);
}

}  // namespace detail
}  // namespace mpcomm
