// Location strings: one parser for the platforms and registration.
#include "runtime/location_parse.h"

#include <cctype>

namespace mooncake::tent {

namespace {

// Reads the decimal after "<kind>:"; false when absent, not all digits or
// out of range.
bool parseIndex(const std::string& digits, int& out) {
    if (digits.empty() || digits.size() > 5) return false;
    int value = 0;
    for (char c : digits) {
        if (!std::isdigit(static_cast<unsigned char>(c))) return false;
        value = value * 10 + (c - '0');
    }
    if (value > 65535) return false;
    out = value;
    return true;
}

}  // namespace

Status parseLocation(const Location& location, ParsedLocation& out) {
    out = ParsedLocation{};
    if (location == kWildcardLocation) {
        out.wildcard = true;
        return Status::OK();
    }
    if (location == "cpu") return Status::OK();
    if (location.rfind("cpu:", 0) == 0 &&
        parseIndex(location.substr(4), out.index)) {
        return Status::OK();
    }
    if (location.rfind("cuda:", 0) == 0 &&
        parseIndex(location.substr(5), out.index)) {
        out.device = true;
        return Status::OK();
    }
    return Status::InvalidArgument(
        "location \"" + location +
        "\" is not one of \"*\", \"cpu:<numa node>\", \"cuda:<device>\"");
}

Status checkAllocation(void** ptr, size_t size, const Location& location,
                       ParsedLocation& out) {
    if (!ptr) return Status::InvalidArgument("allocate: ptr is null");
    if (size == 0) {
        return Status::InvalidArgument("allocate: size is zero");
    }
    return parseLocation(location, out);
}

}  // namespace mooncake::tent
