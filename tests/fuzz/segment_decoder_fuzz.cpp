// segmentFromJson on any JSON a peer could send, parsed by parseJsonText as
// the fetchers do: a descriptor it accepts holds only sane buffers
// (non-zero, non-wrapping), no more than metadata/max_segment_buffers of
// them, and round-trips through segmentToJson unchanged. The limits are set
// low (LLVMFuzzerInitialize) so that seeds of a few KiB reach the refusals.
#include <json/json.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>

#include "common/json_util.h"
#include "tent/runtime/segment.h"

namespace {

constexpr int kFuzzMaxBuffers = 64;

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    mooncake::tent::setMaxSegmentBuffers(kFuzzMaxBuffers);
    mooncake::tent::setMaxJsonValues(4096);
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace mooncake::tent;
    const std::string text(reinterpret_cast<const char*>(data), size);
    Json::Value value;
    std::string errs;
    if (!parseJsonText(text, true, value, errs)) {
        if (scanJsonShape(text).depth <= maxJsonDepth() &&
            errs.find("JSON nesting depth") != std::string::npos) {
            std::abort();  // refused for a depth it does not have
        }
        return 0;
    }
    SegmentDesc desc;
    if (!segmentFromJson(value, desc).ok()) return 0;
    if (desc.type == SegmentType::Memory &&
        desc.getMemory().buffers.size() > kFuzzMaxBuffers) {
        std::abort();
    }
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
