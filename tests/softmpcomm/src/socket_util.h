// Blocking POSIX socket helpers shared by the listener, the control
// connections and the data connections (the "QPs").
#pragma once

#include <cstddef>
#include <string>

namespace mpcomm {
namespace detail {

// How long connect() and a handshake or query exchange may take before the
// caller gets an error instead of a hang.
constexpr int kHandshakeTimeoutMs = 5000;

// Binds 0.0.0.0:port with SO_REUSEADDR and listens. Returns the fd or -1
// with *error describing the failure (a taken port is not retried).
int listenTcp(int port, std::string* error);

// Resolves an IPv4 host and connects with a bounded timeout. Returns the fd
// (blocking mode, TCP_NODELAY) or -1 with *error.
int connectTcp(const std::string& host, int port, int timeout_ms,
               std::string* error);

// Applies send and receive timeouts; 0 means block indefinitely.
void setIoTimeout(int fd, int timeout_ms);

// Loops until all bytes moved. False on error, timeout or orderly close.
bool sendAll(int fd, const void* data, size_t length);
bool recvAll(int fd, void* data, size_t length);

// Wakes every thread blocked on fd without releasing the descriptor number,
// so a concurrent reader cannot end up on a recycled fd.
void shutdownSocket(int fd);
void closeSocket(int fd);

}  // namespace detail
}  // namespace mpcomm
