// Segment descriptors: what a peer needs to address this process's memory.
// Serialized as JSON between peers (p2p metadata RPC).
#pragma once

#include <json/json.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tent/common/status.h"
#include "tent/common/types.h"

namespace mooncake::tent {

struct BufferDesc {
    uint64_t addr = 0;
    uint64_t length = 0;
    Location location = kWildcardLocation;
    // Transports that registered this buffer, in registration order.
    std::vector<TransportType> transports;
};

struct MemorySegmentDesc {
    std::vector<BufferDesc> buffers;
    // Per-transport endpoint attributes, keyed by (int)TransportType;
    // e.g. MPCOMM -> "v1:10.0.0.1:13579", TCP -> "10.0.0.1:40123".
    std::map<int, std::string> transport_attrs;

    // Empty when the transport published nothing.
    std::string getTransportAttrs(TransportType type) const;
    // The registered buffer that wholly contains [addr, addr+length), or
    // nullptr.
    const BufferDesc* findBuffer(uint64_t addr, uint64_t length) const;
};

enum class SegmentType { Memory = 0, File = 1 };

struct SegmentDesc {
    std::string name;
    SegmentType type = SegmentType::Memory;
    MemorySegmentDesc memory;  // valid for SegmentType::Memory
};

using SegmentDescRef = std::shared_ptr<const SegmentDesc>;

Json::Value segmentToJson(const SegmentDesc& desc);
// Validates field types; a malformed descriptor is InvalidEntry naming the
// bad field.
Status segmentFromJson(const Json::Value& value, SegmentDesc& desc);

}  // namespace mooncake::tent
