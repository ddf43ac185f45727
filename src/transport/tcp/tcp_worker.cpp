// TcpTransport initiator side: workers that carry tasks to peers.
#include <glog/logging.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>

#include "net/auth_handshake.h"
#include "net/socket_io.h"
#include "tent/transport/tcp/tcp_transport.h"
#include "transport/tcp/tcp_lanes.h"
#include "transport/tcp/tcp_stager.h"
#include "transport/tcp/tcp_task.h"
#include "transport/tcp/tcp_wire.h"

namespace mooncake::tent {

namespace {

// Each step of a frame gets its own `timeout_ms`: the bound catches a dead
// or hung peer, not a slow but moving transfer.
// Peers a worker remembers its last lane of; past it the hints start over
// (descriptors refreshed over time leave entries nobody looks up).
constexpr size_t kMaxLaneHints = 64;

net::Deadline stepDeadline(int timeout_ms) {
    return net::deadlineIn(timeout_ms);
}

// One slice, [offset, offset + length) of the request, as one frame on one
// connection. A non-OK status with `connection_ok` still true means the
// peer refused the range but the connection is in step and reusable.
// `stager` is set when the local side is device memory.
Status transfer(int fd, const Request& r, uint64_t offset, uint64_t length,
                int timeout_ms, TcpStager* stager, bool& connection_ok) {
    connection_ok = false;
    const bool is_write = r.opcode == Request::WRITE;
    char* local = static_cast<char*>(r.source) + offset;
    tcp_wire::RequestHeader req;
    req.op = is_write ? tcp_wire::kOpWrite : tcp_wire::kOpRead;
    req.addr = r.target_offset + offset;
    req.length = length;
    unsigned char head[tcp_wire::kRequestHeaderBytes];
    tcp_wire::encode(req, head);
    if (is_write && !stager) {
        // The header leaves with the payload, in one system call and the
        // same segments.
        CHECK_STATUS(net::sendAll(fd, head, sizeof(head), local, length,
                                  stepDeadline(timeout_ms)));
    } else {
        CHECK_STATUS(
            net::sendAll(fd, head, sizeof(head), stepDeadline(timeout_ms)));
    }
    if (is_write && stager) {
        CHECK_STATUS(stager->send(fd, local, length, stepDeadline(timeout_ms)));
    }
    // A READ into host memory takes the payload's first bytes with the
    // header: they land where the slice goes in any case.
    const bool direct_read = !is_write && !stager;
    unsigned char reply_buf[tcp_wire::kReplyHeaderBytes];
    size_t early = 0;
    CHECK_STATUS(net::recvHeader(fd, reply_buf, sizeof(reply_buf), local,
                                 direct_read ? length : 0,
                                 stepDeadline(timeout_ms), &early));
    tcp_wire::ReplyHeader reply;
    CHECK_STATUS(tcp_wire::decode(reply_buf, reply));
    if (reply.code != tcp_wire::kReplyOk) {
        // A refusal carries no payload; bytes after it put the stream out
        // of step.
        connection_ok = reply.length == 0 && early == 0;
        return Status::InvalidArgument("target refused the range (code " +
                                       std::to_string(reply.code) +
                                       "): not within one registered buffer");
    }
    const uint64_t expect = is_write ? 0 : length;
    if (reply.length != expect) {
        return Status::InvalidEntry(
            "reply carries " + std::to_string(reply.length) +
            " bytes, expected " + std::to_string(expect));
    }
    if (!is_write && stager) {
        CHECK_STATUS(stager->recv(fd, local, length, stepDeadline(timeout_ms)));
    } else if (direct_read) {
        CHECK_STATUS(net::recvAll(fd, local + early, length - early,
                                  stepDeadline(timeout_ms)));
    }
    connection_ok = true;
    return Status::OK();
}

}  // namespace

void TcpTransport::workerLoop() {
    pthread_setname_np(pthread_self(), "tent-tcp-worker");
    bool was_busy = false;
    // The lane this worker used last, per peer endpoint (the descriptor's
    // string, stable while the task holds it): borrowed again when idle,
    // as each worker kept its own connection before lanes were shared. A
    // stale entry only names a lane that is not idle for that peer.
    LaneHints hints;
    for (;;) {
        std::shared_ptr<TcpTask> task;
        uint64_t offset = 0, length = 0;
        {
            std::unique_lock<std::mutex> lock(queue_mu_);
            if (was_busy) --busy_workers_;
            queue_cv_.wait(lock,
                           [&] { return !running_.load() || !queue_.empty(); });
            if (!running_.load()) break;
            // The next slice of the task at the head; the task stays there
            // until its last byte is claimed, so idle workers can take the
            // rest of it in parallel.
            ++busy_workers_;
            task = queue_.front();
            offset = task->next_offset;
            // A request goes to one peer, so at most lanes_per_peer of
            // its slices move at once: sharing it among more workers would
            // only have them wait for a lane.
            const int idle_others = std::min(settings_.workers - busy_workers_,
                                             settings_.lanes_per_peer - 1);
            length = claimBytes(task->request.length - offset, idle_others,
                                queue_.size() > 1, settings_.min_slice_bytes);
            task->next_offset += length;
            if (task->next_offset >= task->request.length) queue_.pop_front();
        }
        was_busy = true;
        runSlice(*task, offset, length, hints);
    }
}

void TcpTransport::runSlice(TcpTask& task, uint64_t offset, uint64_t length,
                            LaneHints& hints) {
    // Another slice of the task failed already: the task fails whatever
    // this one would do, so it does not touch the network.
    if (task.failed.load(std::memory_order_relaxed)) {
        task.settle(length, false);
        return;
    }
    const Request& r = task.request;
    const std::string& endpoint = *task.endpoint;
    Status s;
    // A pooled lane may have gone stale (the peer restarted at the same
    // endpoint since it was last used). When it fails, the slice is resent
    // once on a fresh lane (the failure closed the peer's idle lanes, so
    // the retry dials): resending rewrites or rereads the same bytes, so it
    // is safe. An attempt that already waited out the timeout is not
    // retried: a hung peer would only double the wait.
    for (int attempt = 0; attempt < 2; ++attempt) {
        if (!running_.load()) {
            s = Status::InternalError("tcp transport uninstalled");
            break;
        }
        TcpLanePool::Lane lane;
        auto hint = hints.find(&endpoint);
        s = lanes_->borrow(endpoint, settings_.timeout_ms, lane,
                           hint == hints.end() ? -1 : hint->second);
        if (!s.ok()) break;
        if (lane.fd < 0) {
            int fd = -1;
            std::string host;
            uint16_t port = 0;
            s = net::parseHostPort(endpoint, "tcp endpoint", host, port);
            if (s.ok()) {
                s = net::connectWithToken(host, port, settings_.auth_token,
                                          stepDeadline(settings_.timeout_ms),
                                          fd);
            }
            if (s.ok()) net::setSendBuffer(fd, settings_.send_buffer_bytes);
            if (s.ok() && !trackSocket(fd)) {
                ::close(fd);
                s = Status::InternalError("tcp transport uninstalled");
            }
            if (!s.ok()) {
                lanes_->dialFailed(endpoint);
                break;
            }
            lane.fd = fd;
        }
        bool connection_ok = false;
        const auto started = std::chrono::steady_clock::now();
        s = transfer(lane.fd, r, offset, length, settings_.timeout_ms,
                     task.local_device ? stager_.get() : nullptr,
                     connection_ok);
        const bool waited_out = std::chrono::steady_clock::now() - started >=
                                std::chrono::milliseconds(settings_.timeout_ms);
        // Out of step or dead: closed, and the next slice to this peer
        // dials afresh.
        if (hints.size() >= kMaxLaneHints) hints.clear();
        hints[&endpoint] = lane.fd;
        lanes_->giveBack(endpoint, lane.fd, connection_ok);
        const bool retry =
            !s.ok() && lane.pooled && !connection_ok && !waited_out;
        if (!retry) break;
    }
    if (!s.ok()) {
        // One line per task: its first failing slice says why.
        if (!task.failed.exchange(true, std::memory_order_relaxed)) {
            LOG(WARNING) << "TcpTransport: "
                         << (r.opcode == Request::WRITE ? "WRITE" : "READ")
                         << " of " << length << " bytes at 0x" << std::hex
                         << r.target_offset + offset << std::dec
                         << (length < r.length ? " (a slice of a " +
                                                     std::to_string(r.length) +
                                                     "-byte request)"
                                               : std::string())
                         << " on segment " << task.segment()
                         << " failed: " << s.message();
        }
        task.settle(length, false);
        return;
    }
    task.transferred.fetch_add(length, std::memory_order_relaxed);
    task.settle(length, true);
}

}  // namespace mooncake::tent
