#include "common/range_check.h"

namespace mooncake::tent {

Status checkPositive(const std::string& key, int64_t value) {
    if (value > 0) return Status::OK();
    return Status::InvalidArgument(key + " must be positive, got " +
                                   std::to_string(value));
}

Status checkInRange(const std::string& key, int64_t value, int64_t lo,
                    int64_t hi) {
    if (value >= lo && value <= hi) return Status::OK();
    return Status::InvalidArgument(key + " must be in [" + std::to_string(lo) +
                                   ", " + std::to_string(hi) + "], got " +
                                   std::to_string(value));
}

}  // namespace mooncake::tent
