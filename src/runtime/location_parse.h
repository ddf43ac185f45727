// Parsing of location strings ("cpu:N", "cuda:N", "*"), shared by the
// platforms and registration so that every one accepts the same spellings.
#pragma once

#include <cstddef>
#include <string>

#include "tent/common/status.h"
#include "tent/common/types.h"

namespace mooncake::tent {

struct ParsedLocation {
    bool wildcard = false;  // "*": anywhere in host memory
    bool device = false;    // "cuda:N"
    int index = 0;          // N; 0 for "*" and a bare "cpu"
};

// Accepts "*", "cpu", "cpu:N" and "cuda:N" (N a decimal below 2^16);
// anything else is InvalidArgument naming the location.
Status parseLocation(const Location& location, ParsedLocation& out);

// The checks every Platform::allocate() starts with: `ptr` not null, `size`
// not zero, then parseLocation().
Status checkAllocation(void** ptr, size_t size, const Location& location,
                       ParsedLocation& out);

}  // namespace mooncake::tent
