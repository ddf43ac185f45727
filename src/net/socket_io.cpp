#include "net/socket_io.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#if defined(__SANITIZE_THREAD__)
#define TENT_UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TENT_UNDER_TSAN 1
#endif
#endif

#ifdef TENT_UNDER_TSAN
// ThreadSanitizer's dynamic annotations (exported by its runtime).
extern "C" void AnnotateIgnoreReadsBegin(const char* file, int line);
extern "C" void AnnotateIgnoreReadsEnd(const char* file, int line);
extern "C" void AnnotateIgnoreWritesBegin(const char* file, int line);
extern "C" void AnnotateIgnoreWritesEnd(const char* file, int line);
#endif

namespace mooncake::tent::net {

namespace {

// See recvPayload(): the copy's accesses are ordered by the initiator.
class CrossProcessOrderedCopy {
 public:
    CrossProcessOrderedCopy() {
#ifdef TENT_UNDER_TSAN
        AnnotateIgnoreReadsBegin(__FILE__, __LINE__);
        AnnotateIgnoreWritesBegin(__FILE__, __LINE__);
#endif
    }
    ~CrossProcessOrderedCopy() {
#ifdef TENT_UNDER_TSAN
        AnnotateIgnoreWritesEnd(__FILE__, __LINE__);
        AnnotateIgnoreReadsEnd(__FILE__, __LINE__);
#endif
    }
};

Status failed(const char* what, int err) {
    return Status::RpcServiceError(std::string(what) +
                                   " failed: " + std::strerror(err));
}

bool transient(int err) {
    return err == EINTR || err == EAGAIN || err == EWOULDBLOCK;
}

}  // namespace

int remainingMs(Deadline deadline) {
    // Rounded up: poll() given the truncated value would return up to a
    // millisecond before the deadline, and a caller checking "did my
    // deadline fire?" would see it had not.
    auto left =
        std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now())
            .count();
    if (left <= 0) return 0;
    return left > INT32_MAX ? INT32_MAX : static_cast<int>(left);
}

Status waitReady(int fd, short events, Deadline deadline, const char* what) {
    for (;;) {
        // Recomputed on every pass, so EINTR cannot extend the bound.
        int left = remainingMs(deadline);
        if (left == 0) {
            return Status::RpcServiceError(std::string(what) + " timed out");
        }
        pollfd pfd{fd, events, 0};
        int rc = ::poll(&pfd, 1, left);
        if (rc > 0) return Status::OK();
        if (rc < 0 && errno != EINTR) return failed("poll", errno);
    }
}

Status sendAll(int fd, const void* buf, size_t len, Deadline deadline) {
    const char* p = static_cast<const char*>(buf);
    // The first attempt does not wait, so it is made whatever the deadline:
    // the deadline bounds waiting, and a reply that fits the socket buffer
    // leaves even when a stall (a scheduler, a slow log) spent the budget.
    for (bool first = true; len > 0; first = false) {
        if (!first) CHECK_STATUS(waitReady(fd, POLLOUT, deadline, "send"));
        ssize_t n = ::send(fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0) {
            if (transient(errno)) continue;
            return failed("send", errno);
        }
        p += n;
        len -= static_cast<size_t>(n);
    }
    return Status::OK();
}

Status sendAll(int fd, const void* head, size_t head_len, const void* buf,
               size_t len, Deadline deadline) {
    iovec iov[2] = {{const_cast<void*>(head), head_len},
                    {const_cast<void*>(buf), len}};
    iovec* next = iov;
    int count = 2;
    // As in sendAll(): the first attempt does not wait.
    for (bool first = true; count > 0; first = false) {
        if (!first) CHECK_STATUS(waitReady(fd, POLLOUT, deadline, "send"));
        msghdr msg{};
        msg.msg_iov = next;
        msg.msg_iovlen = static_cast<size_t>(count);
        ssize_t n = ::sendmsg(fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0) {
            if (transient(errno)) continue;
            return failed("send", errno);
        }
        // Drops what left (empty buffers included) and trims the first
        // one partly sent.
        size_t sent = static_cast<size_t>(n);
        while (count > 0 && sent >= next->iov_len) {
            sent -= next->iov_len;
            ++next;
            --count;
        }
        if (count > 0) {
            next->iov_base = static_cast<char*>(next->iov_base) + sent;
            next->iov_len -= sent;
        }
    }
    return Status::OK();
}

Status recvAll(int fd, void* buf, size_t len, Deadline deadline, size_t* got,
               bool* closed) {
    char* p = static_cast<char*>(buf);
    size_t done = 0;
    if (got) *got = 0;
    if (closed) *closed = false;
    // As in sendAll(): bytes already received are taken without waiting;
    // every later pass waits, and so meets the deadline, however the peer
    // paces its bytes.
    for (bool first = true; done < len; first = false) {
        if (!first) CHECK_STATUS(waitReady(fd, POLLIN, deadline, "recv"));
        ssize_t n = ::recv(fd, p + done, len - done, MSG_DONTWAIT);
        if (n == 0) {
            if (closed) *closed = true;
            return Status::RpcServiceError("connection closed by peer");
        }
        if (n < 0) {
            if (transient(errno)) continue;
            return failed("recv", errno);
        }
        done += static_cast<size_t>(n);
        if (got) *got = done;
    }
    return Status::OK();
}

