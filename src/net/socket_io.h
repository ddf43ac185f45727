// Socket plumbing shared by the p2p metadata RPC (src/rpc/) and the TCP
// transport (src/transport/tcp/), private to libtent.
//
// Every blocking operation here takes an absolute deadline, so a caller
// states once how long a whole exchange may take and a peer that trickles
// bytes cannot stretch it: the budget shrinks with each partial read.
// Failures are RpcServiceError (Status has no timeout or I/O code, as in
// upstream Mooncake) with a message naming the operation: "recv timed out",
// "connect failed: Connection refused", "connection closed by peer".
// Callers that need to tell a fired deadline from other failures compare
// Clock::now() with their deadline.
#pragma once

#include <netinet/in.h>
#include <sys/uio.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

#include "tent/common/status.h"

namespace mooncake::tent::net {

using Clock = std::chrono::steady_clock;
using Deadline = Clock::time_point;

inline Deadline deadlineIn(int ms) {
    return Clock::now() + std::chrono::milliseconds(ms);
}
// Milliseconds left until `deadline`, 0 once it passed.
int remainingMs(Deadline deadline);

// Waits until `fd` is ready for `events` (POLLIN / POLLOUT). `what` names
// the operation in the timeout message ("<what> timed out").
Status waitReady(int fd, short events, Deadline deadline, const char* what);

// Sends all `len` bytes (MSG_NOSIGNAL: a closed peer is an error, not a
// SIGPIPE). Both sendAll() and recvAll() make their first attempt without
// waiting, even past the deadline: the deadline bounds each later wait, so
// it fires only on a peer that is actually slow, never on work that needed
// no waiting.
Status sendAll(int fd, const void* buf, size_t len, Deadline deadline);

// sendAll() of `head` then `buf` as one stream, one sendmsg() per attempt:
// a frame header and the payload after it leave in the same segments, so a
// header costs neither a system call nor a TCP segment of its own (each
// segment on loopback also runs the receiver's TCP input on this thread).
Status sendAll(int fd, const void* head, size_t head_len, const void* buf,
               size_t len, Deadline deadline);

// Receives exactly `len` bytes. When given, `*got` says how many arrived
// and `*closed` whether the peer closed the connection first, so a caller
// can tell a clean close (0 bytes) from a truncated frame.
Status recvAll(int fd, void* buf, size_t len, Deadline deadline,
               size_t* got = nullptr, bool* closed = nullptr);

// Receives a reply's `head_len`-byte header, and into `buf` as much of the
// `len` bytes that follow it as arrives with it (one recvmsg() for both),
// returning once the header is complete; `*early` says how many of
// `buf`'s bytes came. For a reply read right after its request went out:
// it waits before each read, since a read at once would find nothing and
// cost a system call per request (with the deadline passed, the wait is a
// check that does not block, as recvAll()'s first attempt). `buf` gets
// bytes before the caller has checked the header, so it must be memory
// the reply may fill anyway.
Status recvHeader(int fd, void* head, size_t head_len, void* buf, size_t len,
                  Deadline deadline, size_t* early);

// recvAll()/sendAll() for the payload of a one-sided transfer, between a
// socket and memory a remote initiator addresses. Such bytes are ordered by
// the initiator, in another process: it WRITEs a block on one connection
// and READs it back on another only after the WRITE was acknowledged.
// ThreadSanitizer cannot see that order and would report the two serving
// threads as racing, so under TSan the calling thread's accesses to `buf`
// are not recorded for the duration of the copy (dynamic annotations; a
// plain call otherwise). Everything else these threads touch stays
// checked.
Status recvPayload(int fd, void* buf, size_t len, Deadline deadline);
Status sendPayload(int fd, const void* buf, size_t len, Deadline deadline);
// The payload after a frame header, both sent as by the two-buffer
// sendAll() and left unrecorded under TSan as above (the header is the
// caller's own).
Status sendPayload(int fd, const void* head, size_t head_len, const void* buf,
                   size_t len, Deadline deadline);

// Reads and drops `len` bytes through a fixed scratch buffer (the payload
// of a refused request), so the stream stays in step without allocating
// what the peer announced.
Status discard(int fd, uint64_t len, Deadline deadline);

// "host:port": a non-empty host and a decimal port in 1..65535. The error
// is InvalidArgument "invalid <what> \"<text>\": ..." (what: "segment
// name", "tcp endpoint").
Status parseHostPort(const std::string& text, const char* what,
                     std::string& host, uint16_t& port);

// Resolves `host` (IPv4 literal or name) and connects within the deadline.
// The socket is non-blocking, close-on-exec, with TCP_NODELAY.
Status connectTo(const std::string& host, uint16_t port, Deadline deadline,
                 int& fd_out);

// Binds 0.0.0.0:`port` (0: ephemeral) and listens. `*err_out`, when given,
// receives errno of a failed bind/listen so a caller scanning a port range
// can skip EADDRINUSE only.
Status listenOn(uint16_t port, int& fd_out, uint16_t& bound_port,
                int* err_out = nullptr);

// Small replies and acks would otherwise wait out Nagle against the peer's
// delayed ACK (tens of ms per request).
void setNoDelay(int fd);

// Caps the socket's send buffer at `bytes` (SO_SNDBUF, which also stops
// the kernel from growing it); 0 leaves it to the kernel's autotuning.
// Why a cap pays, even on loopback: an autotuned buffer lets a sender copy
// megabytes into kernel memory ahead of the reader, and by the time the
// reader copies them out they have left the cache (docs/performance.md,
// "Socket send buffers"). The kernel doubles the value for its own
// bookkeeping and clamps it to net.core.wmem_max.
void setSendBuffer(int fd, int bytes);

// "a.b.c.d:port" of an IPv4 address, for log lines.
std::string addressName(const sockaddr_in& addr);

}  // namespace mooncake::tent::net
