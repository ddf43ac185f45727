// Where a buffer's memory lives, read from its location string. This is the
// one place that decides it: the platforms, registration, the selector, the
// policy and every transport ask parseMemoryLocation(), so that a location
// is host memory to all of them or device memory to all of them.
//
// Spellings (N a decimal below 2^16):
//   "*"                    host memory, node unknown (wildcard)
//   "cpu", "cpu:N"         host memory (N: the NUMA node)
//   "cuda:N", "rocm:N",    device memory of that kind (N: the device)
//   "musa:N", "npu:N"
// Anything else is refused by name. A device kind needs its index.
#pragma once

#include <string>
#include <string_view>

#include "tent/common/status.h"

namespace mooncake::tent {

enum class MemoryLocationKind { kHost, kCuda, kRocm, kMusa, kNpu };

struct MemoryLocation {
    MemoryLocationKind kind = MemoryLocationKind::kHost;
    int index = 0;          // N; 0 for "*" and a bare "cpu"
    bool wildcard = false;  // "*"

    bool device() const { return kind != MemoryLocationKind::kHost; }
};

// The kind's spelling: "cpu", "cuda", "rocm", "musa", "npu".
const char* memoryLocationKindName(MemoryLocationKind kind);

// Parses `location` into `out`. On an unknown kind or a malformed index it
// returns InvalidArgument naming the location and leaves `out` a wildcard
// host location.
Status parseMemoryLocation(std::string_view location, MemoryLocation* out);

// True only for a location that parses and names device memory; callers
// that have already refused unparsable locations use it on the hot path.
bool isDeviceMemoryLocation(std::string_view location);

}  // namespace mooncake::tent
