// A `policy` rule as the selector applies it, and the memory kinds its
// local_memory/remote_memory filters name. Shared by the rule parser
// (src/runtime/selection_policy.*) and TransportSelector, neither of which
// includes the other's header.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tent/common/types.h"

namespace mooncake::tent {

// Where a buffer lives, as a policy rule's local_memory/remote_memory
// names it: kVram is every device kind of parseMemoryLocation().
enum class MemoryKind { kDram, kVram };

struct SelectionPolicy {
    std::string name;
    std::string segment_type;  // "" = any
    std::optional<bool> same_machine;
    std::optional<MemoryKind> local_memory;  // nullopt = any
    std::optional<MemoryKind> remote_memory;
    std::optional<uint64_t> min_size;
    std::optional<uint64_t> max_size;
    std::optional<int> priority;  // exact match with Request::priority
    // NIC names of the local topology, and the transports that run on
    // them (RDMA NICs: mpcomm; TCP NICs: tcp); empty = no restriction.
    std::vector<std::string> devices;
    std::vector<TransportType> device_transports;
    std::vector<TransportType> transports;  // empty = the buffer's order
    std::optional<IntentType> intent_type;
};

}  // namespace mooncake::tent
