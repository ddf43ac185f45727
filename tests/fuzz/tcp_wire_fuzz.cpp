// tcp_wire::decode for request and reply headers: an accepted header has a
// known magic, this build's wire version, a known op and a length within
// the 16 MiB frame cap, and encodes back to the same bytes (so its reserved
// bytes were zero).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "transport/tcp/tcp_wire.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace mooncake::tent::tcp_wire;
    if (size >= kRequestHeaderBytes) {
        RequestHeader h;
        if (decode(data, h).ok()) {
            if (h.magic != kRequestMagic || h.version != kTcpWireVersion ||
                data[4] != kTcpWireVersion || h.length > kMaxChunk ||
                (h.op != kOpRead && h.op != kOpWrite)) {
                std::abort();
            }
            unsigned char out[kRequestHeaderBytes];
            encode(h, out);
            if (std::memcmp(out, data, sizeof(out)) != 0) std::abort();
        }
    }
    if (size >= kReplyHeaderBytes) {
        ReplyHeader h;
        if (decode(data, h).ok()) {
            if (h.magic != kReplyMagic || h.version != kTcpWireVersion ||
                data[4] != kTcpWireVersion || h.length > kMaxChunk) {
                std::abort();
            }
            unsigned char out[kReplyHeaderBytes];
            encode(h, out);
            if (std::memcmp(out, data, sizeof(out)) != 0) std::abort();
        }
    }
    return 0;
}
