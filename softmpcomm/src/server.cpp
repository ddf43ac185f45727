#include "server.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <system_error>
#include <vector>

#include "log.h"
#include "payload_io.h"
#include "socket_util.h"

namespace mpcomm {
namespace detail {

namespace {

RequestLimits limitsOf(const ServerOptions& options) {
    RequestLimits limits;
    limits.rails = options.rails;
    limits.max_slice = options.max_slice;
    return limits;
}

// Refused PUT payloads are drained in pieces of this size.
constexpr size_t kDrainBytes = 64 * 1024;

// Whether bytes a client sent wait unread on `fd`: its HELLO or its next
// query has arrived, so the connection is not idle whatever its role says
// (its thread just has not read them yet).
bool hasUnreadBytes(int fd) {
    int pending = 0;
    return ::ioctl(fd, FIONREAD, &pending) == 0 && pending > 0;
}

// What a GET_DATA frame is padded with when its buffer is withdrawn while
// the frame is half sent.
const char kZeros[64 * 1024] = {};

}  // namespace

Server::Server(std::string host_id, const ServerOptions& options,
               MemoryTable* memory)
    : host_id_(std::move(host_id)),
      rails_(options.rails),
      limits_(limitsOf(options)),
      idle_timeout_ms_(options.idle_timeout_ms),
      max_connections_(options.max_connections),
      send_buffer_bytes_(options.send_buffer_bytes),
      memory_(memory) {}

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
    int backoffs = 0;  // consecutive, so a shortage is reported once
    for (;;) {
        pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_pipe_[0], POLLIN, 0}};
        int ready = ::poll(fds, 2, -1);  // stopAccepting() writes the pipe
        if (ready < 0 && errno == EINTR) continue;
        if (ready < 0 || (fds[1].revents & POLLIN)) return;
        if (!(fds[0].revents & POLLIN)) continue;
        int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
        if (fd < 0) {
            int err = errno;
            // A client that gave up, or a signal: nothing to wait for.
            if (err == EINTR || err == EAGAIN || err == ECONNABORTED) continue;
            // EMFILE, ENFILE, ENOBUFS, ENOMEM and the unexpected: retrying at
            // once would spin, since the connection stays queued until a
            // descriptor (or memory) frees up.
            if (!backOff(std::strerror(err), &backoffs)) return;
            continue;
        }
        // Acks and small replies must not wait out Nagle + delayed ACK.
        int one = 1;
        ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        reapFinished();
        bool started = false;
        {
            std::lock_guard<std::mutex> lock(conns_mu_);
            if (closing_) {
                closeSocket(fd);
                return;
            }
            if (!admitLocked()) {
                closeSocket(fd);
                continue;
            }
            auto conn = std::make_unique<Conn>();
            conn->fd = fd;
            Conn* raw = conn.get();
            try {
                raw->thread = std::thread([this, raw] {
                    pthread_setname_np(pthread_self(), "smpc-serve");
                    serve(raw);
                });
                conns_.push_back(std::move(conn));
                started = true;
            } catch (const std::system_error&) {
                closeSocket(fd);
            }
        }
        if (started) {
            backoffs = 0;
        } else if (!backOff("cannot start a connection thread", &backoffs)) {
            return;
        }
    }
}

bool Server::backOff(const char* why, int* backoffs) {
    // Finished connections keep their descriptors until joined, and the
    // next successful accept() would be the one to join them: do it now, or
    // a listener out of descriptors never gets any back.
    reapFinished();
    if ((*backoffs)++ == 0)
        MPCOMM_LOG(kWarn) << "accept: " << why
                          << "; new connections wait until resources free up";
    MPCOMM_LOG(kDebug) << "accept backoff #" << *backoffs << " ("
                       << kAcceptBackoffMs << " ms): " << why;
    pollfd wake{wake_pipe_[0], POLLIN, 0};
    int ready = ::poll(&wake, 1, kAcceptBackoffMs);
    return !(ready > 0 && (wake.revents & POLLIN));
}

