// TcpTransport target side: serve one request frame on a connection that
// net::StreamServer accepted.
#include <glog/logging.h>

#include <algorithm>

#include "net/socket_io.h"
#include "net/stream_server.h"
#include "tent/transport/tcp/tcp_transport.h"
#include "transport/tcp/tcp_buffers.h"
#include "transport/tcp/tcp_stager.h"
#include "transport/tcp/tcp_wire.h"

namespace mooncake::tent {

namespace {

// Registered memory is moved in slices of this size, so an unregister is
// noticed within one slice of a transfer that is making progress.
constexpr uint64_t kSlice = 1ull << 20;

struct EncodedReply {
    unsigned char bytes[tcp_wire::kReplyHeaderBytes];
};

EncodedReply encodeReply(uint32_t code, uint64_t length) {
    tcp_wire::ReplyHeader reply;
    reply.code = code;
    reply.length = length;
    EncodedReply out;
    tcp_wire::encode(reply, out.bytes);
    return out;
}

Status sendReply(int fd, uint32_t code, uint64_t length,
                 net::Deadline deadline) {
    const EncodedReply reply = encodeReply(code, length);
    return net::sendAll(fd, reply.bytes, sizeof(reply.bytes), deadline);
}

// WRITE into pinned memory. When the buffer starts retiring part way, the
// pin is released, the rest of the payload is drained unstored, and the
// request is answered as a bad range.
Status serveWrite(int fd, const tcp_wire::RequestHeader& req,
                  TcpBufferTable::Pin& pin, TcpStager* stager,
                  net::Deadline deadline) {
    char* mem = reinterpret_cast<char*>(req.addr);
    uint64_t done = 0;
    if (pin.device()) {
        // Staged slice by slice; retirement is checked between slices.
        CHECK_STATUS(stager->recv(
            fd, mem, req.length, deadline, [&] { return !pin.retiring(); },
            &done));
    }
    // Retirement is checked after each slice, never before the first: a
    // pinned access always starts, and remove() fences it either way.
    while (!pin.device() && done < req.length) {
        uint64_t n = std::min(kSlice, req.length - done);
        CHECK_STATUS(net::recvPayload(fd, mem + done, n, deadline));
        done += n;
        if (pin.retiring()) break;
    }
    const bool retired = done < req.length;
    pin.release();
    if (retired) {
        CHECK_STATUS(net::discard(fd, req.length - done, deadline));
        return sendReply(fd, tcp_wire::kReplyBadRange, 0, deadline);
    }
    return sendReply(fd, tcp_wire::kReplyOk, 0, deadline);
}

// READ from pinned memory. The reply header promises every byte, so a
// buffer retiring part way ends the connection instead.
Status serveRead(int fd, const tcp_wire::RequestHeader& req,
                 TcpBufferTable::Pin& pin, TcpStager* stager,
                 net::Deadline deadline) {
    const char* mem = reinterpret_cast<const char*>(req.addr);
    if (pin.device()) {
        CHECK_STATUS(sendReply(fd, tcp_wire::kReplyOk, req.length, deadline));
        Status s = stager->send(fd, mem, req.length, deadline,
                                [&] { return !pin.retiring(); });
        if (!s.ok() && pin.retiring()) {
            return Status::InvalidArgument(
                "the buffer was unregistered during the READ");
        }
        return s;
    }
    // The reply header goes out with the first slice, in one system call
    // and the same segments.
    const EncodedReply reply = encodeReply(tcp_wire::kReplyOk, req.length);
    size_t head_len = sizeof(reply.bytes);
    uint64_t done = 0;
    do {
        uint64_t n = std::min(kSlice, req.length - done);
        CHECK_STATUS(net::sendPayload(fd, reply.bytes, head_len, mem + done, n,
                                      deadline));
        head_len = 0;
        done += n;
        if (done < req.length && pin.retiring()) {
            return Status::InvalidArgument(
                "the buffer was unregistered during the READ");
        }
    } while (done < req.length);
    return Status::OK();
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
    if (s.ok()) {
        // The pin, not a lock, keeps the buffer registered while its bytes
        // move: registration and unregistration of anything else never wait
        // for this peer.
        // A buffer being unregistered is already out of the table, so a
        // pin is only ever taken on a live one; an unregister that starts
        // right after is fenced by the pin (see serveWrite/serveRead).
        TcpBufferTable::Pin pin = buffers_->pin(req.addr, req.length, fd);
        if (pin) {
            s = is_write ? serveWrite(fd, req, pin, stager_.get(), deadline)
                         : serveRead(fd, req, pin, stager_.get(), deadline);
        } else {
            pin.release();
            LOG(WARNING) << "TcpTransport: refused "
                         << (is_write ? "WRITE" : "READ") << " of "
                         << req.length << " bytes at 0x" << std::hex << req.addr
                         << std::dec << " from " << peer
                         << ": not within one registered buffer";
            // A refused WRITE's payload is drained (never stored) so the
            // next frame is found where the peer expects it.
            if (is_write) s = net::discard(fd, req.length, deadline);
            if (s.ok()) {
                s = sendReply(fd, tcp_wire::kReplyBadRange, 0, deadline);
            }
        }
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
