// The only two places where softmpcomm moves one-sided payload bytes
// between a socket and registered (target) or user (initiator) memory.
//
// Their order against the application's own accesses to that memory runs
// through socket messages (a PUT's acknowledgement, a GET's completion) and,
// between processes, through the peer. ThreadSanitizer models neither, so
// under TSan both calls are bracketed with AnnotateIgnoreReads/Writes: the
// kernel's copy into or out of the buffer is not recorded as an access of
// this thread. Everything else (headers, drained payloads, control
// messages) goes through ordinary socket calls and stays visible to TSan.
#pragma once

#include <sys/types.h>

#include <cstddef>

namespace mpcomm {
namespace detail {

// One recv(MSG_DONTWAIT) of at most `length` bytes into `dst`; returns what
// recv() returns, with errno preserved.
ssize_t recvPayloadOnce(int fd, void* dst, size_t length);

// One sendmsg(MSG_DONTWAIT | MSG_NOSIGNAL) of `head` (a frame header, may be
// empty) followed by `payload`; returns what sendmsg() returns (bytes of
// both together), with errno preserved.
ssize_t sendPayloadOnce(int fd, const void* head, size_t head_length,
                        const void* payload, size_t payload_length);

}  // namespace detail
}  // namespace mpcomm