bool Server::advance(Conn* conn, Role from, Role to) {
    return conn->role.compare_exchange_strong(from, to,
                                              std::memory_order_acq_rel);
}

bool Server::admitLocked() {
    int live = 0;
    for (const auto& conn : conns_) {
        if (!conn->finished.load(std::memory_order_acquire) &&
            conn->role.load(std::memory_order_acquire) != Role::kEvicted)
            ++live;
    }
    // The list is in accept order: the first match is the oldest.
    for (Role victim : {Role::kAnonymous, Role::kControlIdle}) {
        if (live < max_connections_) break;
        for (const auto& conn : conns_) {
            if (conn->finished.load(std::memory_order_acquire) ||
                conn->role.load(std::memory_order_acquire) != victim ||
                hasUnreadBytes(conn->fd) ||
                !advance(conn.get(), victim, Role::kEvicted))
                continue;
            // Its thread sees the hang-up and ends; whoever joins it
            // closes the descriptor.
            shutdownSocket(conn->fd);
            MPCOMM_LOG(kDebug)
                << "at SOFTMPCOMM_MAX_CONNECTIONS=" << max_connections_
                << ": closed the oldest "
                << (victim == Role::kAnonymous ? "connection before HELLO"
                                               : "idle control connection")
                << " to admit a new one";
            --live;
            break;
        }
    }
    if (live < max_connections_) {
        refused_in_a_row_ = 0;
        return true;
    }
    if (refused_in_a_row_++ == 0)
        MPCOMM_LOG(kWarn) << "refusing new connections: " << max_connections_
                          << " connections (SOFTMPCOMM_MAX_CONNECTIONS) are "
                             "open and none is idle before HELLO or "
                             "between queries";
    return false;
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
    // An anonymous connection gets one idle period for its whole HELLO, so
    // neither silence nor a trickle holds its thread longer.
    Deadline hello_deadline = idleDeadline();
    FrameHeader hello;
    std::string peer;
    bool ok =
        readRequest(fd, ConnStage::kAwaitHello, hello_deadline, peer, &hello);
    if (ok) {
        peer.resize(hello.payload_len);  // at most kMaxHostIdLength
        ok = recvAll(fd, &peer[0], peer.size(), hello_deadline);
    }
    ConnStage stage = ConnStage::kAwaitHello;
    if (ok) {
        stage = stageAfterHello(hello, rails_);
        bool accepted = stage != ConnStage::kAwaitHello;
        // Displaced at the cap while saying HELLO: no answer.
        ok = advance(
            conn, Role::kAnonymous,
            stage == ConnStage::kData ? Role::kData : Role::kControlBusy);
        FrameHeader ack;
        ack.type = MsgType::kHelloAck;
        ack.length = rails_;
        if (!accepted) ack.status = MPCOMM_ERR_PROTOCOL;
        ok = ok &&
             sendFrame(fd, ack, idleDeadline(), host_id_.data(),
                       host_id_.size()) &&
             accepted;
        if (!accepted)
            MPCOMM_LOG(kWarn) << "rejected HELLO from '" << peer << "' (kind "
                              << hello.key << ", rail " << hello.addr << ")";
    }
    if (ok && stage == ConnStage::kData) {
        MPCOMM_LOG(kDebug) << "data connection from '" << peer << "' rail "
                           << hello.addr << " qp " << hello.length;
        serveData(fd, static_cast<uint32_t>(hello.addr), peer);
    } else if (ok) {
        serveControl(conn, peer);
    }
    // Tell the peer at once; the descriptor itself is closed by whoever
    // joins this thread, so its number cannot be recycled under us.
    shutdownSocket(fd);
    conn->finished.store(true, std::memory_order_release);
}

