// segmentFromJson on any JSON a peer could send: a descriptor it accepts
// holds only sane buffers (non-zero, non-wrapping) and round-trips through
// segmentToJson unchanged.
#include <json/json.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>

#include "tent/runtime/segment.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace mooncake::tent;
    Json::CharReaderBuilder builder;
    std::unique_ptr<Json::CharReader> reader(builder.newCharReader());
    const char* text = reinterpret_cast<const char*>(data);
    Json::Value value;
    std::string errs;
    if (!reader->parse(text, text + size, &value, &errs)) return 0;
    SegmentDesc desc;
    if (!segmentFromJson(value, desc).ok()) return 0;
    if (desc.type == SegmentType::Memory) {
        for (const BufferDesc& b : desc.getMemory().buffers) {
            if (b.addr == 0 || b.length == 0 ||
                b.length - 1 > UINT64_MAX - b.addr) {
                std::abort();
            }
            if (desc.findBuffer(b.addr, b.length) == nullptr) std::abort();
        }
    }
    SegmentDesc again;
    Json::Value json = segmentToJson(desc);
    if (!segmentFromJson(json, again).ok() || segmentToJson(again) != json) {
        std::abort();
    }
    return 0;
}
