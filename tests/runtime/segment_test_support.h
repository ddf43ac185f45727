// Shared by the segment suites (segment_desc_test.cpp,
// segment_manager_test.cpp): a host buffer descriptor reachable over tcp
// and mpcomm.
#pragma once

#include <cstdint>

#include "tent/runtime/segment.h"

namespace mooncake::tent::testing {

inline BufferDesc makeBuffer(uint64_t addr, uint64_t length) {
    BufferDesc b;
    b.addr = addr;
    b.length = length;
    b.location = "cpu:0";
    b.transports = {TCP, MPCOMM};
    return b;
}

}  // namespace mooncake::tent::testing
