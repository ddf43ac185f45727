// TcpTransport target side: serve one request frame on a connection that
// net::StreamServer accepted.
#include <glog/logging.h>

#include <mutex>
#include <shared_mutex>

#include "net/socket_io.h"
#include "net/stream_server.h"
#include "tent/transport/tcp/tcp_transport.h"
#include "transport/tcp/tcp_wire.h"

namespace mooncake::tent {

namespace {

Status sendReply(int fd, uint32_t code, uint64_t length,
                 net::Deadline deadline) {
    tcp_wire::ReplyHeader reply;
    reply.code = code;
    reply.length = length;
    unsigned char buf[tcp_wire::kReplyHeaderBytes];
    tcp_wire::encode(reply, buf);
    return net::sendAll(fd, buf, sizeof(buf), deadline);
}

}  // namespace

bool TcpTransport::serveFrame(int fd, const std::string& peer,
                              net::Deadline deadline) {
    unsigned char head[tcp_wire::kRequestHeaderBytes];
    size_t got = 0;
    bool closed = false;
    Status s = net::recvAll(fd, head, sizeof(head), deadline, &got, &closed);
    if (!s.ok() && closed && got == 0) return false;  // orderly close
    tcp_wire::RequestHeader req;
    if (s.ok()) {
        s = tcp_wire::decode(head, req);
        if (!s.ok()) {
            LOG(WARNING) << "TcpTransport: malformed frame from " << peer
                         << ", closing the connection: " << s.message();
            return false;
        }
    }
    const bool is_write = req.op == tcp_wire::kOpWrite;
    bool in_range = false;
    if (s.ok()) {
        // Held while the memory is touched, so removeMemoryBuffer()
        // cannot retire a buffer under an in-progress access.
        std::shared_lock<std::shared_mutex> lock(buffers_mu_);
        in_range = rangeRegistered(req.addr, req.length);
        if (in_range) {
            void* mem = reinterpret_cast<void*>(req.addr);
            if (is_write) {
                s = net::recvAll(fd, mem, req.length, deadline);
                if (s.ok()) s = sendReply(fd, tcp_wire::kReplyOk, 0, deadline);
            } else {
                s = sendReply(fd, tcp_wire::kReplyOk, req.length, deadline);
                if (s.ok()) s = net::sendAll(fd, mem, req.length, deadline);
            }
        }
    }
    if (s.ok() && !in_range) {
        LOG(WARNING) << "TcpTransport: refused "
                     << (is_write ? "WRITE" : "READ") << " of " << req.length
                     << " bytes at 0x" << std::hex << req.addr << std::dec
                     << " from " << peer
                     << ": not within one registered buffer";
        // A refused WRITE's payload is drained (never stored) so the next
        // frame is found where the peer expects it.
        if (is_write) s = net::discard(fd, req.length, deadline);
        if (s.ok()) s = sendReply(fd, tcp_wire::kReplyBadRange, 0, deadline);
    }
    if (!s.ok()) {
        if (server_->stopping()) return false;  // uninstall() shut it down
        if (net::Clock::now() >= deadline) {
            LOG(WARNING) << "TcpTransport: request from " << peer
                         << " not complete within "
                            "transports/tcp/frame_timeout_ms="
                         << server_->limits().frame_timeout_ms
                         << " ms; closing the connection";
        } else {
            LOG(WARNING) << "TcpTransport: connection from " << peer
                         << " dropped: " << s.message();
        }
        return false;
    }
    return true;
}

}  // namespace mooncake::tent
