#include "net/stream_server.h"

#include <fcntl.h>
#include <glog/logging.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

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
    limits = out;
    return Status::OK();
}

StreamServer::StreamServer(std::string name, FrameHandler handler)
    : name_(std::move(name)), handler_(std::move(handler)) {}

StreamServer::~StreamServer() { stop(); }

Status StreamServer::start(int listen_fd, const ServerLimits& limits) {
    std::lock_guard<std::mutex> lock(lifecycle_mu_);
    if (running_) {
        ::close(listen_fd);
        return Status::InvalidArgument(name_ + " is already running");
    }
    if (::pipe2(wake_pipe_, O_CLOEXEC | O_NONBLOCK) != 0) {
        int err = errno;
        ::close(listen_fd);
        return Status::RpcServiceError(std::string("pipe2() failed: ") +
                                       std::strerror(err));
    }
    limits_ = limits;
    listen_fd_ = listen_fd;
    stopping_ = false;
    running_ = true;
    accept_thread_ = std::thread([this] { acceptLoop(); });
    return Status::OK();
}

void StreamServer::stop() {
    std::lock_guard<std::mutex> lock(lifecycle_mu_);
    if (!running_) return;
    stopping_ = true;
    wake();
    if (accept_thread_.joinable()) accept_thread_.join();
    {
        std::lock_guard<std::mutex> conns_lock(conns_mu_);
        // shutdown() makes every blocked poll()/recv()/send() on the
        // connection return at once; the fds stay open until their threads
        // are joined, so the numbers cannot be reused under them.
        for (auto& conn : conns_) ::shutdown(conn->c.fd, SHUT_RDWR);
    }
    reap(true);
    ::close(listen_fd_);
    ::close(wake_pipe_[0]);
    ::close(wake_pipe_[1]);
    listen_fd_ = -1;
    wake_pipe_[0] = wake_pipe_[1] = -1;
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
    std::lock_guard<std::mutex> lock(conns_mu_);
    for (const auto& conn : conns_) {
        int state = conn->state.load();
        if (state == kIdle || state == kBusy) ++s.open;
        if (state == kIdle) ++s.idle;
    }
    return s;
}

void StreamServer::wake() {
    char byte = 1;
    // A full pipe already guarantees a wake-up, so EAGAIN is fine.
    (void)!::write(wake_pipe_[1], &byte, 1);
}

void StreamServer::backOff() {
    accept_backoffs_.fetch_add(1);
    pollfd pfd{wake_pipe_[0], POLLIN, 0};
    ::poll(&pfd, 1, kAcceptBackoffMs);
}

void StreamServer::reap(bool all) {
    std::list<std::unique_ptr<Conn>> finished;
    {
        std::lock_guard<std::mutex> lock(conns_mu_);
        for (auto it = conns_.begin(); it != conns_.end();) {
            if (all || (*it)->state.load() == kDone) {
                finished.push_back(std::move(*it));
                it = conns_.erase(it);
            } else {
                ++it;
            }
        }
    }
    for (auto& conn : finished) {
        if (conn->thread.joinable()) conn->thread.join();
        ::close(conn->c.fd);
    }
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

void StreamServer::acceptLoop() {
    while (!stopping_) {
        pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_pipe_[0], POLLIN, 0}};
        // The timeout only bounds how long a finished connection may wait
        // to be joined should its wake-up byte be lost to a full pipe.
        int rc = ::poll(fds, 2, 1000);
        if (fds[1].revents & POLLIN) {
            char drain[64];
            while (::read(wake_pipe_[0], drain, sizeof(drain)) > 0) {
            }
        }
        reap(false);
        if (stopping_) break;
        if (rc < 0) {
            if (errno == EINTR) continue;
            PLOG(ERROR) << name_ << ": poll on the listener failed";
            break;
        }
        if (!(fds[0].revents & POLLIN)) continue;
        sockaddr_in addr{};
        socklen_t len = sizeof(addr);
        int fd = ::accept4(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len,
                           SOCK_CLOEXEC);
        if (fd < 0) {
            int err = errno;
            if (err == EMFILE || err == ENFILE || err == ENOBUFS ||
                err == ENOMEM) {
                LOG_EVERY_N(WARNING, 64)
                    << name_ << ": accept failed: " << std::strerror(err)
                    << "; backing off " << kAcceptBackoffMs << " ms ("
                    << google::COUNTER << " so far)";
                backOff();
            } else if (err != EINTR && err != EAGAIN && err != ECONNABORTED) {
                LOG(WARNING)
                    << name_ << ": accept failed: " << std::strerror(err);
            }
            continue;
        }
        setNoDelay(fd);
        setSendBuffer(fd, limits_.send_buffer_bytes);
        auto conn = std::make_unique<Conn>();
        conn->c.fd = fd;
        conn->c.peer = addressName(addr);
        conn->idle_since_ms = nowMs();
        std::lock_guard<std::mutex> lock(conns_mu_);
        if (!admit(conn->c.peer)) {
            ::close(fd);
            continue;
        }
        accepted_.fetch_add(1);
        Conn* raw = conn.get();
        conns_.push_back(std::move(conn));
        raw->thread = std::thread([this, raw] { serve(raw); });
    }
}

bool StreamServer::authenticate(Conn* conn) {
    Status s = serverHandshake(conn->c.fd, limits_.auth_token,
                               deadlineIn(limits_.frame_timeout_ms));
    if (s.ok()) return true;
    // Shut down on purpose (stop(), or evicted at max_connections): not
    // the client's failure.
    if (stopping_ || conn->state.load() == kClosing) return false;
    // Logged before it is counted: a test that waits for the count finds
    // the line.
    LOG(WARNING) << name_ << ": refused the connection from " << conn->c.peer
                 << ": " << s.message() << " (cluster token " << kAuthTokenKey
                 << "; handshake bounded by " << limits_.key_prefix
                 << "/frame_timeout_ms=" << limits_.frame_timeout_ms << " ms)";
    auth_refused_.fetch_add(1);
    return false;
}

void StreamServer::serve(Conn* conn) {
    const int fd = conn->c.fd;
    const bool admitted = limits_.auth_token.empty() || authenticate(conn);
    conn->idle_since_ms = nowMs();
    while (admitted && !stopping_) {
        if (idle_hook_) idle_hook_(conn->c);
        Deadline idle_deadline = deadlineIn(limits_.idle_timeout_ms);
        Status s = waitReady(fd, POLLIN, idle_deadline, "idle wait");
        if (stopping_ || conn->state.load() == kClosing) break;
        if (!s.ok()) {
            if (Clock::now() >= idle_deadline) {
                idle_closed_.fetch_add(1);
                LOG(INFO) << name_ << ": closing the connection from "
                          << conn->c.peer << ": idle for "
                          << limits_.idle_timeout_ms << " ms ("
                          << limits_.key_prefix << "/idle_timeout_ms)";
            }
            break;
        }
        // Readable with nothing to read means the peer closed: an orderly
        // end between requests, not an error.
        char byte;
        ssize_t n = ::recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
        if (n == 0) break;
        if (n < 0) {
            if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)
                continue;
            break;
        }
        int expected = kIdle;
        if (!conn->state.compare_exchange_strong(expected, kBusy)) break;
        bool keep = handler_(conn->c, deadlineIn(limits_.frame_timeout_ms));
        conn->idle_since_ms = nowMs();
        expected = kBusy;
        if (!keep || !conn->state.compare_exchange_strong(expected, kIdle)) {
            break;
        }
    }
    ::shutdown(fd, SHUT_RDWR);
    conn->state = kDone;
    wake();
}

}  // namespace mooncake::tent::net
