#include "server.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <vector>

#include "log.h"
#include "socket_util.h"

namespace mpcomm {
namespace detail {

namespace {

// Ends a PUT or GET: logs a refusal and sends `reply` (kPutAck or
// kGetDone) carrying the final status.
bool finishRequest(int fd, const FrameHeader& request, const char* op,
                   MsgType reply, int status) {
    if (status != MPCOMM_SUCCESS)
        MPCOMM_LOG(kDebug) << "refused " << op << " of " << request.length
                           << " bytes at 0x" << std::hex << request.addr;
    FrameHeader done;
    done.type = reply;
    done.seq = request.seq;
    done.status = status;
    return sendFrame(fd, done);
}

}  // namespace

Server::Server(std::string host_id, uint32_t rails, MemoryTable* memory)
    : host_id_(std::move(host_id)), rails_(rails), memory_(memory) {}

Server::~Server() { shutdown(); }

int Server::listen(int port, std::string* error) {
    listen_fd_ = listenTcp(port, error);
    if (listen_fd_ < 0) return MPCOMM_ERR_BIND;
    if (::pipe2(wake_pipe_, O_CLOEXEC | O_NONBLOCK) != 0) {
        *error = "pipe2() failed";
        closeSocket(listen_fd_);
        listen_fd_ = -1;
        return MPCOMM_ERR_BIND;
    }
    return MPCOMM_SUCCESS;
}

int Server::startAccepting() {
    std::lock_guard<std::mutex> lock(accept_mu_);
    if (listen_fd_ < 0) return MPCOMM_ERR_NOT_INITIALIZED;
    if (accept_thread_.joinable()) return MPCOMM_SUCCESS;
    accept_thread_ = std::thread([this] { acceptLoop(); });
    return MPCOMM_SUCCESS;
}

void Server::stopAccepting() {
    std::lock_guard<std::mutex> lock(accept_mu_);
    if (!accept_thread_.joinable()) return;
    char byte = 1;
    ssize_t ignored = ::write(wake_pipe_[1], &byte, 1);
    (void)ignored;
    accept_thread_.join();
    // Drain the wake-up so a later startAccepting() does not exit at once.
    while (::read(wake_pipe_[0], &byte, 1) > 0) {
    }
}

void Server::shutdown() {
    stopAccepting();
    std::list<std::unique_ptr<Conn>> conns;
    {
        std::lock_guard<std::mutex> lock(conns_mu_);
        closing_ = true;
        conns.swap(conns_);
    }
    for (auto& conn : conns) shutdownSocket(conn->fd);
    for (auto& conn : conns) {
        if (conn->thread.joinable()) conn->thread.join();
        closeSocket(conn->fd);
    }
    std::lock_guard<std::mutex> lock(accept_mu_);
    closeSocket(listen_fd_);
    listen_fd_ = -1;
    closeSocket(wake_pipe_[0]);
    closeSocket(wake_pipe_[1]);
    wake_pipe_[0] = wake_pipe_[1] = -1;
}

void Server::acceptLoop() {
    for (;;) {
        pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_pipe_[0], POLLIN, 0}};
        int ready = ::poll(fds, 2, -1);
        if (ready < 0 && errno == EINTR) continue;
        if (ready < 0 || (fds[1].revents & POLLIN)) return;
        if (!(fds[0].revents & POLLIN)) continue;
        int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
        if (fd < 0) continue;
        // Acks and small replies must not wait out Nagle + delayed ACK.
        int one = 1;
        ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        reapFinished();
        std::lock_guard<std::mutex> lock(conns_mu_);
        if (closing_) {
            closeSocket(fd);
            return;
        }
        auto conn = std::make_unique<Conn>();
        conn->fd = fd;
        Conn* raw = conn.get();
        conns_.push_back(std::move(conn));
        raw->thread = std::thread([this, raw] { serve(raw); });
    }
}

void Server::reapFinished() {
    // Control connections are short-lived (one per connect / query); joining
    // finished ones here keeps threads and fds from piling up.
    std::list<std::unique_ptr<Conn>> done;
    {
        std::lock_guard<std::mutex> lock(conns_mu_);
        for (auto it = conns_.begin(); it != conns_.end();) {
            if ((*it)->finished.load(std::memory_order_acquire)) {
                done.push_back(std::move(*it));
                it = conns_.erase(it);
            } else {
                ++it;
            }
        }
    }
    for (auto& conn : done) {
        conn->thread.join();
        closeSocket(conn->fd);
    }
}

