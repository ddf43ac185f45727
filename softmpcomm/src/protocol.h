// softmpcomm framing over a socket: the wire format of wire.h sent and
// received within a Deadline, and the client half of the HELLO exchange.
#pragma once

#include <cstdint>
#include <string>

#include "socket_util.h"
#include "wire.h"

namespace mpcomm {
namespace detail {

// Header plus optional payload in one call.
bool sendFrame(int fd, const FrameHeader& header, const Deadline& deadline,
               const void* payload = nullptr, size_t payload_len = 0);
// Receives and decodes one header; false on I/O failure or a bad header.
bool recvHeader(int fd, FrameHeader* header, const Deadline& deadline);

// Sends HELLO and validates HELLO_ACK, all within `deadline`; on success
// fills the peer's host id and rail count. *error describes a failure.
bool clientHello(int fd, ConnKind kind, const std::string& my_host_id,
                 uint32_t rail, uint32_t qp, const Deadline& deadline,
                 std::string* peer_host_id, uint32_t* peer_rails,
                 std::string* error);

}  // namespace detail
}  // namespace mpcomm
