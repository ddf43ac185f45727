#include "socket_util.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
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
               std::string* error) {
    sockaddr_in addr{};
    if (!resolveIpv4(host, port, &addr, error)) return -1;
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        *error = "socket() failed: " + errnoText(errno);
        return -1;
    }
    // Non-blocking connect + poll bounds the wait for an unreachable peer.
    int flags = ::fcntl(fd, F_GETFL, 0);
    ::fcntl(fd, F_SETFL, flags | O_NONBLOCK);
    std::string where = host + ":" + std::to_string(port);
    int rc = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    if (rc != 0 && errno != EINPROGRESS) {
        *error = "connect to " + where + " failed: " + errnoText(errno);
        ::close(fd);
        return -1;
    }
    if (rc != 0) {
        pollfd pfd{fd, POLLOUT, 0};
        int ready;
        do {
            ready = ::poll(&pfd, 1, timeout_ms);
        } while (ready < 0 && errno == EINTR);
        if (ready <= 0) {
            *error = "connect to " + where + " timed out after " +
                     std::to_string(timeout_ms) + " ms";
            ::close(fd);
            return -1;
        }
        int so_error = 0;
        socklen_t len = sizeof(so_error);
        ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &so_error, &len);
        if (so_error != 0) {
            *error = "connect to " + where + " failed: " + errnoText(so_error);
            ::close(fd);
            return -1;
        }
    }
    ::fcntl(fd, F_SETFL, flags);
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    return fd;
}

void setIoTimeout(int fd, int timeout_ms) {
    timeval tv{};
    tv.tv_sec = timeout_ms / 1000;
    tv.tv_usec = (timeout_ms % 1000) * 1000;
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

bool sendAll(int fd, const void* data, size_t length) {
    const char* cursor = static_cast<const char*>(data);
    while (length > 0) {
        ssize_t sent = ::send(fd, cursor, length, MSG_NOSIGNAL);
        if (sent < 0 && errno == EINTR) continue;
        if (sent <= 0) return false;
        cursor += sent;
        length -= static_cast<size_t>(sent);
    }
    return true;
}

bool recvAll(int fd, void* data, size_t length) {
    char* cursor = static_cast<char*>(data);
    while (length > 0) {
        ssize_t got = ::recv(fd, cursor, length, 0);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) return false;
        cursor += got;
        length -= static_cast<size_t>(got);
    }
    return true;
}

void shutdownSocket(int fd) {
    if (fd >= 0) ::shutdown(fd, SHUT_RDWR);
}

void closeSocket(int fd) {
    if (fd >= 0) ::close(fd);
}

}  // namespace detail
}  // namespace mpcomm