void Server::serve(Conn* conn) {
    int fd = conn->fd;
    setIoTimeout(fd, kHandshakeTimeoutMs);
    FrameHeader hello;
    std::string peer;
    bool ok = recvHeader(fd, &hello) && hello.type == MsgType::kHello &&
              hello.payload_len > 0 && hello.payload_len <= kMaxHostIdLength;
    if (ok) {
        peer.resize(hello.payload_len);
        ok = recvAll(fd, &peer[0], peer.size());
    }
    bool is_data = hello.key == static_cast<uint32_t>(ConnKind::kData);
    bool valid_kind =
        is_data || hello.key == static_cast<uint32_t>(ConnKind::kControl);
    if (ok) {
        FrameHeader ack;
        ack.type = MsgType::kHelloAck;
        ack.length = rails_;
        bool accepted = valid_kind && (!is_data || hello.addr < rails_);
        if (!accepted) ack.status = MPCOMM_ERR_PROTOCOL;
        ok = sendFrame(fd, ack, host_id_.data(), host_id_.size()) && accepted;
        if (!accepted)
            MPCOMM_LOG(kWarn) << "rejected HELLO from '" << peer << "' (kind "
                              << hello.key << ", rail " << hello.addr << ")";
    }
    if (ok && is_data) {
        MPCOMM_LOG(kDebug) << "data connection from '" << peer << "' rail "
                           << hello.addr << " qp " << hello.length;
        setIoTimeout(fd, 0);
        serveData(fd, static_cast<uint32_t>(hello.addr));
    } else if (ok) {
        serveControl(fd);
    }
    // Tell the peer at once; the descriptor itself is closed by whoever
    // joins this thread, so its number cannot be recycled under us.
    shutdownSocket(fd);
    conn->finished.store(true, std::memory_order_release);
}

void Server::serveControl(int fd) {
    FrameHeader request;
    while (recvHeader(fd, &request)) {
        if (request.type != MsgType::kQueryReq || request.payload_len != 0)
            return;
        std::string list = encodeBufferList(memory_->publishedList());
        FrameHeader reply;
        reply.type = MsgType::kQueryResp;
        if (list.size() > kMaxQueryPayload) {
            reply.status = MPCOMM_ERR_PROTOCOL;
            list.clear();
        }
        if (!sendFrame(fd, reply, list.data(), list.size())) return;
    }
}

void Server::serveData(int fd, uint32_t rail) {
    FrameHeader request;
    while (recvHeader(fd, &request)) {
        bool keep = false;
        if (request.type == MsgType::kPutReq)
            keep = handlePut(fd, rail, request);
        else if (request.type == MsgType::kGetReq)
            keep = handleGet(fd, rail, request);
        if (!keep) return;
    }
}

bool Server::handlePut(int fd, uint32_t rail, const FrameHeader& request) {
    if (request.payload_len != request.length) return false;
    // Key and range are checked before any byte is placed; each chunk is
    // re-checked at copy time in case the buffer was unpublished meanwhile.
    int status =
        memory_->checkAccess(request.addr, request.length, request.key, rail);
    std::vector<char> bounce(std::min<uint64_t>(request.length, kChunkSize));
    for (uint64_t offset = 0; offset < request.length;) {
        size_t chunk = std::min<uint64_t>(request.length - offset, kChunkSize);
        // The payload is drained even when refused, so the stream stays in
        // step and the connection remains usable.
        if (!recvAll(fd, bounce.data(), chunk)) return false;
        if (status == MPCOMM_SUCCESS)
            status = memory_->copyIn(request.addr + offset, bounce.data(),
                                     chunk, request.key, rail);
        offset += chunk;
    }
    return finishRequest(fd, request, "PUT", MsgType::kPutAck, status);
}

bool Server::handleGet(int fd, uint32_t rail, const FrameHeader& request) {
    if (request.payload_len != 0) return false;
    int status =
        memory_->checkAccess(request.addr, request.length, request.key, rail);
    std::vector<char> bounce;
    if (status == MPCOMM_SUCCESS)
        bounce.resize(std::min<uint64_t>(request.length, kChunkSize));
    for (uint64_t offset = 0;
         status == MPCOMM_SUCCESS && offset < request.length;) {
        size_t chunk = std::min<uint64_t>(request.length - offset, kChunkSize);
        status = memory_->copyOut(request.addr + offset, bounce.data(), chunk,
                                  request.key, rail);
        if (status != MPCOMM_SUCCESS) break;
        FrameHeader data;
        data.type = MsgType::kGetData;
        data.seq = request.seq;
        data.addr = offset;
        if (!sendFrame(fd, data, bounce.data(), chunk)) return false;
        offset += chunk;
    }
    return finishRequest(fd, request, "GET", MsgType::kGetDone, status);
}

}  // namespace detail
}  // namespace mpcomm
