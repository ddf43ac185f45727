// The range checks of integer settings, with the one error wording the
// config keys share: the key, the allowed range and the value read (private
// to libtent).
#pragma once

#include <cstdint>
#include <string>

#include "tent/common/status.h"

namespace mooncake::tent {

// OK when value > 0, else InvalidArgument "KEY must be positive, got V".
Status checkPositive(const std::string& key, int64_t value);

// OK when lo <= value <= hi, else InvalidArgument
// "KEY must be in [LO, HI], got V".
Status checkInRange(const std::string& key, int64_t value, int64_t lo,
                    int64_t hi);

}  // namespace mooncake::tent