Status recvHeader(int fd, void* head, size_t head_len, void* buf, size_t len,
                  Deadline deadline, size_t* early) {
    *early = 0;
    size_t done = 0;  // over the header and `buf` together
    while (done < head_len) {
        pollfd pfd{fd, POLLIN, 0};
        int rc = ::poll(&pfd, 1, remainingMs(deadline));
        if (rc == 0) return Status::RpcServiceError("recv timed out");
        if (rc < 0) {
            if (errno == EINTR) continue;
            return failed("poll", errno);
        }
        iovec iov[2] = {{static_cast<char*>(head) + done, head_len - done},
                        {buf, len}};
        msghdr msg{};
        msg.msg_iov = iov;
        msg.msg_iovlen = len > 0 ? 2 : 1;
        ssize_t n = ::recvmsg(fd, &msg, MSG_DONTWAIT);
        if (n == 0) return Status::RpcServiceError("connection closed by peer");
        if (n < 0) {
            if (transient(errno)) continue;
            return failed("recv", errno);
        }
        done += static_cast<size_t>(n);
    }
    *early = done - head_len;
    return Status::OK();
}

Status recvPayload(int fd, void* buf, size_t len, Deadline deadline) {
    CrossProcessOrderedCopy scope;
    return recvAll(fd, buf, len, deadline);
}

Status sendPayload(int fd, const void* buf, size_t len, Deadline deadline) {
    CrossProcessOrderedCopy scope;
    return sendAll(fd, buf, len, deadline);
}

Status sendPayload(int fd, const void* head, size_t head_len, const void* buf,
                   size_t len, Deadline deadline) {
    CrossProcessOrderedCopy scope;
    return sendAll(fd, head, head_len, buf, len, deadline);
}

Status discard(int fd, uint64_t len, Deadline deadline) {
    char scratch[64 * 1024];
    while (len > 0) {
        size_t n =
            len < sizeof(scratch) ? static_cast<size_t>(len) : sizeof(scratch);
        CHECK_STATUS(recvAll(fd, scratch, n, deadline));
        len -= n;
    }
    return Status::OK();
}

Status parseHostPort(const std::string& text, const char* what,
                     std::string& host, uint16_t& port) {
    const std::string prefix =
        std::string("invalid ") + what + " \"" + text + "\": ";
    size_t colon = text.rfind(':');
    if (colon == std::string::npos || colon == 0) {
        return Status::InvalidArgument(prefix + "expected host:port");
    }
    std::string port_text = text.substr(colon + 1);
    bool digits = !port_text.empty() && port_text.size() <= 5;
    unsigned long value = 0;
    for (char c : port_text) {
        digits = digits && c >= '0' && c <= '9';
        if (digits) value = value * 10 + static_cast<unsigned long>(c - '0');
    }
    if (!digits || value == 0 || value > 65535) {
        return Status::InvalidArgument(prefix + "port \"" + port_text +
                                       "\" is not in 1..65535");
    }
    host = text.substr(0, colon);
    port = static_cast<uint16_t>(value);
    return Status::OK();
}

Status connectTo(const std::string& host, uint16_t port, Deadline deadline,
                 int& fd_out) {
    addrinfo hints{};
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* result = nullptr;
    int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints,
                           &result);
    if (rc != 0 || !result) {
        return Status::RpcServiceError("cannot resolve host \"" + host +
                                       "\": " + gai_strerror(rc));
    }
    sockaddr_in addr;
    std::memcpy(&addr, result->ai_addr, sizeof(addr));
    ::freeaddrinfo(result);

    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) return failed("socket()", errno);
    rc = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    int err = rc == 0 ? 0 : errno;
    if (err == EINPROGRESS) {
        Status s = waitReady(fd, POLLOUT, deadline, "connect");
        if (!s.ok()) {
            ::close(fd);
            return s;
        }
        socklen_t len = sizeof(err);
        if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) {
            err = errno;
        }
    }
    if (err != 0) {
        ::close(fd);
        return failed("connect", err);
    }
    setNoDelay(fd);
    fd_out = fd;
    return Status::OK();
}

Status listenOn(uint16_t port, int& fd_out, uint16_t& bound_port,
                int* err_out) {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        if (err_out) *err_out = errno;
        return failed("socket()", errno);
    }
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_ANY);
    addr.sin_port = htons(port);
    if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
        ::listen(fd, SOMAXCONN) != 0) {
        int err = errno;
        ::close(fd);
        if (err_out) *err_out = err;
        return Status::RpcServiceError("cannot listen on port " +
                                       std::to_string(port) + ": " +
                                       std::strerror(err));
    }
    socklen_t len = sizeof(addr);
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
    bound_port = ntohs(addr.sin_port);
    fd_out = fd;
    return Status::OK();
}

void setNoDelay(int fd) {
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

void setSendBuffer(int fd, int bytes) {
    if (bytes <= 0) return;
    // A failure leaves the kernel's buffer, which only costs speed.
    ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof(bytes));
}

std::string addressName(const sockaddr_in& addr) {
    char host[INET_ADDRSTRLEN] = {0};
    ::inet_ntop(AF_INET, &addr.sin_addr, host, sizeof(host));
    return std::string(host) + ":" + std::to_string(ntohs(addr.sin_port));
}

}  // namespace mooncake::tent::net
