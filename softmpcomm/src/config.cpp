#include "config.h"

#include <cstdlib>
#include <limits>

namespace mpcomm {
namespace detail {

namespace {

const char* kDefaultRail = "soft0";

std::string trim(const std::string& text) {
    const char* blanks = " \t\r\n";
    size_t begin = text.find_first_not_of(blanks);
    if (begin == std::string::npos) return "";
    size_t end = text.find_last_not_of(blanks);
    return text.substr(begin, end - begin + 1);
}

// Returns true when the variable is unset; otherwise parses it and checks
// [min, max], describing a rejected value in *error.
bool readBoundedEnv(const char* name, uint64_t min, uint64_t max,
                    uint64_t* value, std::string* error) {
    const char* raw = std::getenv(name);
    if (raw == nullptr) return true;
    uint64_t parsed = 0;
    if (!parseUnsigned(trim(raw), &parsed) || parsed < min || parsed > max) {
        *error = std::string("invalid ") + name + "='" + raw +
                 "' (expected an integer in [" + std::to_string(min) + ", " +
                 std::to_string(max) + "])";
        return false;
    }
    *value = parsed;
    return true;
}

}  // namespace

std::vector<std::string> splitRailList(const std::string& list) {
    std::vector<std::string> names;
    size_t start = 0;
    while (start <= list.size()) {
        size_t comma = list.find(',', start);
        if (comma == std::string::npos) comma = list.size();
        std::string name = trim(list.substr(start, comma - start));
        if (!name.empty()) names.push_back(name);
        start = comma + 1;
    }
    return names;
}

bool parseUnsigned(const std::string& text, uint64_t* value) {
    if (text.empty() || text.size() > 20) return false;
    uint64_t result = 0;
    for (char c : text) {
        if (c < '0' || c > '9') return false;
        uint64_t digit = static_cast<uint64_t>(c - '0');
        if (result > (std::numeric_limits<uint64_t>::max() - digit) / 10)
            return false;
        result = result * 10 + digit;
    }
    *value = result;
    return true;
}

bool loadConfig(const std::string& device_names, Config* config,
                std::string* error) {
    Config result;
    const char* filter = std::getenv("MPCOMM_NIC_FILTER");
    result.rails = splitRailList(filter != nullptr ? filter : device_names);
    if (result.rails.empty()) result.rails.push_back(kDefaultRail);

    uint64_t qps = kDefaultQpsPerConnection;
    if (!readBoundedEnv("MPCOMM_QPS_PER_CONNECTION", 1, kMaxQpsPerConnection,
                        &qps, error))
        return false;
    result.qps_per_connection = static_cast<int>(qps);

    uint64_t outstanding = kDefaultMaxOutstandingPerQp;
    if (!readBoundedEnv("MPCOMM_MAX_OUTSTANDING_PER_QP", 1,
                        kMaxMaxOutstandingPerQp, &outstanding, error))
        return false;
    result.max_outstanding_per_qp = static_cast<int>(outstanding);

    // The upper bound only keeps slice arithmetic far from overflow.
    uint64_t max_size = kDefaultMaxTransferSize;
    if (!readBoundedEnv("MPCOMM_MAX_RDMA_TRANSFER_SIZE", 1, 1ull << 48,
                        &max_size, error))
        return false;
    result.max_transfer_size = max_size;

    struct TimeoutVar {
        const char* name;
        int* field;
    };
    for (const TimeoutVar& var :
         {TimeoutVar{"SOFTMPCOMM_PROGRESS_TIMEOUT_MS",
                     &result.progress_timeout_ms},
          TimeoutVar{"SOFTMPCOMM_HANDSHAKE_TIMEOUT_MS",
                     &result.handshake_timeout_ms},
          TimeoutVar{"SOFTMPCOMM_IDLE_TIMEOUT_MS", &result.idle_timeout_ms}}) {
        uint64_t ms = static_cast<uint64_t>(*var.field);
        if (!readBoundedEnv(var.name, 1, kMaxTimeoutMs, &ms, error))
            return false;
        *var.field = static_cast<int>(ms);
    }

    uint64_t max_connections = kDefaultMaxConnections;
    if (!readBoundedEnv("SOFTMPCOMM_MAX_CONNECTIONS", 1, kMaxMaxConnections,
                        &max_connections, error))
        return false;
    result.max_connections = static_cast<int>(max_connections);

    uint64_t send_buffer = kDefaultSendBufferBytes;
    std::string ignored;
    if (!readBoundedEnv("SOFTMPCOMM_SEND_BUFFER_BYTES", 0, kMaxSendBufferBytes,
                        &send_buffer, &ignored) ||
        (send_buffer != 0 && send_buffer < kMinSendBufferBytes)) {
        *error = std::string("invalid SOFTMPCOMM_SEND_BUFFER_BYTES='") +
                 std::getenv("SOFTMPCOMM_SEND_BUFFER_BYTES") +
                 "' (expected 0 or an integer in [" +
                 std::to_string(kMinSendBufferBytes) + ", " +
                 std::to_string(kMaxSendBufferBytes) + "])";
        return false;
    }
    result.send_buffer_bytes = static_cast<int>(send_buffer);

    *config = result;
    return true;
}

}  // namespace detail
}  // namespace mpcomm
