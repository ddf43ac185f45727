#include "rpc/rpc_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <glog/logging.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "rpc/rpc_frame.h"

namespace mooncake::tent {

namespace {

std::string peerName(const sockaddr_in& addr) {
    char host[INET_ADDRSTRLEN] = {0};
    inet_ntop(AF_INET, &addr.sin_addr, host, sizeof(host));
    return std::string(host) + ":" + std::to_string(ntohs(addr.sin_port));
}

// Best effort: the connection is being refused anyway, so a failed write
// only means the peer never learns why.
void sendError(int fd, const std::string& message, int timeout_ms) {
    writeFrame(fd, encodeJson(makeErrorReply(message)), timeout_ms);
}

}  // namespace

RpcServer::RpcServer(uint32_t max_frame_size, int io_timeout_ms)
    : max_frame_size_(max_frame_size), io_timeout_ms_(io_timeout_ms) {}

RpcServer::~RpcServer() { stop(); }

void RpcServer::registerHandler(const std::string& op, Handler handler) {
    std::lock_guard<std::mutex> lock(handlers_mu_);
    handlers_[op] = std::move(handler);
}

Status RpcServer::bindPort(uint16_t port, int& fd_out, int& err_out) {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        err_out = errno;
        return Status::RpcServiceError(std::string("socket() failed: ") +
                                       std::strerror(errno));
    }
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_ANY);
    addr.sin_port = htons(port);
    if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
        ::listen(fd, 128) != 0) {
        int err = errno;
        ::close(fd);
        err_out = err;
        return Status::RpcServiceError("cannot listen on port " +
                                       std::to_string(port) + ": " +
                                       std::strerror(err));
    }
    fd_out = fd;
    return Status::OK();
}

Status RpcServer::start(uint16_t port, uint16_t range_begin,
                        uint16_t range_end) {
    std::lock_guard<std::mutex> lock(lifecycle_mu_);
    if (running_) {
        return Status::InvalidArgument("RPC server already running on port " +
                                       std::to_string(port_.load()));
    }
    int fd = -1;
    int err = 0;
    uint16_t bound = 0;
    if (port != 0) {
        CHECK_STATUS(bindPort(port, fd, err));
        bound = port;
    } else {
        for (uint32_t p = range_begin; p <= range_end; ++p) {
            Status s = bindPort(static_cast<uint16_t>(p), fd, err);
            if (s.ok()) {
                bound = static_cast<uint16_t>(p);
                break;
            }
            // Only a taken port is worth skipping; anything else would fail
            // the same way on every port.
            if (err != EADDRINUSE) return s;
        }
        if (fd < 0) {
            return Status::RpcServiceError("no free port in " +
                                           std::to_string(range_begin) + ".." +
                                           std::to_string(range_end));
        }
    }
    if (::pipe2(wake_pipe_, O_CLOEXEC | O_NONBLOCK) != 0) {
        int err = errno;
        ::close(fd);
        return Status::RpcServiceError(std::string("pipe2() failed: ") +
                                       std::strerror(err));
    }
    listen_fd_ = fd;
    port_ = bound;
    stopping_ = false;
    running_ = true;
    accept_thread_ = std::thread([this] { acceptLoop(); });
    return Status::OK();
}

void RpcServer::stop() {
    std::lock_guard<std::mutex> lock(lifecycle_mu_);
    if (!running_) return;
    stopping_ = true;
    char byte = 1;
    // The pipe wakes the accept loop's poll(); the loop then exits.
    (void)!::write(wake_pipe_[1], &byte, 1);
    if (accept_thread_.joinable()) accept_thread_.join();
    {
        std::lock_guard<std::mutex> conns_lock(conns_mu_);
        // shutdown() makes every blocked poll()/recv() on the connection
        // return at once; the fds stay open until their threads are joined.
        for (auto& conn : conns_) ::shutdown(conn->fd, SHUT_RDWR);
    }
    reapFinished(true);
    ::close(listen_fd_);
    ::close(wake_pipe_[0]);
    ::close(wake_pipe_[1]);
    listen_fd_ = -1;
    wake_pipe_[0] = wake_pipe_[1] = -1;
    running_ = false;
}

