// The `policy` array of the configuration, parsed and checked into
// SelectionPolicy rules (private to libtent; TransportSelector's loader).
#pragma once

#include <json/json.h>

#include <vector>

#include "tent/common/status.h"
#include "tent/runtime/selection_policy_types.h"
#include "tent/runtime/topology.h"

namespace mooncake::tent {

// Every rule of `rules` (a JSON array), or an InvalidArgument naming the
// rule and the field at fault; `topology` resolves `devices` (null: no
// NICs). Nothing is returned in `out` on error.
Status parseSelectionPolicies(const Json::Value& rules,
                              const Topology* topology,
                              std::vector<SelectionPolicy>& out);

}  // namespace mooncake::tent
