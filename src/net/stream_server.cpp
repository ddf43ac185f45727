#include "net/stream_server.h"

#include <fcntl.h>
#include <glog/logging.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <asio.hpp>
#include <cerrno>
#include <cstring>
#include <thread>
#include <vector>

#include "common/range_check.h"
#include "net/auth_handshake.h"

namespace mooncake::tent::net {

namespace {

// Whether a client's bytes wait unread on `fd`.
bool hasUnreadBytes(int fd) {
    int pending = 0;
    return ::ioctl(fd, FIONREAD, &pending) == 0 && pending > 0;
}

int64_t nowMs() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               Clock::now().time_since_epoch())
        .count();
}

Status readPositive(const Config& conf, const std::string& key, int max,
                    int& value) {
    int v = conf.get(key, value);
    CHECK_STATUS(checkInRange(key, v, 1, max));
    value = v;
    return Status::OK();
}

}  // namespace

Status readServerLimits(const Config& conf, const std::string& prefix,
                        ServerLimits& limits) {
    ServerLimits out = limits;
    out.key_prefix = prefix;
    CHECK_STATUS(readPositive(conf, prefix + "/idle_timeout_ms", INT32_MAX,
                              out.idle_timeout_ms));
    CHECK_STATUS(readPositive(conf, prefix + "/frame_timeout_ms", INT32_MAX,
                              out.frame_timeout_ms));
    CHECK_STATUS(readPositive(conf, prefix + "/max_connections", 65536,
                              out.max_connections));
    CHECK_STATUS(
        readPositive(conf, prefix + "/server_threads", 64, out.server_threads));
    out.linger_us = conf.get(prefix + "/linger_us", out.linger_us);
    CHECK_STATUS(
        checkInRange(prefix + "/linger_us", out.linger_us, 0, kMaxLingerUs));
    CHECK_STATUS(readPositive(conf, prefix + "/linger_turn_ms", 60000,
                              out.linger_turn_ms));
    limits = out;
    return Status::OK();
}

// One accepted connection. `watch` holds the socket in the io_context's
// set for one wait for readability at a time (awaitRequest); it never
// closes the socket, which closes with the last reference (a pending wait
// holds one).
struct StreamServer::Conn {
    Conn(asio::io_context& ctx, int fd) : watch(ctx) { c.fd = fd; }
    ~Conn() {
        // Cancels a pending wait (none is left by then) and leaves the
        // set if still in it, without closing the socket.
        watch.release();
        ::close(c.fd);
    }
    Connection c;
    asio::posix::stream_descriptor watch;
    std::atomic<int> state{kIdle};
    std::atomic<int64_t> idle_since_ms{0};
    // False until the token handshake passed (true at once without one).
    std::atomic<bool> admitted{false};
    // A pool thread runs its handshake (bounded by handshake_deadline): the
    // sweep leaves it to that bound.
    std::atomic<bool> in_handshake{false};
    Deadline handshake_deadline;
    // Under conns_mu_: its place in conns_, so that finish() takes it out
    // in constant time whatever the number of connections.
    bool in_list = false;
    std::list<ConnRef>::iterator listed;
};

// Declared in this order so that the watches and timers go before the
// io_context they belong to.
struct StreamServer::Loop {
    asio::io_context ctx;
    asio::executor_work_guard<asio::io_context::executor_type> work{
        ctx.get_executor()};
    asio::strand<asio::io_context::executor_type> accept_strand{
        ctx.get_executor()};
    asio::posix::stream_descriptor listener{ctx};
    asio::steady_timer backoff{ctx};
    asio::steady_timer sweep{ctx};
    std::vector<std::thread> threads;
};

StreamServer::StreamServer(std::string name, FrameHandler handler)
    : name_(std::move(name)), handler_(std::move(handler)) {}

StreamServer::~StreamServer() { stop(); }

