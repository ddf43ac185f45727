// Length-prefixed frames for the p2p metadata RPC.
//
// A frame is a 4-byte big-endian payload length followed by the payload, a
// compact JSON object. Requests carry {"op": "<name>", ...}; replies are
// {"status": "ok", ...} or {"status": "error", "message": "..."}. Zero-length
// frames and frames above the size cap are refused before any payload is
// read, so a hostile length prefix cannot make the reader allocate.
#pragma once

#include <json/json.h>

#include <cstdint>
#include <string>

#include "tent/common/status.h"

namespace mooncake::tent {

inline constexpr const char* kOpGetSegmentDesc = "GetSegmentDesc";

// Sends one frame. The whole write is bounded by `timeout_ms`.
Status writeFrame(int fd, const std::string& payload, int timeout_ms);

// Receives one frame into `payload`; the whole read is bounded by
// `timeout_ms`. Outcomes:
//   OK, payload non-empty  a frame arrived
//   OK, payload empty      the peer closed the connection before a new
//                          frame began (frames are never empty)
//   RpcServiceError        the peer closed mid-frame (truncated), a socket
//                          error, or nothing complete arrived in time
//   InvalidArgument        zero length, or a length above `max_size`
Status readFrame(int fd, std::string& payload, int timeout_ms,
                 uint32_t max_size);

// Compact single-line JSON, as sent on the wire.
std::string encodeJson(const Json::Value& value);
// Parses a whole payload that must be one JSON object (no trailing bytes).
// MalformedJson names the parser's complaint.
Status decodeJsonObject(const std::string& payload, Json::Value& value);

Json::Value makeErrorReply(const std::string& message);

}  // namespace mooncake::tent
