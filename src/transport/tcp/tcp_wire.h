// Wire format and socket plumbing of TcpTransport (private to it).
//
// Request frame:  RequestHeader, then `length` payload bytes for WRITE.
// Reply frame:    ReplyHeader, then `length` payload bytes for a good READ.
// All integers are big-endian on the wire. A header with a wrong magic, an
// unknown op or a length above kMaxFramePayload is malformed: the receiver
// logs it and closes the connection, since it can no longer find the next
// frame boundary.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "tent/common/status.h"

namespace mooncake::tent::tcp_wire {

constexpr uint32_t kRequestMagic = 0x54454e54;  // "TENT"
constexpr uint32_t kReplyMagic = 0x54524550;    // "TREP"
// Largest payload one frame may carry; bigger requests are split by the
// initiator into frames of at most kMaxChunk bytes.
constexpr uint64_t kMaxFramePayload = 64ull << 20;
constexpr uint64_t kMaxChunk = 16ull << 20;

enum Op : uint32_t { kOpRead = 1, kOpWrite = 2 };
enum ReplyCode : uint32_t { kReplyOk = 0, kReplyBadRange = 1 };

struct RequestHeader {
    uint32_t magic = kRequestMagic;
    uint32_t op = 0;
    uint64_t addr = 0;
    uint64_t length = 0;
};
constexpr size_t kRequestHeaderBytes = 24;

struct ReplyHeader {
    uint32_t magic = kReplyMagic;
    uint32_t code = kReplyOk;
    uint64_t length = 0;
};
constexpr size_t kReplyHeaderBytes = 16;

void encode(const RequestHeader& h, unsigned char* out);
void encode(const ReplyHeader& h, unsigned char* out);
// Decode and validate; the error names the bad field and value.
Status decode(const unsigned char* in, RequestHeader& h);
Status decode(const unsigned char* in, ReplyHeader& h);

// Full-length socket I/O. `timeout_ms` bounds each wait for progress;
// a negative value waits indefinitely (idle server connections).
// A closed peer, an error or a timeout is a non-OK status naming it.
Status sendAll(int fd, const void* buf, size_t len, int timeout_ms);
Status recvAll(int fd, void* buf, size_t len, int timeout_ms);
// Reads and discards `len` bytes (the payload of a refused WRITE), so the
// connection stays in step.
Status discard(int fd, size_t len, int timeout_ms);

// Connects to "host:port" (IPv4 or a resolvable name) within timeout_ms.
Status connectTo(const std::string& endpoint, int timeout_ms, int& fd_out);
// Binds 0.0.0.0:`port` (0: ephemeral) and listens.
Status listenAny(uint16_t port, int& fd_out, uint16_t& bound_port);

}  // namespace mooncake::tent::tcp_wire
