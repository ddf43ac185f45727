#include "tent/common/types.h"

#include <algorithm>
#include <cctype>

namespace mooncake::tent {

namespace {

// Indexed by TransportType; every value up to the sentinel has a name so
// that parseTransportType() is the exact inverse of transportTypeName().
constexpr const char* kTransportNames[kSupportedTransportTypes] = {
    "unspec", "rdma",     "mnnvl",  "shm",           "nvlink",
    "gds",    "io_uring", "tcp",    "ascend_direct", "sunrise_link",
    "tpu",    "ub",       "mpcomm",
};

// Spellings accepted on input besides the canonical names.
struct Alias {
    const char* name;
    TransportType type;
};
constexpr Alias kAliases[] = {
    {"iouring", IOURING},
    {"ascend", AscendDirect},
};

}  // namespace

const char* transportTypeName(TransportType type) {
    int index = static_cast<int>(type);
    if (index < 0 || index >= kSupportedTransportTypes) return "unspec";
    return kTransportNames[index];
}

TransportType parseTransportType(const std::string& name) {
    std::string lower(name);
    std::transform(lower.begin(), lower.end(), lower.begin(),
                   [](unsigned char c) { return std::tolower(c); });
    for (int i = 0; i < kSupportedTransportTypes; ++i) {
        if (lower == kTransportNames[i]) return static_cast<TransportType>(i);
    }
    for (const Alias& alias : kAliases) {
        if (lower == alias.name) return alias.type;
    }
    return UNSPEC;
}

const char* transferStatusName(TransferStatusEnum s) {
    switch (s) {
        case INITIAL:
            return "INITIAL";
        case PENDING:
            return "PENDING";
        case INVALID:
            return "INVALID";
        case CANCELED:
            return "CANCELED";
        case COMPLETED:
            return "COMPLETED";
        case TIMEOUT:
            return "TIMEOUT";
        case FAILED:
            return "FAILED";
    }
    return "UNKNOWN";
}

}  // namespace mooncake::tent
