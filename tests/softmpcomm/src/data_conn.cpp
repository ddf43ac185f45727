#include "data_conn.h"

#include <vector>

#include "log.h"
#include "socket_util.h"

namespace mpcomm {
namespace detail {

std::shared_ptr<DataConn> DataConn::open(const std::string& addr, int port,
                                         const std::string& my_host,
                                         const std::string& expected_host,
                                         uint32_t rail, uint32_t qp,
                                         std::string* error) {
    int fd = connectTcp(addr, port, kHandshakeTimeoutMs, error);
    if (fd < 0) return nullptr;
    setIoTimeout(fd, kHandshakeTimeoutMs);
    std::string peer;
    uint32_t peer_rails = 0;
    if (!clientHello(fd, ConnKind::kData, my_host, rail, qp, &peer, &peer_rails,
                     error)) {
        closeSocket(fd);
        return nullptr;
    }
    if (peer != expected_host) {
        *error = "data connection reached host '" + peer + "', expected '" +
                 expected_host + "'";
        closeSocket(fd);
        return nullptr;
    }
    // From here on the reader blocks until the connection ends.
    setIoTimeout(fd, 0);
    std::shared_ptr<DataConn> conn(new DataConn(fd, rail));
    conn->reader_ = std::thread([raw = conn.get()] { raw->readerLoop(); });
    conn->sender_ = std::thread([raw = conn.get()] { raw->senderLoop(); });
    return conn;
}

DataConn::DataConn(int fd, uint32_t rail) : fd_(fd), rail_(rail) {}

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

bool DataConn::enqueue(Pending pending, Queued queued) {
    {
        std::lock_guard<std::mutex> lock(pending_mu_);
        if (dead_ || stopping_) return false;
        queued.request.seq = next_seq_++;
        pending_.emplace(queued.request.seq, std::move(pending));
        queue_.push_back(std::move(queued));
    }
    queue_cv_.notify_one();
    return true;
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

bool DataConn::postPut(const std::shared_ptr<Transfer>& transfer,
                       uint64_t local, uint64_t remote, uint64_t length,
                       uint32_t key) {
    return post(transfer, false, local, remote, length, key);
}

bool DataConn::postGet(const std::shared_ptr<Transfer>& transfer,
                       uint64_t local, uint64_t remote, uint64_t length,
                       uint32_t key) {
    return post(transfer, true, local, remote, length, key);
}

bool DataConn::post(const std::shared_ptr<Transfer>& transfer, bool is_get,
                    uint64_t local, uint64_t remote, uint64_t length,
                    uint32_t key) {
    Pending pending;
    pending.transfer = transfer;
    pending.is_get = is_get;
    pending.local = local;
    pending.length = length;
    Queued queued;
    queued.request.type = is_get ? MsgType::kGetReq : MsgType::kPutReq;
    queued.request.addr = remote;
    queued.request.length = length;
    queued.request.key = key;
    if (!is_get) {
        transfer->addSlices(1);  // the sender's "done with the payload"
        queued.put_transfer = transfer;
    }
    if (enqueue(std::move(pending), std::move(queued))) return true;
    transfer->sliceDone(MPCOMM_ERR_CONNECTION_LOST);
    if (!is_get) transfer->sliceDone(MPCOMM_ERR_CONNECTION_LOST);
    return false;
}

void DataConn::senderLoop() {
    for (;;) {
        Queued queued;
        uint64_t local = 0;
        bool found = false;
        {
            std::unique_lock<std::mutex> lock(pending_mu_);
            queue_cv_.wait(
                lock, [this] { return stopping_ || dead_ || !queue_.empty(); });
            // Whatever is still queued stays there and in the pending table,
            // where the reader's final sweep fails it.
            if (stopping_ || dead_) return;
            queued = std::move(queue_.front());
            queue_.pop_front();
            auto it = pending_.find(queued.request.seq);
            found = it != pending_.end();
            if (found) local = it->second.local;
        }
        const FrameHeader& request = queued.request;
        bool sent =
            !found ||
            (queued.put_transfer
                 ? sendFrame(fd_, request, reinterpret_cast<const void*>(local),
                             request.length)
                 : sendFrame(fd_, request));
        if (queued.put_transfer) {
            queued.put_transfer->sliceDone(sent ? MPCOMM_SUCCESS
                                                : MPCOMM_ERR_CONNECTION_LOST);
        }
        if (!sent) {
            // A half-written request poisons the stream: end the connection
            // so the reader fails every other slice on it too.
            shutdownSocket(fd_);
            failPending(request.seq, MPCOMM_ERR_CONNECTION_LOST);
            return;
        }
    }
}

int DataConn::handleResponse(const FrameHeader& header) {
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
        if (header.addr != received || header.payload_len == 0 ||
            header.payload_len > length - received)
            return MPCOMM_ERR_PROTOCOL;
        if (!recvAll(fd_, reinterpret_cast<void*>(local + received),
                     header.payload_len))
            return MPCOMM_ERR_CONNECTION_LOST;
        std::lock_guard<std::mutex> lock(pending_mu_);
        auto it = pending_.find(header.seq);
        if (it != pending_.end()) it->second.received += header.payload_len;
        return MPCOMM_SUCCESS;
    }
    if (header.type != MsgType::kPutAck && header.type != MsgType::kGetDone)
        return MPCOMM_ERR_PROTOCOL;
    if (header.payload_len != 0) return MPCOMM_ERR_PROTOCOL;
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
    return connection_error;
}

void DataConn::readerLoop() {
    int reason = MPCOMM_ERR_CONNECTION_LOST;
    for (;;) {
        uint8_t raw[kHeaderSize];
        if (!recvAll(fd_, raw, kHeaderSize)) break;
        FrameHeader header;
        if (!decodeHeader(raw, &header)) {
            reason = MPCOMM_ERR_PROTOCOL;
            break;
        }
        int rc = handleResponse(header);
        if (rc != MPCOMM_SUCCESS) {
            reason = rc;
            break;
        }
    }
    shutdownSocket(fd_);
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
    if (!orphans.empty())
        MPCOMM_LOG(kWarn) << "data connection on rail " << rail_
                          << " ended; failing " << orphans.size()
                          << " in-flight slice(s) with error " << reason;
    for (auto& entry : orphans) entry.second.transfer->sliceDone(reason);
}

}  // namespace detail
}  // namespace mpcomm
