#include "socket_util.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>

namespace mpcomm {
namespace detail {

namespace {

std::string errnoText(int err) { return std::strerror(err); }

bool resolveIpv4(const std::string& host, int port, sockaddr_in* out,
                 std::string* error) {
    std::memset(out, 0, sizeof(*out));
    out->sin_family = AF_INET;
    out->sin_port = htons(static_cast<uint16_t>(port));
    if (inet_pton(AF_INET, host.c_str(), &out->sin_addr) == 1) return true;
    addrinfo hints{};
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    int rc = getaddrinfo(host.c_str(), nullptr, &hints, &found);
    if (rc != 0 || found == nullptr) {
        *error = "cannot resolve IPv4 address '" + host +
                 "': " + (rc != 0 ? gai_strerror(rc) : "no address");
        return false;
    }
    out->sin_addr = reinterpret_cast<sockaddr_in*>(found->ai_addr)->sin_addr;
    freeaddrinfo(found);
    return true;
}

}  // namespace

Deadline Deadline::in(int timeout_ms) {
    Deadline deadline;
    deadline.never_ = false;
    deadline.at_ = Clock::now() + std::chrono::milliseconds(timeout_ms);
    return deadline;
}

int Deadline::pollTimeoutMs() const {
    if (never_) return -1;
    auto left = std::chrono::ceil<std::chrono::milliseconds>(at_ - Clock::now())
                    .count();
    if (left <= 0) return 0;
    return left > INT_MAX ? INT_MAX : static_cast<int>(left);
}

int listenTcp(int port, std::string* error) {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        *error = "socket() failed: " + errnoText(errno);
        return -1;
    }
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_ANY);
    addr.sin_port = htons(static_cast<uint16_t>(port));
    if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
        *error = "cannot bind 0.0.0.0:" + std::to_string(port) + ": " +
                 errnoText(errno);
        ::close(fd);
        return -1;
    }
    if (::listen(fd, 128) != 0) {
        *error = "listen() on port " + std::to_string(port) +
                 " failed: " + errnoText(errno);
        ::close(fd);
        return -1;
    }
    return fd;
}

int connectTcp(const std::string& host, int port, int timeout_ms,
               std::string* error, SocketSet* set) {
    sockaddr_in addr{};
    if (!resolveIpv4(host, port, &addr, error)) return -1;
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        *error = "socket() failed: " + errnoText(errno);
        return -1;
    }
    std::string where = host + ":" + std::to_string(port);
    if (set != nullptr && !set->add(fd)) {
        *error = "connect to " + where + " abandoned: shutting down";
        ::close(fd);
        return -1;
    }
    auto fail = [&](const std::string& why) {
        *error = "connect to " + where + " " + why;
        if (set != nullptr) set->remove(fd);
        ::close(fd);
        return -1;
    };
    // Non-blocking connect + poll bounds the wait for an unreachable peer.
    int flags = ::fcntl(fd, F_GETFL, 0);
    ::fcntl(fd, F_SETFL, flags | O_NONBLOCK);
    int rc = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    if (rc != 0 && errno != EINPROGRESS)
        return fail("failed: " + errnoText(errno));
    if (rc != 0) {
        if (!waitReady(fd, POLLOUT, Deadline::in(timeout_ms)))
            return fail("timed out after " + std::to_string(timeout_ms) +
                        " ms");
        int so_error = 0;
        socklen_t len = sizeof(so_error);
        ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &so_error, &len);
        if (so_error != 0) return fail("failed: " + errnoText(so_error));
    }
    if (set != nullptr && set->cancelled())
        return fail("abandoned: shutting down");
    ::fcntl(fd, F_SETFL, flags);
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    return fd;
}

bool waitReady(int fd, short events, const Deadline& deadline) {
    for (;;) {
        pollfd pfd{fd, events, 0};
        int ready = ::poll(&pfd, 1, deadline.pollTimeoutMs());
        if (ready > 0) return true;  // errors and hang-ups surface in the I/O
        if (ready == 0) return false;
        if (errno != EINTR) return false;
    }
}

bool sendAll(int fd, const void* data, size_t length,
             const Deadline& deadline) {
    const char* cursor = static_cast<const char*>(data);
    while (length > 0) {
        ssize_t sent = ::send(fd, cursor, length, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (sent > 0) {
            cursor += sent;
            length -= static_cast<size_t>(sent);
            continue;
        }
        if (sent < 0 && errno == EINTR) continue;
        if (sent == 0 || (errno != EAGAIN && errno != EWOULDBLOCK))
            return false;
        if (!waitReady(fd, POLLOUT, deadline)) return false;
    }
    return true;
}

bool recvAll(int fd, void* data, size_t length, const Deadline& deadline) {
    char* cursor = static_cast<char*>(data);
    while (length > 0) {
        ssize_t got = ::recv(fd, cursor, length, MSG_DONTWAIT);
        if (got > 0) {
            cursor += got;
            length -= static_cast<size_t>(got);
            continue;
        }
        if (got == 0) return false;
        if (errno == EINTR) continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK) return false;
        if (!waitReady(fd, POLLIN, deadline)) return false;
    }
    return true;
}

void setSendBuffer(int fd, int bytes) {
    if (bytes <= 0) return;
    // A failure leaves the kernel's buffer, which only costs speed.
    ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof(bytes));
}

void shutdownSocket(int fd) {
    if (fd >= 0) ::shutdown(fd, SHUT_RDWR);
}

void closeSocket(int fd) {
    if (fd >= 0) ::close(fd);
}

bool SocketSet::add(int fd) {
    std::lock_guard<std::mutex> lock(mu_);
    if (cancelled_) return false;
    fds_.insert(fd);
    return true;
}

void SocketSet::remove(int fd) {
    std::lock_guard<std::mutex> lock(mu_);
    fds_.erase(fd);
}

void SocketSet::cancelAll() {
    // Under the lock: a member cannot be closed (its owner must remove it
    // first), so every number shut down here is still the member's.
    std::lock_guard<std::mutex> lock(mu_);
    cancelled_ = true;
    for (int fd : fds_) shutdownSocket(fd);
}

void SocketSet::reopen() {
    std::lock_guard<std::mutex> lock(mu_);
    cancelled_ = false;
}

bool SocketSet::cancelled() const {
    std::lock_guard<std::mutex> lock(mu_);
    return cancelled_;
}

int TrackedSocket::release() {
    if (set_ != nullptr && fd_ >= 0) set_->remove(fd_);
    int fd = fd_;
    fd_ = -1;
    return fd;
}

void TrackedSocket::close() { closeSocket(release()); }

}  // namespace detail
}  // namespace mpcomm