bool Server::readRequest(int fd, ConnStage stage, const Deadline& deadline,
                         const std::string& peer, FrameHeader* header) {
    uint8_t raw[kHeaderSize];
    // Closed, idle past the deadline or trickling: nothing worth a log line.
    if (!recvAll(fd, raw, kHeaderSize, deadline)) return false;
    std::string why = "bad magic, version or type";
    if (decodeHeader(raw, header) &&
        checkRequest(stage, *header, limits_, &why))
        return true;
    // Before HELLO anyone (a port scanner) may speak: keep that quiet.
    if (peer.empty())
        MPCOMM_LOG(kDebug) << "closing a connection before HELLO: " << why;
    else
        MPCOMM_LOG(kWarn) << "closing connection from '" << peer
                          << "': " << why;
    return false;
}

void Server::serveControl(Conn* conn, const std::string& peer) {
    const int fd = conn->fd;
    FrameHeader request;
    // Each query must arrive within an idle period of the previous reply.
    // While it waits for one the connection may be displaced at the cap; a
    // query that has arrived is answered.
    while (
        advance(conn, Role::kControlBusy, Role::kControlIdle) &&
        readRequest(fd, ConnStage::kControl, idleDeadline(), peer, &request) &&
        advance(conn, Role::kControlIdle, Role::kControlBusy)) {
        std::string list = encodeBufferList(memory_->publishedList());
        FrameHeader reply;
        reply.type = MsgType::kQueryResp;
        if (list.size() > kMaxQueryPayload) {
            reply.status = MPCOMM_ERR_PROTOCOL;
            list.clear();
        }
        if (!sendFrame(fd, reply, idleDeadline(), list.data(), list.size()))
            return;
    }
}

void Server::serveData(int fd, uint32_t rail, const std::string& peer) {
    // Where refused PUT payloads are drained to; allocated on first use, once
    // per connection, never per request or chunk.
    std::vector<char> drain;
    setSendBuffer(fd, send_buffer_bytes_);  // GET data leaves from here
    for (;;) {
        // A QP may idle between requests as long as its owner likes (the
        // wait ends with the peer or with shutdown()); a request, once
        // started, must arrive within the idle timeout.
        if (!waitReady(fd, POLLIN, Deadline::never())) return;
        FrameHeader request;
        if (!readRequest(fd, ConnStage::kData, idleDeadline(), peer, &request))
            return;
        bool keep = request.type == MsgType::kPutReq
                        ? handlePut(fd, rail, request, &drain)
                        : handleGet(fd, rail, request);
        if (!keep) return;
    }
}

bool Server::handlePut(int fd, uint32_t rail, const FrameHeader& request,
                       std::vector<char>* drain) {
    // checkRequest() bounded length by the slice size and made payload_len
    // equal to it. Key and range are checked before any byte is placed; the
    // payload then lands straight in the published buffer, each recv()
    // inside the Access, so a buffer withdrawn meanwhile is never written
    // again and the rest of the payload is drained instead.
    MemoryTable::Access access;
    int status = memory_->openAccess(request.addr, request.length, request.key,
                                     rail, &access);
    char* target = reinterpret_cast<char*>(request.addr);
    // Each kChunkSize of payload gets one idle period, so a trickling
    // sender loses the connection.
    Deadline deadline = idleDeadline();
    uint64_t renew_at = kChunkSize;
    for (uint64_t offset = 0; offset < request.length;) {
        size_t want = request.length - offset;
        ssize_t got;
        if (status == MPCOMM_SUCCESS && access.enter()) {
            got = recvPayloadOnce(fd, target + offset, want);
            int err = errno;
            access.leave();
            errno = err;
        } else {
            // Refused, or withdrawn part way: keep the stream in step.
            if (status == MPCOMM_SUCCESS) status = MPCOMM_ERR_REMOTE_ACCESS;
            if (drain->empty()) drain->resize(kDrainBytes);
            got = ::recv(fd, drain->data(), std::min(want, drain->size()),
                         MSG_DONTWAIT);
        }
        if (got > 0) {
            offset += static_cast<uint64_t>(got);
            if (offset >= renew_at) {
                renew_at = offset + kChunkSize;
                deadline = idleDeadline();
            }
            continue;
        }
        if (got == 0) return false;
        if (errno == EINTR) continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK) return false;
        if (!waitReady(fd, POLLIN, deadline)) return false;
    }
    return finishRequest(fd, request, "PUT", MsgType::kPutAck, status);
}