void RpcServer::reapFinished(bool all) {
    std::list<std::unique_ptr<Connection>> finished;
    {
        std::lock_guard<std::mutex> lock(conns_mu_);
        for (auto it = conns_.begin(); it != conns_.end();) {
            if (all || (*it)->done.load()) {
                finished.push_back(std::move(*it));
                it = conns_.erase(it);
            } else {
                ++it;
            }
        }
    }
    for (auto& conn : finished) {
        if (conn->thread.joinable()) conn->thread.join();
        ::close(conn->fd);
    }
}

void RpcServer::acceptLoop() {
    // Finished connections are joined on the next wake-up; the bound keeps
    // their fds from lingering long when no new peer arrives.
    constexpr int kReapIntervalMs = 1000;
    while (!stopping_) {
        pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_pipe_[0], POLLIN, 0}};
        int rc = ::poll(fds, 2, kReapIntervalMs);
        reapFinished(false);
        if (stopping_) break;
        if (rc < 0) {
            if (errno == EINTR) continue;
            PLOG(ERROR) << "RpcServer: poll on port " << port_ << " failed";
            break;
        }
        if (rc == 0 || !(fds[0].revents & POLLIN)) continue;
        sockaddr_in addr{};
        socklen_t len = sizeof(addr);
        int fd = ::accept4(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len,
                           SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno != EINTR && errno != EAGAIN && errno != ECONNABORTED) {
                PLOG(WARNING)
                    << "RpcServer: accept on port " << port_ << " failed";
            }
            continue;
        }
        int one = 1;
        ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        auto conn = std::make_unique<Connection>();
        conn->fd = fd;
        conn->peer = peerName(addr);
        std::lock_guard<std::mutex> lock(conns_mu_);
        if (conns_.size() >= kMaxConnections) {
            LOG(WARNING) << "RpcServer: refusing connection from " << conn->peer
                         << ": " << kMaxConnections
                         << " connections already open";
            ::close(fd);
            continue;
        }
        Connection* raw = conn.get();
        conns_.push_back(std::move(conn));
        raw->thread = std::thread([this, raw] { serveConnection(raw); });
    }
}

void RpcServer::serveConnection(Connection* conn) {
    while (!stopping_) {
        std::string payload;
        Status s =
            readFrame(conn->fd, payload, io_timeout_ms_, max_frame_size_);
        if (s.ok() && payload.empty()) break;  // orderly close
        if (s.ok()) {
            if (!handlePayload(conn, payload)) break;
            continue;
        }
        if (stopping_) break;
        LOG(WARNING) << "RpcServer: bad request from " << conn->peer << ": "
                     << s.message() << "; closing the connection";
        // A bad length prefix leaves the connection writable, so the peer
        // can be told why; after a truncated frame or timeout nobody reads.
        if (s.IsInvalidArgument()) {
            sendError(conn->fd, std::string(s.message()), io_timeout_ms_);
        }
        break;
    }
    ::shutdown(conn->fd, SHUT_RDWR);
    conn->done = true;
}

bool RpcServer::handlePayload(Connection* conn, const std::string& payload) {
    Json::Value request;
    Status s = decodeJsonObject(payload, request);
    std::string op;
    if (s.ok()) {
        if (!request.isMember("op") || !request["op"].isString()) {
            s = Status::InvalidArgument("request has no string \"op\"");
        } else {
            op = request["op"].asString();
        }
    }
    Handler handler;
    if (s.ok()) {
        std::lock_guard<std::mutex> lock(handlers_mu_);
        auto it = handlers_.find(op);
        if (it == handlers_.end()) {
            s = Status::InvalidArgument("unknown op \"" + op + "\"");
        } else {
            handler = it->second;
        }
    }
    if (!s.ok()) {
        LOG(WARNING) << "RpcServer: bad request from " << conn->peer << ": "
                     << s.message() << "; closing the connection";
        sendError(conn->fd, std::string(s.message()), io_timeout_ms_);
        return false;
    }
    Json::Value reply(Json::objectValue);
    s = handler(request, reply);
    if (!s.ok())
        reply = makeErrorReply(s.ToString());
    else
        reply["status"] = "ok";
    Status w = writeFrame(conn->fd, encodeJson(reply), io_timeout_ms_);
    if (!w.ok()) {
        LOG(WARNING) << "RpcServer: cannot reply to " << conn->peer << ": "
                     << w.message();
        return false;
    }
    return true;
}

}  // namespace mooncake::tent
