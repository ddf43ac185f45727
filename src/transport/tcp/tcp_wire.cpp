#include "transport/tcp/tcp_wire.h"

#include <sstream>

namespace mooncake::tent::tcp_wire {

namespace {

void put16(unsigned char* p, uint32_t v) {
    p[0] = static_cast<unsigned char>(v >> 8);
    p[1] = static_cast<unsigned char>(v);
}
void put32(unsigned char* p, uint32_t v) {
    for (int i = 3; i >= 0; --i, v >>= 8) p[i] = static_cast<unsigned char>(v);
}
void put64(unsigned char* p, uint64_t v) {
    for (int i = 7; i >= 0; --i, v >>= 8) p[i] = static_cast<unsigned char>(v);
}
uint32_t get16(const unsigned char* p) { return (uint32_t(p[0]) << 8) | p[1]; }
uint32_t get32(const unsigned char* p) {
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v = (v << 8) | p[i];
    return v;
}
uint64_t get64(const unsigned char* p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v = (v << 8) | p[i];
    return v;
}

std::string hex(uint64_t v) {
    std::ostringstream os;
    os << "0x" << std::hex << v;
    return os.str();
}

Status checkVersion(const char* what, uint8_t version) {
    if (version == kTcpWireVersion) return Status::OK();
    return Status::InvalidEntry(
        std::string(what) + " frame version " + std::to_string(version) +
        ", expected version " + std::to_string(kTcpWireVersion));
}

}  // namespace

void encode(const RequestHeader& h, unsigned char* out) {
    put32(out, h.magic);
    out[4] = h.version;
    out[5] = static_cast<unsigned char>(h.op);
    put16(out + 6, 0);
    put64(out + 8, h.addr);
    put64(out + 16, h.length);
}

void encode(const ReplyHeader& h, unsigned char* out) {
    put32(out, h.magic);
    out[4] = h.version;
    out[5] = 0;
    put16(out + 6, h.code);
    put64(out + 8, h.length);
}

Status decode(const unsigned char* in, RequestHeader& h) {
    h.magic = get32(in);
    if (h.magic != kRequestMagic) {
        return Status::InvalidEntry("bad request magic " + hex(h.magic));
    }
    h.version = in[4];
    CHECK_STATUS(checkVersion("request", h.version));
    h.op = in[5];
    h.addr = get64(in + 8);
    h.length = get64(in + 16);
    const uint32_t reserved = get16(in + 6);
    if (reserved != 0) {
        return Status::InvalidEntry("request reserved bytes " + hex(reserved) +
                                    " are not zero");
    }
    if (h.op != kOpRead && h.op != kOpWrite) {
        return Status::InvalidEntry("bad request op " + std::to_string(h.op));
    }
    if (h.length > kMaxChunk) {
        return Status::InvalidEntry(
            "request length " + std::to_string(h.length) +
            " exceeds the frame cap " + std::to_string(kMaxChunk));
    }
    return Status::OK();
}

Status decode(const unsigned char* in, ReplyHeader& h) {
    h.magic = get32(in);
    if (h.magic != kReplyMagic) {
        return Status::InvalidEntry("bad reply magic " + hex(h.magic));
    }
    h.version = in[4];
    CHECK_STATUS(checkVersion("reply", h.version));
    h.code = get16(in + 6);
    h.length = get64(in + 8);
    if (in[5] != 0) {
        return Status::InvalidEntry("reply reserved byte " + hex(in[5]) +
                                    " is not zero");
    }
    if (h.length > kMaxChunk) {
        return Status::InvalidEntry("reply length " + std::to_string(h.length) +
                                    " exceeds the frame cap " +
                                    std::to_string(kMaxChunk));
    }
    return Status::OK();
}

}  // namespace mooncake::tent::tcp_wire
