// Length-prefixed frames for the framed-JSON RPC (the p2p metadata plane's
// transport; the ops themselves belong to their callers).
//
// A frame is a version byte (kRpcFrameVersion), a 4-byte big-endian payload
// length and the payload, a compact JSON object. A frame of another version
// is refused, naming the version seen and the one expected, before its
// length is read. Requests carry {"op": "<name>", ...}; replies are
// {"status": "ok", ...} or {"status": "error", "message": "..."}. Zero-length
// frames and frames above the size cap are refused before any payload is
// read, so a hostile length prefix cannot make the reader allocate.
#pragma once

#include <json/json.h>

#include <cstdint>
#include <string>

#include "net/socket_io.h"
#include "tent/common/status.h"

namespace mooncake::tent {

// The one frame version this build speaks and accepts.
inline constexpr uint8_t kRpcFrameVersion = 1;
inline constexpr size_t kFrameHeaderBytes = 5;  // version + length

// Sends one frame; the whole write is bounded by the deadline.
Status writeFrame(int fd, const std::string& payload, net::Deadline deadline);
Status writeFrame(int fd, const std::string& payload, int timeout_ms);

// Validates a frame header (kFrameHeaderBytes) and returns the payload
// length it announces: InvalidArgument for another version, for zero, or
// for a length above `max_size` (checked before anything is allocated).
Status decodeFrameLength(const unsigned char* header, uint32_t max_size,
                         uint32_t& size);

// Receives one frame into `payload`; the whole read is bounded by the
// deadline, however slowly the bytes trickle in. Outcomes:
//   OK, payload non-empty  a frame arrived
//   OK, payload empty      the peer closed the connection before a new
//                          frame began (frames are never empty)
//   RpcServiceError        the peer closed mid-frame (truncated), a socket
//                          error, or nothing complete arrived in time
//   InvalidArgument        another version, zero length, or a length
//                          above `max_size`
Status readFrame(int fd, std::string& payload, net::Deadline deadline,
                 uint32_t max_size);
Status readFrame(int fd, std::string& payload, int timeout_ms,
                 uint32_t max_size);

// Compact single-line JSON, as sent on the wire.
std::string encodeJson(const Json::Value& value);
// Parses a whole payload that must be one JSON object (no trailing bytes).
// MalformedJson names the parser's complaint.
Status decodeJsonObject(const std::string& payload, Json::Value& value);

Json::Value makeErrorReply(const std::string& message);

}  // namespace mooncake::tent
