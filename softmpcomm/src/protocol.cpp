#include "protocol.h"

namespace mpcomm {
namespace detail {

bool sendFrame(int fd, const FrameHeader& header, const Deadline& deadline,
               const void* payload, size_t payload_len) {
    uint8_t raw[kHeaderSize];
    FrameHeader copy = header;
    copy.payload_len = payload_len;
    encodeHeader(copy, raw);
    if (!sendAll(fd, raw, kHeaderSize, deadline)) return false;
    return payload_len == 0 || sendAll(fd, payload, payload_len, deadline);
}

bool recvHeader(int fd, FrameHeader* header, const Deadline& deadline) {
    uint8_t raw[kHeaderSize];
    return recvAll(fd, raw, kHeaderSize, deadline) && decodeHeader(raw, header);
}

bool clientHello(int fd, ConnKind kind, const std::string& my_host_id,
                 uint32_t rail, uint32_t qp, const Deadline& deadline,
                 std::string* peer_host_id, uint32_t* peer_rails,
                 std::string* error) {
    FrameHeader hello;
    hello.type = MsgType::kHello;
    hello.key = static_cast<uint32_t>(kind);
    hello.addr = rail;
    hello.length = qp;
    if (!sendFrame(fd, hello, deadline, my_host_id.data(), my_host_id.size())) {
        *error = "sending HELLO failed";
        return false;
    }
    FrameHeader ack;
    if (!recvHeader(fd, &ack, deadline) || ack.type != MsgType::kHelloAck) {
        *error =
            "no valid HELLO_ACK (peer closed, timed out or is not "
            "softmpcomm)";
        return false;
    }
    if (ack.status != MPCOMM_SUCCESS) {
        *error = "peer refused HELLO with status " + std::to_string(ack.status);
        return false;
    }
    if (!checkReply(ConnStage::kAwaitHello, ack)) {
        *error = "malformed HELLO_ACK";
        return false;
    }
    std::string id(ack.payload_len, '\0');
    if (!recvAll(fd, &id[0], id.size(), deadline)) {
        *error = "truncated HELLO_ACK";
        return false;
    }
    *peer_host_id = id;
    *peer_rails = static_cast<uint32_t>(ack.length);
    return true;
}

}  // namespace detail
}  // namespace mpcomm
