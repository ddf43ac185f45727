// softmpcomm wire format, without sockets: encoding, decoding, and the
// per-type limits every receiver applies to a header before it allocates or
// reads a byte of payload. Every message is a fixed 48-byte header
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
// offset within the request, at most one chunk each) -> GET_DONE. A header
// that fails its check closes the connection.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "config.h"
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
// A target gives each this many bytes of a PUT payload (and a client each
// frame) one idle period, so a trickling peer loses the connection.
constexpr size_t kChunkSize = 256 * 1024;
// The largest GET_DATA payload. A GET moves in frames of this size straight
// from the target's buffer; larger frames mean fewer headers and syscalls
// per byte on both ends, and each must still complete within one idle
// period.
constexpr size_t kMaxGetDataSize = 4u << 20;

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

// Where a connection stands: what the listener accepts next on it, or what
// the initiator expects back on it.
enum class ConnStage { kAwaitHello, kControl, kData };

// What the listener's own configuration allows.
struct RequestLimits {
    uint32_t rails = 1;
    uint64_t max_slice = kDefaultMaxTransferSize;
};

// Checks a request header against its type's real size for the stage:
// HELLO carries 1..kMaxHostIdLength bytes of host id and a QP index below
// kMaxQpsPerConnection; QUERY_REQ and GET_REQ carry nothing; PUT_REQ carries
// exactly its length; PUT / GET move 1..max_slice bytes; requests carry no
// status. False (with *why) means: close the connection unread.
bool checkRequest(ConnStage stage, const FrameHeader& header,
                  const RequestLimits& limits, std::string* why);

// The stage a well-formed HELLO leads to, or kAwaitHello when the listener
// refuses it (unknown kind, or a rail it lacks): it answers with an error
// HELLO_ACK and closes.
ConnStage stageAfterHello(const FrameHeader& hello, uint32_t rails);

// Checks a reply header on the initiator's side: HELLO_ACK (any stage) with
// a 1..kMaxHostIdLength host id and 1..kMaxRails rails when successful;
// QUERY_RESP up to kMaxQueryPayload; PUT_ACK / GET_DONE empty; GET_DATA of
// 1..kMaxGetDataSize bytes.
bool checkReply(ConnStage stage, const FrameHeader& header);

std::string encodeBufferList(const std::vector<RemoteBufferEntry>& entries);
bool decodeBufferList(const uint8_t* data, size_t size,
                      std::vector<RemoteBufferEntry>* entries);
bool decodeBufferList(const std::string& payload,
                      std::vector<RemoteBufferEntry>* entries);

// Keeps only the known MPCOMM_ERR_* codes a peer may report; anything else
// becomes MPCOMM_ERR_PROTOCOL.
int sanitizeRemoteStatus(int32_t status);

// The decoders over an arbitrary byte string, for the fuzzer: walks it as
// the listener walks one connection (HELLO, then control or data requests,
// skipping payloads), then as the initiator walks replies, then decodes it
// as a buffer list. Returns the number of frames accepted.
size_t runWireDecoder(const uint8_t* data, size_t size);

}  // namespace detail
}  // namespace mpcomm
