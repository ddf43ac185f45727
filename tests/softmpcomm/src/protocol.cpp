#include "protocol.h"

#include <cstring>

#include "socket_util.h"

namespace mpcomm {
namespace detail {

namespace {

void putU16(uint8_t* out, uint16_t v) {
    for (int i = 0; i < 2; ++i) out[i] = static_cast<uint8_t>(v >> (8 * i));
}
void putU32(uint8_t* out, uint32_t v) {
    for (int i = 0; i < 4; ++i) out[i] = static_cast<uint8_t>(v >> (8 * i));
}
void putU64(uint8_t* out, uint64_t v) {
    for (int i = 0; i < 8; ++i) out[i] = static_cast<uint8_t>(v >> (8 * i));
}
uint16_t getU16(const uint8_t* in) {
    return static_cast<uint16_t>(in[0] | (in[1] << 8));
}
uint32_t getU32(const uint8_t* in) {
    uint32_t v = 0;
    for (int i = 3; i >= 0; --i) v = (v << 8) | in[i];
    return v;
}
uint64_t getU64(const uint8_t* in) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; --i) v = (v << 8) | in[i];
    return v;
}

// Per-entry wire size before its keys: addr, length, numa, key count.
constexpr size_t kEntryFixedSize = 8 + 8 + 4 + 4;

}  // namespace

void encodeHeader(const FrameHeader& header, uint8_t out[kHeaderSize]) {
    putU32(out + 0, kMagic);
    putU16(out + 4, kVersion);
    putU16(out + 6, static_cast<uint16_t>(header.type));
    putU32(out + 8, static_cast<uint32_t>(header.status));
    putU32(out + 12, header.key);
    putU64(out + 16, header.seq);
    putU64(out + 24, header.addr);
    putU64(out + 32, header.length);
    putU64(out + 40, header.payload_len);
}

bool decodeHeader(const uint8_t in[kHeaderSize], FrameHeader* header) {
    if (getU32(in) != kMagic || getU16(in + 4) != kVersion) return false;
    uint16_t type = getU16(in + 6);
    if (type < static_cast<uint16_t>(MsgType::kHello) ||
        type > static_cast<uint16_t>(MsgType::kGetDone))
        return false;
    header->type = static_cast<MsgType>(type);
    header->status = static_cast<int32_t>(getU32(in + 8));
    header->key = getU32(in + 12);
    header->seq = getU64(in + 16);
    header->addr = getU64(in + 24);
    header->length = getU64(in + 32);
    header->payload_len = getU64(in + 40);
    return true;
}

bool sendFrame(int fd, const FrameHeader& header, const void* payload,
               size_t payload_len) {
    uint8_t raw[kHeaderSize];
    FrameHeader copy = header;
    copy.payload_len = payload_len;
    encodeHeader(copy, raw);
    if (!sendAll(fd, raw, kHeaderSize)) return false;
    return payload_len == 0 || sendAll(fd, payload, payload_len);
}

bool recvHeader(int fd, FrameHeader* header) {
    uint8_t raw[kHeaderSize];
    return recvAll(fd, raw, kHeaderSize) && decodeHeader(raw, header);
}

bool clientHello(int fd, ConnKind kind, const std::string& my_host_id,
                 uint32_t rail, uint32_t qp, std::string* peer_host_id,
                 uint32_t* peer_rails, std::string* error) {
    FrameHeader hello;
    hello.type = MsgType::kHello;
    hello.key = static_cast<uint32_t>(kind);
    hello.addr = rail;
    hello.length = qp;
    if (!sendFrame(fd, hello, my_host_id.data(), my_host_id.size())) {
        *error = "sending HELLO failed";
        return false;
    }
    FrameHeader ack;
    if (!recvHeader(fd, &ack) || ack.type != MsgType::kHelloAck) {
        *error =
            "no valid HELLO_ACK (peer closed, timed out or is not "
            "softmpcomm)";
        return false;
    }
    if (ack.status != MPCOMM_SUCCESS) {
        *error = "peer refused HELLO with status " + std::to_string(ack.status);
        return false;
    }
    if (ack.payload_len == 0 || ack.payload_len > kMaxHostIdLength ||
        ack.length == 0 || ack.length > kMaxRails) {
        *error = "malformed HELLO_ACK";
        return false;
    }
    std::string id(ack.payload_len, '\0');
    if (!recvAll(fd, &id[0], id.size())) {
        *error = "truncated HELLO_ACK";
        return false;
    }
    *peer_host_id = id;
    *peer_rails = static_cast<uint32_t>(ack.length);
    return true;
}

std::string encodeBufferList(const std::vector<RemoteBufferEntry>& entries) {
    std::string out;
    uint8_t word[8];
    putU32(word, static_cast<uint32_t>(entries.size()));
    out.append(reinterpret_cast<char*>(word), 4);
    for (const auto& entry : entries) {
        putU64(word, entry.addr);
        out.append(reinterpret_cast<char*>(word), 8);
        putU64(word, entry.length);
        out.append(reinterpret_cast<char*>(word), 8);
        putU32(word, static_cast<uint32_t>(entry.numa_node));
        out.append(reinterpret_cast<char*>(word), 4);
        putU32(word, static_cast<uint32_t>(entry.rkeys.size()));
        out.append(reinterpret_cast<char*>(word), 4);
        for (uint32_t key : entry.rkeys) {
            putU32(word, key);
            out.append(reinterpret_cast<char*>(word), 4);
        }
    }
    return out;
}

bool decodeBufferList(const std::string& payload,
                      std::vector<RemoteBufferEntry>* entries) {
    const uint8_t* in = reinterpret_cast<const uint8_t*>(payload.data());
    size_t left = payload.size();
    if (left < 4) return false;
    uint32_t count = getU32(in);
    in += 4;
    left -= 4;
    if (count > kMaxQueryEntries) return false;
    std::vector<RemoteBufferEntry> result;
    for (uint32_t i = 0; i < count; ++i) {
        if (left < kEntryFixedSize) return false;
        RemoteBufferEntry entry;
        entry.addr = getU64(in);
        entry.length = getU64(in + 8);
        entry.numa_node = static_cast<int32_t>(getU32(in + 16));
        uint32_t nkeys = getU32(in + 20);
        in += kEntryFixedSize;
        left -= kEntryFixedSize;
        if (nkeys == 0 || nkeys > kMaxRails || left < 4ull * nkeys)
            return false;
        for (uint32_t k = 0; k < nkeys; ++k)
            entry.rkeys.push_back(getU32(in + 4 * k));
        in += 4ull * nkeys;
        left -= 4ull * nkeys;
        result.push_back(std::move(entry));
    }
    if (left != 0) return false;
    *entries = std::move(result);
    return true;
}

int sanitizeRemoteStatus(int32_t status) {
    if (status >= MPCOMM_ERR_NO_DEVICE && status <= MPCOMM_SUCCESS)
        return status;
    return MPCOMM_ERR_PROTOCOL;
}

}  // namespace detail
}  // namespace mpcomm
