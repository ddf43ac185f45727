// TcpTransport target side: accept connections and serve frames.
#include <glog/logging.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>
#include <shared_mutex>

#include "tent/transport/tcp/tcp_transport.h"
#include "transport/tcp/tcp_wire.h"

namespace mooncake::tent {

namespace {

Status sendReply(int fd, uint32_t code, uint64_t length, int timeout_ms) {
    tcp_wire::ReplyHeader reply;
    reply.code = code;
    reply.length = length;
    unsigned char buf[tcp_wire::kReplyHeaderBytes];
    tcp_wire::encode(reply, buf);
    return tcp_wire::sendAll(fd, buf, sizeof(buf), timeout_ms);
}

}  // namespace

void TcpTransport::acceptLoop() {
    while (running_.load()) {
        int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
        if (fd < 0) {
            if (!running_.load()) break;
            if (errno == EINTR || errno == ECONNABORTED) continue;
            LOG(WARNING) << "TcpTransport: accept failed: "
                         << std::strerror(errno);
            // Out of descriptors: back off briefly instead of spinning on
            // a listener that stays readable.
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
                errno == ENOMEM) {
                ::poll(nullptr, 0, 100);
                continue;
            }
            break;
        }
        // Replies and acks are small: without this they wait out Nagle
        // against the peer's delayed ACK (tens of ms per request).
        int one = 1;
        ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        reapServers();
        std::lock_guard<std::mutex> lock(conn_mu_);
        if (!running_.load()) {
            ::close(fd);
            break;
        }
        sockets_.insert(fd);
        auto done = std::make_shared<std::atomic<bool>>(false);
        servers_.push_back(Server{
            std::thread(&TcpTransport::serveConnection, this, fd, done), done});
    }
}

void TcpTransport::reapServers() {
    std::vector<std::thread> finished;
    {
        std::lock_guard<std::mutex> lock(conn_mu_);
        for (auto it = servers_.begin(); it != servers_.end();) {
            if (it->done->load(std::memory_order_acquire)) {
                finished.push_back(std::move(it->thread));
                it = servers_.erase(it);
            } else {
                ++it;
            }
        }
    }
    for (std::thread& t : finished) t.join();
}

void TcpTransport::serveConnection(int fd,
                                   std::shared_ptr<std::atomic<bool>> done) {
    const int timeout_ms = settings_.timeout_ms;
    unsigned char head[tcp_wire::kRequestHeaderBytes];
    while (running_.load()) {
        // An idle connection may wait indefinitely for its next frame;
        // uninstall() shuts the socket down to end the wait.
        if (!tcp_wire::recvAll(fd, head, sizeof(head), -1).ok()) break;
        tcp_wire::RequestHeader req;
        Status s = tcp_wire::decode(head, req);
        if (!s.ok()) {
            LOG(WARNING) << "TcpTransport: malformed frame, closing "
                            "connection: "
                         << s.message();
            break;
        }
        const bool is_write = req.op == tcp_wire::kOpWrite;
        bool in_range;
        {
            // Held while the memory is touched, so removeMemoryBuffer()
            // cannot retire a buffer under an in-progress access.
            std::shared_lock<std::shared_mutex> lock(buffers_mu_);
            in_range = rangeRegistered(req.addr, req.length);
            if (in_range) {
                void* mem = reinterpret_cast<void*>(req.addr);
                if (is_write) {
                    s = tcp_wire::recvAll(fd, mem, req.length, timeout_ms);
                    if (s.ok())
                        s = sendReply(fd, tcp_wire::kReplyOk, 0, timeout_ms);
                } else {
                    s = sendReply(fd, tcp_wire::kReplyOk, req.length,
                                  timeout_ms);
                    if (s.ok()) {
                        s = tcp_wire::sendAll(fd, mem, req.length, timeout_ms);
                    }
                }
            }
        }
        if (!in_range) {
            LOG(WARNING) << "TcpTransport: refused "
                         << (is_write ? "WRITE" : "READ") << " of "
                         << req.length << " bytes at 0x" << std::hex << req.addr
                         << std::dec << ": not within one registered buffer";
            // A refused WRITE's payload is drained so the next frame is
            // found where the peer expects it.
            s = is_write ? tcp_wire::discard(fd, req.length, timeout_ms)
                         : Status::OK();
            if (s.ok()) {
                s = sendReply(fd, tcp_wire::kReplyBadRange, 0, timeout_ms);
            }
        }
        if (!s.ok()) {
            if (running_.load()) {
                LOG(WARNING)
                    << "TcpTransport: connection dropped: " << s.message();
            }
            break;
        }
    }
    untrackSocket(fd);
    ::close(fd);
    done->store(true, std::memory_order_release);
}

}  // namespace mooncake::tent
