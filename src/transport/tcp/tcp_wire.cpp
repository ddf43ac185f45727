#include "transport/tcp/tcp_wire.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <sstream>

namespace mooncake::tent::tcp_wire {

namespace {

void put32(unsigned char* p, uint32_t v) {
    for (int i = 3; i >= 0; --i, v >>= 8) p[i] = static_cast<unsigned char>(v);
}
void put64(unsigned char* p, uint64_t v) {
    for (int i = 7; i >= 0; --i, v >>= 8) p[i] = static_cast<unsigned char>(v);
}
uint32_t get32(const unsigned char* p) {
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v = (v << 8) | p[i];
    return v;
}
uint64_t get64(const unsigned char* p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v = (v << 8) | p[i];
    return v;
}

std::string hex(uint64_t v) {
    std::ostringstream os;
    os << "0x" << std::hex << v;
    return os.str();
}

// Waits until `fd` is ready for `events`; false with `why` on timeout or
// error. EINTR restarts the wait with the full budget, which only extends
// a bound that exists to catch dead peers.
Status waitFor(int fd, short events, int timeout_ms, const char* what) {
    struct pollfd pfd = {fd, events, 0};
    for (;;) {
        int rc = ::poll(&pfd, 1, timeout_ms);
        if (rc > 0) return Status::OK();
        if (rc == 0) {
            return Status::RpcServiceError(std::string(what) +
                                           " timed out after " +
                                           std::to_string(timeout_ms) + " ms");
        }
        if (errno != EINTR) {
            return Status::RpcServiceError(std::string(what) +
                                           " failed: " + std::strerror(errno));
        }
    }
}

}  // namespace

void encode(const RequestHeader& h, unsigned char* out) {
    put32(out, h.magic);
    put32(out + 4, h.op);
    put64(out + 8, h.addr);
    put64(out + 16, h.length);
}

void encode(const ReplyHeader& h, unsigned char* out) {
    put32(out, h.magic);
    put32(out + 4, h.code);
    put64(out + 8, h.length);
}

Status decode(const unsigned char* in, RequestHeader& h) {
    h.magic = get32(in);
    h.op = get32(in + 4);
    h.addr = get64(in + 8);
    h.length = get64(in + 16);
    if (h.magic != kRequestMagic) {
        return Status::InvalidEntry("bad request magic " + hex(h.magic));
    }
    if (h.op != kOpRead && h.op != kOpWrite) {
        return Status::InvalidEntry("bad request op " + std::to_string(h.op));
    }
    if (h.length > kMaxFramePayload) {
        return Status::InvalidEntry(
            "request length " + std::to_string(h.length) +
            " exceeds the frame cap " + std::to_string(kMaxFramePayload));
    }
    return Status::OK();
}

Status decode(const unsigned char* in, ReplyHeader& h) {
    h.magic = get32(in);
    h.code = get32(in + 4);
    h.length = get64(in + 8);
    if (h.magic != kReplyMagic) {
        return Status::InvalidEntry("bad reply magic " + hex(h.magic));
    }
    if (h.length > kMaxFramePayload) {
        return Status::InvalidEntry("reply length " + std::to_string(h.length) +
                                    " exceeds the frame cap " +
                                    std::to_string(kMaxFramePayload));
    }
    return Status::OK();
}

Status sendAll(int fd, const void* buf, size_t len, int timeout_ms) {
    const char* p = static_cast<const char*>(buf);
    while (len > 0) {
        CHECK_STATUS(waitFor(fd, POLLOUT, timeout_ms, "send"));
        ssize_t n = ::send(fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0) {
            if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)
                continue;
            return Status::RpcServiceError(std::string("send failed: ") +
                                           std::strerror(errno));
        }
        p += n;
        len -= static_cast<size_t>(n);
    }
    return Status::OK();
}

Status recvAll(int fd, void* buf, size_t len, int timeout_ms) {
    char* p = static_cast<char*>(buf);
    while (len > 0) {
        CHECK_STATUS(waitFor(fd, POLLIN, timeout_ms, "recv"));
        ssize_t n = ::recv(fd, p, len, MSG_DONTWAIT);
        if (n == 0) return Status::RpcServiceError("connection closed by peer");
        if (n < 0) {
            if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)
                continue;
            return Status::RpcServiceError(std::string("recv failed: ") +
                                           std::strerror(errno));
        }
        p += n;
        len -= static_cast<size_t>(n);
    }
    return Status::OK();
}

Status discard(int fd, size_t len, int timeout_ms) {
    char scratch[64 * 1024];
    while (len > 0) {
        size_t n = len < sizeof(scratch) ? len : sizeof(scratch);
        CHECK_STATUS(recvAll(fd, scratch, n, timeout_ms));
        len -= n;
    }
    return Status::OK();
}

Status connectTo(const std::string& endpoint, int timeout_ms, int& fd_out) {
    size_t colon = endpoint.rfind(':');
    if (colon == std::string::npos || colon == 0 ||
        colon + 1 == endpoint.size()) {
        return Status::InvalidArgument("bad tcp endpoint " + endpoint +
                                       " (expected host:port)");
    }
    std::string host = endpoint.substr(0, colon);
    std::string port = endpoint.substr(colon + 1);
    struct addrinfo hints;
    std::memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    struct addrinfo* res = nullptr;
    int rc = ::getaddrinfo(host.c_str(), port.c_str(), &hints, &res);
    if (rc != 0 || !res) {
        return Status::InvalidArgument("cannot resolve tcp endpoint " +
                                       endpoint + ": " + gai_strerror(rc));
    }
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
        ::freeaddrinfo(res);
        return Status::RpcServiceError(std::string("socket() failed: ") +
                                       std::strerror(errno));
    }
    rc = ::connect(fd, res->ai_addr, res->ai_addrlen);
    ::freeaddrinfo(res);
    if (rc < 0 && errno != EINPROGRESS) {
        int err = errno;
        ::close(fd);
        return Status::RpcServiceError("connect to " + endpoint +
                                       " failed: " + std::strerror(err));
    }
    if (rc < 0) {
        Status s = waitFor(fd, POLLOUT, timeout_ms, "connect");
        int err = 0;
        socklen_t err_len = sizeof(err);
        if (s.ok() &&
            ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &err_len) == 0 &&
            err != 0) {
            s = Status::RpcServiceError(std::string("connect failed: ") +
                                        std::strerror(err));
        }
        if (!s.ok()) {
            ::close(fd);
            return Status(s.code(), "connect to " + endpoint + ": " +
                                        std::string(s.message()));
        }
    }
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    fd_out = fd;
    return Status::OK();
}

Status listenAny(uint16_t port, int& fd_out, uint16_t& bound_port) {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return Status::RpcServiceError(std::string("socket() failed: ") +
                                       std::strerror(errno));
    }
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    struct sockaddr_in addr;
    std::memset(&addr, 0, sizeof(addr));
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_ANY);
    addr.sin_port = htons(port);
    if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) < 0 ||
        ::listen(fd, 128) < 0) {
        int err = errno;
        ::close(fd);
        return Status::RpcServiceError(
            "cannot listen on 0.0.0.0:" + std::to_string(port) + ": " +
            std::strerror(err));
    }
    socklen_t len = sizeof(addr);
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
    bound_port = ntohs(addr.sin_port);
    fd_out = fd;
    return Status::OK();
}

}  // namespace mooncake::tent::tcp_wire