Status StreamServer::start(int listen_fd, const ServerLimits& limits) {
    std::lock_guard<std::mutex> lock(lifecycle_mu_);
    if (running_) {
        ::close(listen_fd);
        return Status::InvalidArgument(name_ + " is already running");
    }
    // The pool must never block in accept(): a client that resets before
    // it is accepted would leave a readable listener with nothing to take.
    const int flags = ::fcntl(listen_fd, F_GETFL);
    if (flags < 0 || ::fcntl(listen_fd, F_SETFL, flags | O_NONBLOCK) != 0) {
        int err = errno;
        ::close(listen_fd);
        return Status::RpcServiceError(
            std::string("fcntl(O_NONBLOCK) on the listener failed: ") +
            std::strerror(err));
    }
    limits_ = limits;
    listen_fd_ = listen_fd;
    stopping_ = false;
    loop_ = std::make_unique<Loop>();
    asio::error_code ec;
    loop_->listener.assign(listen_fd, ec);
    if (ec) {
        loop_.reset();
        ::close(listen_fd);
        listen_fd_ = -1;
        return Status::RpcServiceError("cannot watch the listener: " +
                                       ec.message());
    }
    {
        std::lock_guard<std::mutex> conns_lock(conns_mu_);
        accepting_ = true;
    }
    running_ = true;
    asio::post(loop_->accept_strand, [this] { armAccept(); });
    asio::post(loop_->accept_strand, [this] { armSweep(); });
    for (int i = 0; i < limits_.server_threads; ++i) {
        loop_->threads.emplace_back([this] { loop_->ctx.run(); });
    }
    return Status::OK();
}

void StreamServer::stop() {
    std::lock_guard<std::mutex> lock(lifecycle_mu_);
    if (!running_) return;
    stopping_ = true;
    // The listener's wait and the timers belong to the accept strand.
    asio::post(loop_->accept_strand, [this] {
        asio::error_code ignored;
        loop_->listener.cancel(ignored);
        loop_->backoff.cancel();
        loop_->sweep.cancel();
    });
    {
        std::unique_lock<std::mutex> conns_lock(conns_mu_);
        // shutdown() ends every wait and blocked recv()/send() on a
        // connection at once; its socket stays open until its last
        // reference goes, so the number cannot be reused under it.
        for (auto& conn : conns_) ::shutdown(conn->c.fd, SHUT_RDWR);
        // Each connection leaves as its step sees the shut down socket; a
        // handler returns at once for the same reason. The bound only
        // guards against a handler that ignores its socket.
        conns_cv_.wait_for(conns_lock,
                           std::chrono::milliseconds(limits_.frame_timeout_ms) +
                               std::chrono::seconds(1),
                           [&] { return conns_.empty() && !accepting_; });
    }
    loop_->work.reset();
    loop_->ctx.stop();
    for (std::thread& t : loop_->threads) t.join();
    {
        std::lock_guard<std::mutex> conns_lock(conns_mu_);
        for (auto& conn : conns_) conn->in_list = false;
        conns_.clear();
        accepting_ = false;
    }
    loop_->listener.release();
    // Destroys what the stopped io_context still holds (connections whose
    // last step never ran), then the io_context.
    loop_.reset();
    ::close(listen_fd_);
    listen_fd_ = -1;
    running_ = false;
}

StreamServer::Stats StreamServer::stats() const {
    Stats s;
    s.accepted = accepted_.load();
    s.refused = refused_.load();
    s.evicted = evicted_.load();
    s.idle_closed = idle_closed_.load();
    s.accept_backoffs = accept_backoffs_.load();
    s.auth_refused = auth_refused_.load();
    s.lingered = lingered_.load();
    s.threads = running_ ? static_cast<size_t>(limits_.server_threads) : 0;
    std::lock_guard<std::mutex> lock(conns_mu_);
    for (const auto& conn : conns_) {
        int state = conn->state.load();
        if (state == kIdle || state == kBusy) ++s.open;
        if (state == kIdle) ++s.idle;
    }
    return s;
}

