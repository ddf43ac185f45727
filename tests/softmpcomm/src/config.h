// The MPCOMM_* environment variables softmpcomm honours, read and validated
// once per init() so a bad value fails initialisation instead of being
// silently replaced by a default.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace mpcomm {
namespace detail {

constexpr int kMaxQpsPerConnection = 16;
constexpr uint64_t kDefaultMaxTransferSize = 1ull << 30;  // 1 GiB

struct Config {
    std::vector<std::string> rails;  // never empty after loadConfig()
    int qps_per_connection = 1;
    uint64_t max_transfer_size = kDefaultMaxTransferSize;
};

// Splits a comma list, trimming blanks and dropping empty names.
std::vector<std::string> splitRailList(const std::string& list);

// Parses a decimal unsigned integer; false for empty, signs, junk or overflow.
bool parseUnsigned(const std::string& text, uint64_t* value);

// Builds the configuration from device_names and the environment. On failure
// returns false and fills *error with a message naming the bad value.
bool loadConfig(const std::string& device_names, Config* config,
                std::string* error);

}  // namespace detail
}  // namespace mpcomm