bool Server::sendGetData(int fd, const FrameHeader& data, const char* source,
                         const uint8_t* done, MemoryTable::Access* access,
                         int* status, bool* done_sent) {
    uint8_t head[kHeaderSize];
    encodeHeader(data, head);
    FrameParts parts;
    parts.head = head;
    parts.head_length = kHeaderSize;
    parts.payload = source;
    parts.payload_length = data.payload_len;
    parts.tail = done;
    parts.tail_length = done ? kHeaderSize : 0;
    const uint64_t frame_end = kHeaderSize + data.payload_len;
    *done_sent = false;
    // A reader that stops reading loses the connection after one idle
    // period instead of holding this thread in send() forever.
    Deadline deadline = idleDeadline();
    for (uint64_t sent = 0; sent < parts.total();) {
        ssize_t n;
        if (sent >= frame_end) {
            // Only the completion is left: nothing touches the buffer.
            n = sendPayloadOnce(fd, parts, sent);
        } else if (*status == MPCOMM_SUCCESS && access->enter()) {
            n = sendPayloadOnce(fd, parts, sent);
            int err = errno;
            access->leave();
            errno = err;
        } else {
            *status = MPCOMM_ERR_REMOTE_ACCESS;
            // Withdrawn before the frame started: it never goes out.
            if (sent == 0) return true;
            // Withdrawn part way: the header promised payload_len bytes, so
            // zeros fill the frame and keep the stream in step, and the
            // successful completion is dropped; the failed one the caller
            // sends next tells the initiator to ignore the zeros.
            parts.tail_length = 0;
            uint64_t at = sent < kHeaderSize ? 0 : sent - kHeaderSize;
            FrameParts pad;
            pad.head = head + std::min<uint64_t>(sent, kHeaderSize);
            pad.head_length = kHeaderSize - (pad.head - head);
            pad.payload = kZeros;
            pad.payload_length =
                std::min<uint64_t>(data.payload_len - at, sizeof(kZeros));
            n = sendPayloadOnce(fd, pad, 0);
        }
        if (n > 0) {
            sent += static_cast<uint64_t>(n);
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) return false;
        if (!waitReady(fd, POLLOUT, deadline)) return false;
    }
    *done_sent = parts.tail_length > 0;
    return true;
}

bool Server::handleGet(int fd, uint32_t rail, const FrameHeader& request) {
    MemoryTable::Access access;
    int status = memory_->openAccess(request.addr, request.length, request.key,
                                     rail, &access);
    const char* source = reinterpret_cast<const char*>(request.addr);
    FrameHeader done;
    done.type = MsgType::kGetDone;
    done.seq = request.seq;
    uint8_t done_raw[kHeaderSize];
    encodeHeader(done, done_raw);
    for (uint64_t offset = 0;
         status == MPCOMM_SUCCESS && offset < request.length;) {
        size_t chunk =
            std::min<uint64_t>(request.length - offset, kMaxGetDataSize);
        FrameHeader data;
        data.type = MsgType::kGetData;
        data.seq = request.seq;
        data.addr = offset;
        data.payload_len = chunk;
        const bool last = offset + chunk == request.length;
        bool done_sent = false;
        if (!sendGetData(fd, data, source + offset, last ? done_raw : nullptr,
                         &access, &status, &done_sent))
            return false;
        if (done_sent) return true;
        offset += chunk;
    }
    return finishRequest(fd, request, "GET", MsgType::kGetDone, status);
}

bool Server::finishRequest(int fd, const FrameHeader& request, const char* op,
                           MsgType reply, int status) {
    if (status != MPCOMM_SUCCESS)
        MPCOMM_LOG(kDebug) << "refused " << op << " of " << request.length
                           << " bytes at 0x" << std::hex << request.addr;
    FrameHeader done;
    done.type = reply;
    done.seq = request.seq;
    done.status = status;
    return sendFrame(fd, done, idleDeadline());
}

}  // namespace detail
}  // namespace mpcomm
