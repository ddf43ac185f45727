// Shared by tent_store_engine_test and its target process
// (tests/runtime/store_target_main.cpp): the engine configuration on a
// metadata store, and the buffer pattern both sides check.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "tent/transfer_engine.h"

namespace mooncake::tent::testing {

constexpr size_t kStoreBufferSize = 1u << 20;

inline uint8_t storePatternByte(size_t i, uint8_t seed) {
    return static_cast<uint8_t>((i * 131 + seed) ^ (i >> 9));
}

inline void fillPattern(void* buf, size_t size, uint8_t seed) {
    auto* bytes = static_cast<uint8_t*>(buf);
    for (size_t i = 0; i < size; ++i) bytes[i] = storePatternByte(i, seed);
}

// The first index in [0, size) that is not pattern `seed`; size when none.
inline size_t firstMismatch(const void* buf, size_t size, uint8_t seed,
                            size_t pattern_offset = 0) {
    auto* bytes = static_cast<const uint8_t*>(buf);
    for (size_t i = 0; i < size; ++i) {
        if (bytes[i] != storePatternByte(pattern_offset + i, seed)) return i;
    }
    return size;
}

// An engine on loopback over `type` at `servers`, named `name` ("" = the
// default host:port name), with `xport` its only transport and `ttl_ms`
// its key's TTL.
inline std::shared_ptr<Config> storeEngineConfig(const std::string& type,
                                                 const std::string& servers,
                                                 const std::string& name,
                                                 TransportType xport,
                                                 int ttl_ms) {
    auto conf = std::make_shared<Config>();
    conf->set("metadata_type", type);
    conf->set("metadata_servers", servers);
    if (!name.empty()) conf->set("local_segment_name", name);
    conf->set("rpc_server_hostname", std::string("127.0.0.1"));
    conf->set("metadata/ttl_ms", ttl_ms);
    for (const char* transport : {"tcp", "mpcomm", "rdma", "shm", "nvlink",
                                  "mnnvl", "gds", "io_uring"}) {
        conf->set(std::string("transports/") + transport + "/enable",
                  parseTransportType(transport) == xport);
    }
    return conf;
}

}  // namespace mooncake::tent::testing
