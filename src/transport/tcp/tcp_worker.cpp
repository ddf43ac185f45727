// TcpTransport initiator side: workers that carry tasks to peers.
#include <glog/logging.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>

#include "net/socket_io.h"
#include "transport/tcp/tcp_task.h"
#include "transport/tcp/tcp_wire.h"

namespace mooncake::tent {

namespace {

// Each step of a chunk gets its own `timeout_ms`: the bound catches a dead
// or hung peer, not a slow but moving transfer.
net::Deadline stepDeadline(int timeout_ms) {
    return net::deadlineIn(timeout_ms);
}

// One request on one connection, frame by frame. A non-OK status with
// `connection_ok` still true means the peer refused the request but the
// connection is in step and reusable.
Status transfer(int fd, TcpTransport::Task& task, int timeout_ms,
                const std::atomic<bool>& running, bool& connection_ok) {
    connection_ok = true;
    const Request& r = task.request;
    const bool is_write = r.opcode == Request::WRITE;
    char* local = static_cast<char*>(r.source);
    uint64_t done = 0;
    while (done < r.length || (r.length == 0 && done == 0)) {
        if (!running.load()) {
            connection_ok = false;
            return Status::InternalError("tcp transport uninstalled");
        }
        const uint64_t chunk =
            std::min<uint64_t>(r.length - done, tcp_wire::kMaxChunk);
        tcp_wire::RequestHeader req;
        req.op = is_write ? tcp_wire::kOpWrite : tcp_wire::kOpRead;
        req.addr = r.target_offset + done;
        req.length = chunk;
        unsigned char head[tcp_wire::kRequestHeaderBytes];
        tcp_wire::encode(req, head);
        connection_ok = false;
        CHECK_STATUS(
            net::sendAll(fd, head, sizeof(head), stepDeadline(timeout_ms)));
        if (is_write) {
            CHECK_STATUS(net::sendAll(fd, local + done, chunk,
                                      stepDeadline(timeout_ms)));
        }
        unsigned char reply_buf[tcp_wire::kReplyHeaderBytes];
        CHECK_STATUS(net::recvAll(fd, reply_buf, sizeof(reply_buf),
                                  stepDeadline(timeout_ms)));
        tcp_wire::ReplyHeader reply;
        CHECK_STATUS(tcp_wire::decode(reply_buf, reply));
        if (reply.code != tcp_wire::kReplyOk) {
            connection_ok = reply.length == 0;
            return Status::InvalidArgument(
                "target refused the range (code " + std::to_string(reply.code) +
                "): not within one registered buffer");
        }
        const uint64_t expect = is_write ? 0 : chunk;
        if (reply.length != expect) {
            return Status::InvalidEntry(
                "reply carries " + std::to_string(reply.length) +
                " bytes, expected " + std::to_string(expect));
        }
        if (!is_write) {
            CHECK_STATUS(net::recvAll(fd, local + done, chunk,
                                      stepDeadline(timeout_ms)));
        }
        connection_ok = true;
        done += chunk;
        task.transferred.store(done, std::memory_order_relaxed);
        if (r.length == 0) break;
    }
    return Status::OK();
}

}  // namespace

void TcpTransport::workerLoop() {
    pthread_setname_np(pthread_self(), "tent-tcp-worker");
    // endpoint -> connected socket; private to this worker, so a peer sees
    // at most one connection per worker and frames never interleave.
    std::map<std::string, int> connections;
    for (;;) {
        std::shared_ptr<Task> task;
        {
            std::unique_lock<std::mutex> lock(queue_mu_);
            queue_cv_.wait(lock,
                           [&] { return !running_.load() || !queue_.empty(); });
            if (!running_.load()) break;
            task = std::move(queue_.front());
            queue_.pop_front();
        }
        runTask(*task, connections);
    }
    for (auto& entry : connections) {
        untrackSocket(entry.second);
        ::close(entry.second);
    }
}

void TcpTransport::runTask(Task& task,
                           std::map<std::string, int>& connections) {
    const Request& r = task.request;
    if (r.opcode != Request::READ && r.opcode != Request::WRITE) {
        LOG(WARNING) << "TcpTransport: task to " << task.segment()
                     << " failed: bad opcode " << static_cast<int>(r.opcode);
        task.finish(FAILED);
        return;
    }
    if (r.length > 0 && !r.source) {
        LOG(WARNING) << "TcpTransport: task to " << task.segment()
                     << " failed: null source for " << r.length << " bytes";
        task.finish(FAILED);
        return;
    }
    Status s;
    // A pooled connection may have gone stale (the peer restarted at the
    // same endpoint since it was last used). When it fails before any
    // chunk completed, the request is resent once on a fresh connection:
    // resending rewrites or rereads the same bytes, so it is safe.
    // An attempt that already waited out the timeout is not retried: a hung
    // peer would only double the wait.
    for (int attempt = 0; attempt < 2; ++attempt) {
        auto it = connections.find(*task.endpoint);
        const bool pooled = it != connections.end();
        if (!pooled) {
            int fd = -1;
            std::string host;
            uint16_t port = 0;
            s = net::parseHostPort(*task.endpoint, "tcp endpoint", host, port);
            if (s.ok()) {
                s = net::connectTo(host, port,
                                   stepDeadline(settings_.timeout_ms), fd);
            }
            if (s.ok()) net::setSendBuffer(fd, settings_.send_buffer_bytes);
            if (s.ok() && !trackSocket(fd)) {
                ::close(fd);
                s = Status::InternalError("tcp transport uninstalled");
            }
            if (!s.ok()) break;
            it = connections.emplace(*task.endpoint, fd).first;
        }
        bool connection_ok = false;
        const auto started = std::chrono::steady_clock::now();
        s = transfer(it->second, task, settings_.timeout_ms, running_,
                     connection_ok);
        const bool waited_out = std::chrono::steady_clock::now() - started >=
                                std::chrono::milliseconds(settings_.timeout_ms);
        if (!connection_ok) {
            // Out of step or dead: the next task to this peer dials afresh.
            untrackSocket(it->second);
            ::close(it->second);
            connections.erase(it);
        }
        const bool retry = !s.ok() && pooled && !connection_ok && !waited_out &&
                           running_.load() && task.transferred.load() == 0;
        if (!retry) break;
    }
    if (!s.ok()) {
        LOG(WARNING) << "TcpTransport: "
                     << (r.opcode == Request::WRITE ? "WRITE" : "READ")
                     << " of " << r.length << " bytes at 0x" << std::hex
                     << r.target_offset << std::dec << " on segment "
                     << task.segment() << " failed: " << s.message();
        task.finish(FAILED);
        return;
    }
    task.finish(COMPLETED);
}

}  // namespace mooncake::tent
