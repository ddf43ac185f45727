// Location strings: the one parser (include/tent/runtime/memory_location.h)
// and the checks every Platform::allocate() starts with.
#include "runtime/location_parse.h"

#include "tent/common/types.h"

namespace mooncake::tent {

namespace {

struct KindSpelling {
    std::string_view name;
    MemoryLocationKind kind;
};

// Host first: it is what nearly every request names.
constexpr KindSpelling kKinds[] = {
    {"cpu", MemoryLocationKind::kHost},  {"cuda", MemoryLocationKind::kCuda},
    {"rocm", MemoryLocationKind::kRocm}, {"musa", MemoryLocationKind::kMusa},
    {"npu", MemoryLocationKind::kNpu},
};

constexpr int kMaxIndex = 65535;

// Reads the decimal after "<kind>:"; false when absent, not all digits or
// above kMaxIndex.
bool parseIndex(std::string_view digits, int* out) {
    if (digits.empty() || digits.size() > 5) return false;
    int value = 0;
    for (char c : digits) {
        if (c < '0' || c > '9') return false;
        value = value * 10 + (c - '0');
    }
    if (value > kMaxIndex) return false;
    *out = value;
    return true;
}

Status refuse(std::string_view location) {
    // A location from a peer or a caller may be anything; quote at most a
    // bounded prefix of it.
    constexpr size_t kQuoted = 64;
    std::string shown(location.substr(0, kQuoted));
    if (location.size() > kQuoted) {
        shown += "...(" + std::to_string(location.size()) + " bytes)";
    }
    return Status::InvalidArgument(
        "location \"" + shown +
        "\" is not one of \"*\", \"cpu\", \"cpu:<numa node>\", "
        "\"cuda:<device>\", \"rocm:<device>\", \"musa:<device>\", "
        "\"npu:<device>\"");
}

}  // namespace

const char* memoryLocationKindName(MemoryLocationKind kind) {
    for (const KindSpelling& k : kKinds) {
        if (k.kind == kind) return k.name.data();
    }
    return "unknown";
}

Status parseMemoryLocation(std::string_view location, MemoryLocation* out) {
    *out = MemoryLocation{};
    if (location == kWildcardLocation) {
        out->wildcard = true;
        return Status::OK();
    }
    const size_t colon = location.find(':');
    const std::string_view type = location.substr(0, colon);
    for (const KindSpelling& k : kKinds) {
        if (type != k.name) continue;
        // Only host memory has a default place ("cpu": node unknown); a
        // device kind without its index would leave the device to guess.
        if (colon == std::string_view::npos) {
            if (k.kind != MemoryLocationKind::kHost) break;
            return Status::OK();
        }
        int index = 0;
        if (!parseIndex(location.substr(colon + 1), &index)) break;
        out->kind = k.kind;
        out->index = index;
        return Status::OK();
    }
    out->wildcard = true;
    return refuse(location);
}

bool isDeviceMemoryLocation(std::string_view location) {
    MemoryLocation where;
    return parseMemoryLocation(location, &where).ok() && where.device();
}

Status checkAllocation(void** ptr, size_t size, const Location& location,
                       MemoryLocation* out) {
    if (!ptr) return Status::InvalidArgument("allocate: ptr is null");
    if (size == 0) {
        return Status::InvalidArgument("allocate: size is zero");
    }
    return parseMemoryLocation(location, out);
}

}  // namespace mooncake::tent
