// makeRequest: the one way the suites build a transfer Request, so that a
// field added to Request is defaulted in one place. Fixtures wrap it with
// their own buffers (their source base, their peer's address). And
// oneBufferSegment: the target descriptor a selection test routes into.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "tent/common/types.h"
#include "tent/runtime/segment.h"

namespace mooncake::tent::testing {

// `length` bytes between `source` and `target_offset` (an address in
// segment `target`'s address space); `hint` UNSPEC leaves the choice of
// transport to the policy.
inline Request makeRequest(Request::OpCode op, void* source, SegmentID target,
                           uint64_t target_offset, size_t length,
                           TransportType hint = UNSPEC) {
    Request r;
    r.opcode = op;
    r.source = source;
    r.target_id = target;
    r.target_offset = target_offset;
    r.length = length;
    r.transport_hint = hint;
    return r;
}

// A memory segment `name` with one buffer [addr, addr + length) that lists
// `transports` in that order.
inline SegmentDesc oneBufferSegment(std::string name,
                                    std::vector<TransportType> transports,
                                    uint64_t addr = 0x10000,
                                    uint64_t length = 0x1000) {
    SegmentDesc desc;
    desc.name = std::move(name);
    desc.type = SegmentType::Memory;
    BufferDesc buffer;
    buffer.addr = addr;
    buffer.length = length;
    buffer.transports = std::move(transports);
    desc.getMemory().buffers.push_back(buffer);
    return desc;
}

}  // namespace mooncake::tent::testing
