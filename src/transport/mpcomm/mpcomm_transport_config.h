// The MPComm transport's environment variables and configuration keys
// (private to the transport), each read and validated once by install().
#pragma once

#include <cstdint>
#include <string>

#include "tent/common/config.h"
#include "tent/common/status.h"

namespace mooncake::tent {

// Environment of the transport, read and validated once by install().
struct MpcommTransportEnv {
    static constexpr int kDefaultTcpPort = 13579;
    int tcp_port = kDefaultTcpPort;  // MPCOMM_TCP_PORT
    int remote_tcp_port = 0;         // MPCOMM_REMOTE_TCP_PORT; 0 = unset
    bool has_nic_filter = false;     // MPCOMM_NIC_FILTER set and non-empty
    std::string nic_filter;
    std::string advertise_address;  // MPCOMM_ADVERTISE_ADDR; "" = unset

    // Fails naming the variable and its value.
    static Status fromEnvironment(MpcommTransportEnv& env);
};

// The transport's configuration keys, validated once by install().
struct MpcommTransportSettings {
    static constexpr int64_t kDefaultConnectTimeoutMs = 10000;
    static constexpr int64_t kMaxConnectTimeoutMs = 3600000;
    // transports/mpcomm/connect_timeout_ms: the longest a submitting thread
    // waits for a peer's handshake and key query.
    int64_t connect_timeout_ms = kDefaultConnectTimeoutMs;
    // transports/mpcomm/preconnect: openSegment() starts the handshake.
    bool preconnect = true;
    // MPCOMM_ADVERTISE_ADDR, else transports/mpcomm/advertise_address, else
    // "" (the host part of the local segment name).
    std::string advertise_address;

    // Fails naming the key (or variable) and its value.
    static Status fromConfig(const Config* conf, const MpcommTransportEnv& env,
                             MpcommTransportSettings& settings);
};

}  // namespace mooncake::tent
