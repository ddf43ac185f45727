#include "wire.h"

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

// Walks `data` as replies on a connection that goes to `after_ack` once its
// HELLO_ACK passed; returns the frames accepted.
size_t walkReplies(const uint8_t* data, size_t size, ConnStage after_ack) {
    ConnStage stage = ConnStage::kAwaitHello;
    size_t frames = 0;
    for (size_t offset = 0; size - offset >= kHeaderSize;) {
        FrameHeader header;
        if (!decodeHeader(data + offset, &header) || !checkReply(stage, header))
            break;
        offset += kHeaderSize;
        if (header.payload_len > size - offset) break;  // truncated
        if (stage == ConnStage::kControl) {
            std::vector<RemoteBufferEntry> entries;
            decodeBufferList(data + offset, header.payload_len, &entries);
        }
        offset += header.payload_len;
        ++frames;
        if (stage == ConnStage::kAwaitHello) {
            if (header.status != MPCOMM_SUCCESS) break;
            stage = after_ack;
        }
    }
    return frames;
}

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

bool checkRequest(ConnStage stage, const FrameHeader& header,
                  const RequestLimits& limits, std::string* why) {
    auto reject = [why](std::string reason) {
        *why = std::move(reason);
        return false;
    };
    if (header.status != MPCOMM_SUCCESS)
        return reject("a request carries a status");
    switch (stage) {
        case ConnStage::kAwaitHello:
            if (header.type != MsgType::kHello)
                return reject("first frame is not HELLO");
            if (header.payload_len == 0 ||
                header.payload_len > kMaxHostIdLength)
                return reject("HELLO host id of " +
                              std::to_string(header.payload_len) +
                              " bytes (expected 1-" +
                              std::to_string(kMaxHostIdLength) + ")");
            if (header.length >= static_cast<uint64_t>(kMaxQpsPerConnection))
                return reject("HELLO QP index " +
                              std::to_string(header.length));
            return true;
        case ConnStage::kControl:
            if (header.type != MsgType::kQueryReq || header.payload_len != 0)
                return reject("control connection expects an empty QUERY_REQ");
            return true;
        case ConnStage::kData:
            break;
    }
    bool is_put = header.type == MsgType::kPutReq;
    if (!is_put && header.type != MsgType::kGetReq)
        return reject("data connection expects PUT_REQ or GET_REQ");
    const char* op = is_put ? "PUT" : "GET";
    if (header.length == 0 || header.length > limits.max_slice)
        return reject(std::string(op) + " of " + std::to_string(header.length) +
                      " bytes (expected 1-" + std::to_string(limits.max_slice) +
                      ", MPCOMM_MAX_RDMA_TRANSFER_SIZE)");
    if (header.payload_len != (is_put ? header.length : 0))
        return reject(std::string(op) + " payload of " +
                      std::to_string(header.payload_len) + " bytes for " +
                      std::to_string(header.length) + " requested");
    return true;
}

ConnStage stageAfterHello(const FrameHeader& hello, uint32_t rails) {
    if (hello.key == static_cast<uint32_t>(ConnKind::kControl))
        return ConnStage::kControl;
    if (hello.key == static_cast<uint32_t>(ConnKind::kData) &&
        hello.addr < rails)
        return ConnStage::kData;
    return ConnStage::kAwaitHello;
}

bool checkReply(ConnStage stage, const FrameHeader& header) {
    switch (stage) {
        case ConnStage::kAwaitHello:
            if (header.type != MsgType::kHelloAck ||
                header.payload_len > kMaxHostIdLength)
                return false;
            return header.status != MPCOMM_SUCCESS ||
                   (header.payload_len > 0 && header.length > 0 &&
                    header.length <= kMaxRails);
        case ConnStage::kControl:
            return header.type == MsgType::kQueryResp &&
                   header.payload_len <= kMaxQueryPayload;
        case ConnStage::kData:
            if (header.type == MsgType::kGetData)
                return header.payload_len > 0 &&
                       header.payload_len <= kMaxGetDataSize;
            return (header.type == MsgType::kPutAck ||
                    header.type == MsgType::kGetDone) &&
                   header.payload_len == 0;
    }
    return false;
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

bool decodeBufferList(const uint8_t* data, size_t size,
                      std::vector<RemoteBufferEntry>* entries) {
    const uint8_t* in = data;
    size_t left = size;
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

bool decodeBufferList(const std::string& payload,
                      std::vector<RemoteBufferEntry>* entries) {
    return decodeBufferList(reinterpret_cast<const uint8_t*>(payload.data()),
                            payload.size(), entries);
}

int sanitizeRemoteStatus(int32_t status) {
    if (status >= MPCOMM_ERR_NO_DEVICE && status <= MPCOMM_SUCCESS)
        return status;
    return MPCOMM_ERR_PROTOCOL;
}

size_t runWireDecoder(const uint8_t* data, size_t size) {
    // The listener's view of one connection, with small limits so that
    // payload bounds are reachable from short inputs.
    RequestLimits limits;
    limits.rails = 2;
    limits.max_slice = 1u << 20;
    ConnStage stage = ConnStage::kAwaitHello;
    size_t frames = 0;
    std::string why;
    for (size_t offset = 0; size - offset >= kHeaderSize;) {
        FrameHeader header;
        if (!decodeHeader(data + offset, &header) ||
            !checkRequest(stage, header, limits, &why))
            break;
        offset += kHeaderSize;
        if (header.payload_len > size - offset) break;  // truncated
        if (stage == ConnStage::kAwaitHello) {
            stage = stageAfterHello(header, limits.rails);
            if (stage == ConnStage::kAwaitHello) break;  // refused
        }
        offset += header.payload_len;
        ++frames;
    }
    frames += walkReplies(data, size, ConnStage::kControl);
    frames += walkReplies(data, size, ConnStage::kData);
    std::vector<RemoteBufferEntry> entries;
    if (decodeBufferList(data, size, &entries)) ++frames;
    return frames;
}

}  // namespace detail
}  // namespace mpcomm