void StreamServer::armAccept() {
    if (stopping_) {
        std::lock_guard<std::mutex> lock(conns_mu_);
        accepting_ = false;
        conns_cv_.notify_all();
        return;
    }
    loop_->listener.async_wait(
        asio::posix::stream_descriptor::wait_read,
        asio::bind_executor(
            loop_->accept_strand,
            [this](const asio::error_code&) { acceptPending(); }));
}

void StreamServer::acceptPending() {
    // A bounded number per wake-up, so the strand never holds a pool
    // thread for a whole flood.
    for (int taken = 0; taken < 64 && !stopping_; ++taken) {
        {
            std::lock_guard<std::mutex> lock(conns_mu_);
            if (conns_.size() >=
                static_cast<size_t>(limits_.max_connections + kClosingSlack)) {
                // finish() re-arms the loop once one is gone.
                accept_paused_ = true;
                return;
            }
        }
        sockaddr_in addr{};
        socklen_t len = sizeof(addr);
        int fd = ::accept4(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len,
                           SOCK_CLOEXEC);
        if (fd < 0) {
            int err = errno;
            if (err == EINTR || err == ECONNABORTED) continue;
            if (err == EMFILE || err == ENFILE || err == ENOBUFS ||
                err == ENOMEM) {
                accept_backoffs_.fetch_add(1);
                LOG_EVERY_N(WARNING, 64)
                    << name_ << ": accept failed: " << std::strerror(err)
                    << "; backing off " << kAcceptBackoffMs << " ms ("
                    << google::COUNTER << " so far)";
                loop_->backoff.expires_after(
                    std::chrono::milliseconds(kAcceptBackoffMs));
                loop_->backoff.async_wait(asio::bind_executor(
                    loop_->accept_strand,
                    [this](const asio::error_code&) { armAccept(); }));
                return;
            }
            if (err != EAGAIN && err != EWOULDBLOCK) {
                LOG(WARNING)
                    << name_ << ": accept failed: " << std::strerror(err);
            }
            break;
        }
        setNoDelay(fd);
        setSendBuffer(fd, limits_.send_buffer_bytes);
        auto conn = std::make_shared<Conn>(loop_->ctx, fd);
        conn->c.peer = addressName(addr);
        conn->idle_since_ms = nowMs();
        conn->handshake_deadline = deadlineIn(limits_.frame_timeout_ms);
        conn->admitted = limits_.auth_token.empty();
        {
            std::lock_guard<std::mutex> lock(conns_mu_);
            // Refused here, `conn` closes its socket as it goes.
            if (stopping_ || !admit(conn->c.peer)) continue;
            accepted_.fetch_add(1);
            conn->listed = conns_.insert(conns_.end(), conn);
            conn->in_list = true;
        }
        asio::post(loop_->ctx, [this, conn] { turnIdle(conn); });
    }
    armAccept();
}

bool StreamServer::admit(const std::string& newcomer) {
    // Caller holds conns_mu_.
    size_t open = 0;
    for (auto& conn : conns_) {
        int state = conn->state.load();
        if (state == kIdle || state == kBusy) ++open;
    }
    if (open < static_cast<size_t>(limits_.max_connections)) return true;
    // The longest-idle connection with nothing unread. Bytes waiting mean
    // a request arrived that the connection's thread has not picked up
    // yet: closing it would drop a waiting client's request to admit one
    // that has asked nothing. Only at the cap, and at most one ioctl per
    // better candidate.
    Conn* oldest = nullptr;
    for (auto& conn : conns_) {
        if (conn->state.load() != kIdle) continue;
        if (oldest && conn->idle_since_ms >= oldest->idle_since_ms) continue;
        if (hasUnreadBytes(conn->c.fd)) continue;
        oldest = conn.get();
    }
    int expected = kIdle;
    // The CAS loses against the connection's own thread when a request
    // arrives on it right now; it is then busy and not evicted.
    if (oldest && oldest->state.compare_exchange_strong(expected, kClosing)) {
        ::shutdown(oldest->c.fd, SHUT_RDWR);
        evicted_.fetch_add(1);
        LOG_EVERY_N(WARNING, 64)
            << name_ << ": " << open << " connections open ("
            << limits_.key_prefix
            << "/max_connections=" << limits_.max_connections
            << "); closed the longest-idle one, from " << oldest->c.peer
            << ", to admit " << newcomer << " (" << google::COUNTER
            << " so far)";
        return true;
    }
    refused_.fetch_add(1);
    LOG_EVERY_N(WARNING, 64)
        << name_ << ": refusing " << newcomer << ": " << open
        << " connections open (" << limits_.key_prefix
        << "/max_connections=" << limits_.max_connections
        << ") and none is idle (" << google::COUNTER << " so far)";
    return false;
}

