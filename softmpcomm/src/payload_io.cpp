#include "payload_io.h"

#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>

#include "device_copy.h"

#if defined(__SANITIZE_THREAD__)
#define SOFTMPCOMM_UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SOFTMPCOMM_UNDER_TSAN 1
#endif
#endif

#ifdef SOFTMPCOMM_UNDER_TSAN
// ThreadSanitizer's dynamic annotations (exported by its runtime).
extern "C" void AnnotateIgnoreReadsBegin(const char* file, int line);
extern "C" void AnnotateIgnoreReadsEnd(const char* file, int line);
extern "C" void AnnotateIgnoreWritesBegin(const char* file, int line);
extern "C" void AnnotateIgnoreWritesEnd(const char* file, int line);
#endif

namespace mpcomm {
namespace detail {

namespace {

// Scope of one payload syscall whose ordering TSan cannot see (payload_io.h).
class PeerOrderedCopy {
 public:
    PeerOrderedCopy() {
#ifdef SOFTMPCOMM_UNDER_TSAN
        AnnotateIgnoreReadsBegin(__FILE__, __LINE__);
        AnnotateIgnoreWritesBegin(__FILE__, __LINE__);
#endif
    }
    ~PeerOrderedCopy() {
#ifdef SOFTMPCOMM_UNDER_TSAN
        int saved = errno;
        AnnotateIgnoreWritesEnd(__FILE__, __LINE__);
        AnnotateIgnoreReadsEnd(__FILE__, __LINE__);
        errno = saved;
#endif
    }
    PeerOrderedCopy(const PeerOrderedCopy&) = delete;
    PeerOrderedCopy& operator=(const PeerOrderedCopy&) = delete;
};

}  // namespace

ssize_t recvPayloadOnce(int fd, void* dst, size_t length) {
    if (isDeviceMemory(dst)) {
        // Received into host memory, then copied onto the device.
        char* bounce = bounceBuffer();
        ssize_t n =
            ::recv(fd, bounce, std::min(length, kBounceBytes), MSG_DONTWAIT);
        if (n > 0 && !copyDeviceMemory(dst, bounce, static_cast<size_t>(n))) {
            return -1;
        }
        return n;
    }
    PeerOrderedCopy scope;
    return ::recv(fd, dst, length, MSG_DONTWAIT);
}

ssize_t sendPayloadOnce(int fd, const FrameParts& parts, uint64_t sent) {
    PeerOrderedCopy scope;
    iovec pieces[3];
    int count = 0;
    auto add = [&](const void* data, uint64_t length) {
        if (sent >= length) {
            sent -= length;
            return;
        }
        pieces[count++] =
            iovec{const_cast<char*>(static_cast<const char*>(data)) + sent,
                  static_cast<size_t>(length - sent)};
        sent = 0;
    };
    add(parts.head, parts.head_length);
    if (parts.payload_length > 0 && isDeviceMemory(parts.payload)) {
        // The unsent part of the payload, up to one bounce buffer, copied
        // off the device; the tail goes only once the payload is all out.
        uint64_t done = std::min<uint64_t>(sent, parts.payload_length);
        sent -= done;
        uint64_t n =
            std::min<uint64_t>(parts.payload_length - done, kBounceBytes);
        if (n > 0) {
            char* bounce = bounceBuffer();
            if (!copyDeviceMemory(
                    bounce, static_cast<const char*>(parts.payload) + done,
                    n)) {
                return -1;
            }
            pieces[count++] = iovec{bounce, static_cast<size_t>(n)};
        }
        if (done + n == parts.payload_length) {
            add(parts.tail, parts.tail_length);
        }
    } else {
        add(parts.payload, parts.payload_length);
        add(parts.tail, parts.tail_length);
    }
    msghdr message{};
    message.msg_iov = pieces;
    message.msg_iovlen = count;
    return ::sendmsg(fd, &message, MSG_DONTWAIT | MSG_NOSIGNAL);
}

}  // namespace detail
}  // namespace mpcomm
