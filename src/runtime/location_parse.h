// The checks every Platform::allocate() starts with (private header); the
// location parser itself is include/tent/runtime/memory_location.h.
#pragma once

#include <cstddef>

#include "tent/common/status.h"
#include "tent/common/types.h"
#include "tent/runtime/memory_location.h"

namespace mooncake::tent {

// `ptr` not null, `size` not zero, then parseMemoryLocation().
Status checkAllocation(void** ptr, size_t size, const Location& location,
                       MemoryLocation* out);

}  // namespace mooncake::tent
