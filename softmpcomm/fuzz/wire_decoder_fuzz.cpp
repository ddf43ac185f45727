// libFuzzer target for softmpcomm's wire decoder: header decoding, the
// per-type request and reply checks and the buffer-list decoder, driven over
// arbitrary bytes without sockets (wire.h runWireDecoder). Built only with
// -DSOFTMPCOMM_FUZZ=ON and clang; see ../README.md.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "wire.h"

using namespace mpcomm::detail;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    runWireDecoder(data, size);
    // Whatever decodes must encode back to the same bytes: a field the
    // decoder drops or mangles would otherwise pass unnoticed.
    if (size >= kHeaderSize) {
        FrameHeader header;
        if (decodeHeader(data, &header)) {
            uint8_t again[kHeaderSize];
            encodeHeader(header, again);
            if (std::memcmp(again, data, kHeaderSize) != 0) __builtin_trap();
        }
    }
    std::vector<mpcomm::RemoteBufferEntry> entries;
    if (decodeBufferList(data, size, &entries)) {
        std::string again = encodeBufferList(entries);
        if (again.size() != size || std::memcmp(again.data(), data, size) != 0)
            __builtin_trap();
    }
    return 0;
}
