// Wire format of TcpTransport (private to it; the socket plumbing is
// src/net/).
//
// Request frame:  RequestHeader, then `length` payload bytes for WRITE.
// Reply frame:    ReplyHeader, then `length` payload bytes for a good READ.
//
//   request (24 bytes): magic "TENT" (4) | version (1) | op (1) |
//                       reserved, zero (2) | addr (8) | length (8)
//   reply (16 bytes):   magic "TREP" (4) | version (1) | reserved, zero (1) |
//                       code (2) | length (8)
//
// All integers are big-endian on the wire. The version is checked right
// after the magic, before any other field, since another version may lay
// them out differently: a frame of another version is refused naming the
// version seen and the one expected. A header with a wrong magic or
// version, non-zero reserved bytes, an unknown op or a length above
// kMaxChunk is malformed: the receiver logs it and closes the connection,
// since it can no longer find the next frame boundary. A well-formed WRITE
// is further bounded by the registered range it targets before any byte of
// its payload lands in memory.
#pragma once

#include <cstddef>
#include <cstdint>

#include "tent/common/status.h"

namespace mooncake::tent::tcp_wire {

constexpr uint32_t kRequestMagic = 0x54454e54;  // "TENT"
constexpr uint32_t kReplyMagic = 0x54524550;    // "TREP"
// The one version this build speaks, in every request and reply.
constexpr uint8_t kTcpWireVersion = 1;
// Largest payload one frame carries: the initiator splits bigger requests
// into frames of at most this, so a header announcing more is malformed.
constexpr uint64_t kMaxChunk = 16ull << 20;

enum Op : uint32_t { kOpRead = 1, kOpWrite = 2 };
enum ReplyCode : uint32_t { kReplyOk = 0, kReplyBadRange = 1 };

struct RequestHeader {
    uint32_t magic = kRequestMagic;
    uint8_t version = kTcpWireVersion;
    uint32_t op = 0;  // one byte on the wire
    uint64_t addr = 0;
    uint64_t length = 0;
};
constexpr size_t kRequestHeaderBytes = 24;

struct ReplyHeader {
    uint32_t magic = kReplyMagic;
    uint8_t version = kTcpWireVersion;
    uint32_t code = kReplyOk;  // two bytes on the wire
    uint64_t length = 0;
};
constexpr size_t kReplyHeaderBytes = 16;

void encode(const RequestHeader& h, unsigned char* out);
void encode(const ReplyHeader& h, unsigned char* out);
// Decode and validate; the error names the bad field and value.
Status decode(const unsigned char* in, RequestHeader& h);
Status decode(const unsigned char* in, ReplyHeader& h);

}  // namespace mooncake::tent::tcp_wire
