// The MPComm transport's environment variables and configuration keys, each
// validated once by install(); an error names the variable or key and the
// rejected value.
#include "mpcomm_transport_config.h"

#include <cstdint>
#include <cstdlib>
#include <limits>
#include <string>

#include "tent/transport/mpcomm/mpcomm_peer_registry.h"

namespace mooncake::tent {

namespace {

constexpr const char kConnectTimeoutKey[] =
    "transports/mpcomm/connect_timeout_ms";
constexpr const char kPreconnectKey[] = "transports/mpcomm/preconnect";
constexpr const char kAdvertiseKey[] = "transports/mpcomm/advertise_address";

Status readPortVariable(const char* name, int& port) {
    const char* value = std::getenv(name);
    if (value == nullptr) return Status::OK();
    Status st = parseMpcommTcpPort(value, port);
    if (!st.ok()) {
        return Status::InvalidArgument(std::string(name) + ": " +
                                       std::string(st.message()));
    }
    return Status::OK();
}

// A present key whose value is not an integer in [1, kMaxConnectTimeoutMs]
// is an error; Config::get() alone would silently fall back to the default.
Status readConnectTimeout(const Config& conf, int64_t& timeout_ms) {
    if (!conf.contains(kConnectTimeoutKey)) return Status::OK();
    constexpr int64_t kNotAnInteger = std::numeric_limits<int64_t>::min();
    int64_t value = conf.get<int64_t>(kConnectTimeoutKey, kNotAnInteger);
    if (value == kNotAnInteger) {
        std::string text = conf.get<std::string>(kConnectTimeoutKey, "");
        return Status::InvalidArgument(
            std::string(kConnectTimeoutKey) +
            " must be an integer number of "
            "milliseconds in 1.." +
            std::to_string(MpcommTransportSettings::kMaxConnectTimeoutMs) +
            ", got " +
            (text.empty() ? "a non-integer value" : "'" + text + "'"));
    }
    if (value < 1 || value > MpcommTransportSettings::kMaxConnectTimeoutMs) {
        return Status::InvalidArgument(
            std::string(kConnectTimeoutKey) + " must be in 1.." +
            std::to_string(MpcommTransportSettings::kMaxConnectTimeoutMs) +
            " ms, got " + std::to_string(value));
    }
    timeout_ms = value;
    return Status::OK();
}

}  // namespace

Status MpcommTransportEnv::fromEnvironment(MpcommTransportEnv& env) {
    MpcommTransportEnv parsed;
    CHECK_STATUS(readPortVariable("MPCOMM_TCP_PORT", parsed.tcp_port));
    CHECK_STATUS(
        readPortVariable("MPCOMM_REMOTE_TCP_PORT", parsed.remote_tcp_port));
    const char* filter = std::getenv("MPCOMM_NIC_FILTER");
    if (filter != nullptr && *filter != '\0') {
        parsed.has_nic_filter = true;
        parsed.nic_filter = filter;
    }
    const char* advertise = std::getenv("MPCOMM_ADVERTISE_ADDR");
    if (advertise != nullptr) {
        Status st =
            parseMpcommAdvertiseAddress(advertise, parsed.advertise_address);
        if (!st.ok()) {
            return Status::InvalidArgument("MPCOMM_ADVERTISE_ADDR: " +
                                           std::string(st.message()));
        }
    }
    env = parsed;
    return Status::OK();
}

Status MpcommTransportSettings::fromConfig(const Config* conf,
                                           const MpcommTransportEnv& env,
                                           MpcommTransportSettings& settings) {
    MpcommTransportSettings parsed;
    if (conf != nullptr) {
        CHECK_STATUS(readConnectTimeout(*conf, parsed.connect_timeout_ms));
        parsed.preconnect = conf->get(kPreconnectKey, true);
        std::string advertise = conf->get(kAdvertiseKey, "");
        if (conf->contains(kAdvertiseKey)) {
            Status st = parseMpcommAdvertiseAddress(advertise,
                                                    parsed.advertise_address);
            if (!st.ok()) {
                return Status::InvalidArgument(std::string(kAdvertiseKey) +
                                               ": " +
                                               std::string(st.message()));
            }
        }
    }
    // The variable wins over the key, as the guide's variables do.
    if (!env.advertise_address.empty()) {
        parsed.advertise_address = env.advertise_address;
    }
    settings = parsed;
    return Status::OK();
}

}  // namespace mooncake::tent
