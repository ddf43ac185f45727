// softmpcomm wire protocol. Every message is a fixed 48-byte header
// (little-endian fields) optionally followed by payload_len bytes:
//
//   magic u32 | version u16 | type u16 | status i32 | key u32 |
//   seq u64 | addr u64 | length u64 | payload_len u64
//
// A connection starts with HELLO (key = connection kind, addr = rail,
// length = QP index, payload = sender host id) answered by HELLO_ACK
// (length = responder's rail count, payload = responder host id). Control
// connections then carry QUERY_REQ / QUERY_RESP; data connections carry
// PUT_REQ (payload = the bytes) -> PUT_ACK, and GET_REQ -> GET_DATA* (addr =
// offset within the request) -> GET_DONE. Any malformed header or a length
// over its cap closes the connection.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "mpcomm_public.h"

namespace mpcomm {
namespace detail {

constexpr uint32_t kMagic = 0x43504d53;  // "SMPC"
constexpr uint16_t kVersion = 1;
constexpr size_t kHeaderSize = 48;
constexpr size_t kMaxHostIdLength = 1024;
constexpr uint64_t kMaxQueryPayload = 64ull << 20;
constexpr uint32_t kMaxQueryEntries = 1u << 20;
constexpr uint32_t kMaxRails = 256;
// Payload bytes move through bounce buffers of this size, so a target never
// holds its buffer lock while waiting on the network.
constexpr size_t kChunkSize = 256 * 1024;

enum class MsgType : uint16_t {
    kHello = 1,
    kHelloAck = 2,
    kQueryReq = 3,
    kQueryResp = 4,
    kPutReq = 5,
    kPutAck = 6,
    kGetReq = 7,
    kGetData = 8,
    kGetDone = 9,
};

enum class ConnKind : uint32_t { kControl = 0, kData = 1 };

struct FrameHeader {
    MsgType type = MsgType::kHello;
    int32_t status = MPCOMM_SUCCESS;
    uint32_t key = 0;
    uint64_t seq = 0;
    uint64_t addr = 0;
    uint64_t length = 0;
    uint64_t payload_len = 0;
};

void encodeHeader(const FrameHeader& header, uint8_t out[kHeaderSize]);
// False when magic, version or type is wrong.
bool decodeHeader(const uint8_t in[kHeaderSize], FrameHeader* header);

// Header plus optional payload in one call.
bool sendFrame(int fd, const FrameHeader& header, const void* payload = nullptr,
               size_t payload_len = 0);
bool recvHeader(int fd, FrameHeader* header);

// Sends HELLO and validates HELLO_ACK; on success fills the peer's host id
// and rail count. *error describes a failure.
bool clientHello(int fd, ConnKind kind, const std::string& my_host_id,
                 uint32_t rail, uint32_t qp, std::string* peer_host_id,
                 uint32_t* peer_rails, std::string* error);

std::string encodeBufferList(const std::vector<RemoteBufferEntry>& entries);
bool decodeBufferList(const std::string& payload,
                      std::vector<RemoteBufferEntry>* entries);

// Keeps only the known MPCOMM_ERR_* codes a peer may report; anything else
// becomes MPCOMM_ERR_PROTOCOL.
int sanitizeRemoteStatus(int32_t status);

}  // namespace detail
}  // namespace mpcomm