void StreamServer::turnIdle(const ConnRef& conn) {
    if (stopping_ || conn->state.load() != kIdle) {
        finish(conn);
        return;
    }
    if (idle_hook_ && conn->admitted) idle_hook_(conn->c);
    awaitRequest(conn);
}

void StreamServer::awaitRequest(const ConnRef& conn) {
    // The socket is in the event loop's set only while it waits here: a
    // socket left there while a thread serves it or lingers on it would
    // wake the loop for each request and segment that thread reads
    // itself.
    asio::error_code ec;
    conn->watch.assign(conn->c.fd, ec);
    if (ec) {
        LOG(WARNING) << name_ << ": cannot watch the connection from "
                     << conn->c.peer << ": " << ec.message();
        finish(conn);
        return;
    }
    conn->watch.async_wait(asio::posix::stream_descriptor::wait_read,
                           [this, conn](const asio::error_code&) {
                               conn->watch.release();
                               onReadable(conn);
                           });
}

void StreamServer::onReadable(const ConnRef& conn) {
    if (stopping_ || conn->state.load() != kIdle) {
        finish(conn);
        return;
    }
    // Readable with nothing to read means the peer closed: an orderly end
    // between requests, not an error.
    char byte;
    ssize_t n = ::recv(conn->c.fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) {
        awaitRequest(conn);  // woken with nothing there yet
        return;
    }
    if (n <= 0) {
        finish(conn);
        return;
    }
    if (!conn->admitted) {
        // Still idle while in the handshake: the first to go at
        // max_connections.
        conn->in_handshake = true;
        const bool passed = authenticate(*conn);
        conn->in_handshake = false;
        if (!passed) {
            finish(conn);
            return;
        }
        conn->idle_since_ms = nowMs();
        conn->admitted = true;
        turnIdle(conn);
        return;
    }
    // The thread keeps a busy connection across requests (lingerForNext)
    // for at most linger_turn_ms, then hands it back to the event loop so
    // that a connection with steady traffic cannot hold a thread from the
    // others indefinitely.
    const Deadline turn_end = deadlineIn(limits_.linger_turn_ms);
    do {
        int expected = kIdle;
        if (!conn->state.compare_exchange_strong(expected, kBusy)) {
            finish(conn);
            return;
        }
        bool keep = handler_(conn->c, deadlineIn(limits_.frame_timeout_ms));
        conn->idle_since_ms = nowMs();
        expected = kBusy;
        if (!keep || !conn->state.compare_exchange_strong(expected, kIdle)) {
            finish(conn);
            return;
        }
    } while (lingerForNext(*conn, turn_end));
    turnIdle(conn);
}

bool StreamServer::lingerForNext(Conn& conn, Deadline turn_end) {
    if (limits_.linger_us <= 0 || stopping_) return false;
    const auto left = turn_end - Clock::now();
    if (left <= Clock::duration::zero()) return false;
    const auto wait = std::min<Clock::duration>(
        left, std::chrono::microseconds(limits_.linger_us));
    const auto ns =
        std::chrono::duration_cast<std::chrono::nanoseconds>(wait).count();
    timespec ts{static_cast<time_t>(ns / 1000000000),
                static_cast<long>(ns % 1000000000)};
    // POLLRDHUP tells the client's close (or an error) from a request
    // without a recv(MSG_PEEK) per request; on any such sign the
    // connection goes back to the event loop, which serves what is left
    // unread and then finishes it.
    pollfd pfd{conn.c.fd, POLLIN | POLLRDHUP, 0};
    if (::ppoll(&pfd, 1, &ts, nullptr) <= 0 || stopping_) return false;
    if (pfd.revents != POLLIN) return false;
    lingered_.fetch_add(1, std::memory_order_relaxed);
    return true;
}

