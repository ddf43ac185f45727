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
#include <cstdint>

namespace mpcomm {
namespace detail {

// One recv(MSG_DONTWAIT) of at most `length` bytes into `dst`; returns what
// recv() returns, with errno preserved.
ssize_t recvPayloadOnce(int fd, void* dst, size_t length);

// One frame as it goes out: its header, its payload (in registered or user
// memory), and optionally a small frame that follows it in the same
// sendmsg() (a GET's completion rides with its last data frame, saving a
// segment and a wake-up of the reader).
struct FrameParts {
    const uint8_t* head = nullptr;
    size_t head_length = 0;
    const void* payload = nullptr;
    uint64_t payload_length = 0;
    const uint8_t* tail = nullptr;
    size_t tail_length = 0;

    uint64_t total() const {
        return head_length + payload_length + tail_length;
    }
};

// One sendmsg(MSG_DONTWAIT | MSG_NOSIGNAL) of what is left of `parts` after
// its first `sent` bytes; returns what sendmsg() returns, errno preserved.
ssize_t sendPayloadOnce(int fd, const FrameParts& parts, uint64_t sent);

}  // namespace detail
}  // namespace mpcomm
