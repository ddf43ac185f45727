// POSIX socket helpers shared by the listener, the control connections and
// the data connections (the "QPs"). Sockets stay in blocking mode but every
// call moves bytes with MSG_DONTWAIT and waits in poll() against a Deadline,
// so no call blocks without a bound, and ::shutdown() on the socket wakes a
// waiter at once (poll reports the hang-up).
#pragma once

#include <chrono>
#include <cstddef>
#include <mutex>
#include <set>
#include <string>

namespace mpcomm {
namespace detail {

// An absolute time limit for a sequence of socket calls.
class Deadline {
 public:
    using Clock = std::chrono::steady_clock;

    static Deadline in(int timeout_ms);
    // Only for waits that something else ends: a shutdown() of the socket.
    static Deadline never() { return Deadline(); }

    // The timeout argument for poll(): -1 for never, 0 once expired.
    int pollTimeoutMs() const;

 private:
    bool never_ = true;
    Clock::time_point at_{};
};

// Binds 0.0.0.0:port with SO_REUSEADDR (so a restarted process gets its port
// back while old connections linger in TIME_WAIT) and listens. Returns the
// fd or -1 with *error describing the failure (a taken port is not retried).
int listenTcp(int port, std::string* error);

class SocketSet;

// Resolves an IPv4 host and connects within timeout_ms. Returns the fd
// (TCP_NODELAY) or -1 with *error. With a `set`, the socket joins it before
// the first wait, so SocketSet::cancelAll() wakes the connect too; on
// success it stays a member, and the caller must remove() it before close.
int connectTcp(const std::string& host, int port, int timeout_ms,
               std::string* error, SocketSet* set = nullptr);

// Waits until fd is ready for `events` (POLLIN / POLLOUT) or has hung up.
// False when the deadline passes first or poll() fails.
bool waitReady(int fd, short events, const Deadline& deadline);

// Loop until every byte moved. False on error, orderly close or deadline.
bool sendAll(int fd, const void* data, size_t length, const Deadline& deadline);
bool recvAll(int fd, void* data, size_t length, const Deadline& deadline);

// Caps fd's send buffer (SO_SNDBUF) at `bytes`; 0 leaves the kernel's
// autotuning (config.h, SOFTMPCOMM_SEND_BUFFER_BYTES, says why a cap).
void setSendBuffer(int fd, int bytes);

// Wakes every thread waiting on fd without releasing the descriptor number,
// so a concurrent reader cannot end up on a recycled fd.
void shutdownSocket(int fd);
void closeSocket(int fd);

// The sockets that handshakes in progress wait on, so that shutdown() can
// wake all of them. A member is shut down, never closed, by cancelAll(); its
// owner closes it after remove(), so the number cannot be recycled under a
// concurrent cancelAll().
class SocketSet {
 public:
    // False once cancelAll() ran: the caller must give up on this socket.
    bool add(int fd);
    void remove(int fd);
    // Shuts every member down and refuses new ones until reopen().
    void cancelAll();
    void reopen();
    bool cancelled() const;

 private:
    mutable std::mutex mu_;
    bool cancelled_ = false;
    std::set<int> fds_;
};

// Owns a socket that is a member of a SocketSet (or of none).
class TrackedSocket {
 public:
    TrackedSocket() = default;
    TrackedSocket(int fd, SocketSet* set) : fd_(fd), set_(set) {}
    ~TrackedSocket() { close(); }
    TrackedSocket(const TrackedSocket&) = delete;
    TrackedSocket& operator=(const TrackedSocket&) = delete;
    // Moving keeps the membership: same descriptor, same set.
    TrackedSocket(TrackedSocket&& other) noexcept
        : fd_(other.fd_), set_(other.set_) {
        other.fd_ = -1;
    }
    TrackedSocket& operator=(TrackedSocket&& other) noexcept {
        if (this != &other) {
            close();
            fd_ = other.fd_;
            set_ = other.set_;
            other.fd_ = -1;
        }
        return *this;
    }

    int fd() const { return fd_; }
    // Leaves the set and hands the descriptor to the caller.
    int release();
    void close();

 private:
    int fd_ = -1;
    SocketSet* set_ = nullptr;
};

}  // namespace detail
}  // namespace mpcomm