void StreamServer::finish(const ConnRef& conn) {
    ::shutdown(conn->c.fd, SHUT_RDWR);
    conn->state = kDone;
    std::lock_guard<std::mutex> lock(conns_mu_);
    if (conn->in_list) {
        conn->in_list = false;
        conns_.erase(conn->listed);
    }
    if (conns_.empty()) conns_cv_.notify_all();
    if (accept_paused_) {
        accept_paused_ = false;
        asio::post(loop_->accept_strand, [this] { armAccept(); });
    }
}

void StreamServer::armSweep() {
    if (stopping_) return;
    const int shorter =
        std::min(limits_.idle_timeout_ms, limits_.frame_timeout_ms);
    loop_->sweep.expires_after(
        std::chrono::milliseconds(std::clamp(shorter / 4, 1, 1000)));
    loop_->sweep.async_wait(asio::bind_executor(
        loop_->accept_strand, [this](const asio::error_code& ec) {
            if (ec || stopping_) return;
            sweep();
            armSweep();
        }));
}

void StreamServer::sweep() {
    const int64_t now = nowMs();
    const auto handshake_now = Clock::now();
    std::lock_guard<std::mutex> lock(conns_mu_);
    for (auto& conn : conns_) {
        if (conn->state.load() != kIdle || conn->in_handshake) continue;
        const bool admitted = conn->admitted.load();
        if (admitted
                ? now - conn->idle_since_ms.load() < limits_.idle_timeout_ms
                : handshake_now < conn->handshake_deadline) {
            continue;
        }
        // Its request (or hello) has arrived and waits for a pool thread:
        // its client is not idle.
        if (hasUnreadBytes(conn->c.fd)) continue;
        int expected = kIdle;
        if (!conn->state.compare_exchange_strong(expected, kClosing)) continue;
        if (admitted) {
            idle_closed_.fetch_add(1);
            LOG(INFO) << name_ << ": closing the connection from "
                      << conn->c.peer << ": idle for "
                      << limits_.idle_timeout_ms << " ms ("
                      << limits_.key_prefix << "/idle_timeout_ms)";
        } else {
            // Logged before it is counted: a test that waits for the count
            // finds the line.
            LOG(WARNING) << name_ << ": refused the connection from "
                         << conn->c.peer
                         << ": auth hello: recv timed out after 0 of "
                         << kAuthMagicBytes << " bytes (cluster token "
                         << kAuthTokenKey << "; handshake bounded by "
                         << limits_.key_prefix
                         << "/frame_timeout_ms=" << limits_.frame_timeout_ms
                         << " ms)";
            auth_refused_.fetch_add(1);
        }
        // Its pending wait wakes on the shut down socket and finishes it.
        ::shutdown(conn->c.fd, SHUT_RDWR);
    }
}

bool StreamServer::authenticate(Conn& conn) {
    Status s =
        serverHandshake(conn.c.fd, limits_.auth_token, conn.handshake_deadline);
    if (s.ok()) return true;
    // Shut down on purpose (stop(), or evicted at max_connections): not
    // the client's failure.
    if (stopping_ || conn.state.load() == kClosing) return false;
    // Logged before it is counted: a test that waits for the count finds
    // the line.
    LOG(WARNING) << name_ << ": refused the connection from " << conn.c.peer
                 << ": " << s.message() << " (cluster token " << kAuthTokenKey
                 << "; handshake bounded by " << limits_.key_prefix
                 << "/frame_timeout_ms=" << limits_.frame_timeout_ms << " ms)";
    auth_refused_.fetch_add(1);
    return false;
}

}  // namespace mooncake::tent::net
