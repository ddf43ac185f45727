// Engines on a metadata store, for tent_store_engine_test and the target
// child it starts (TargetOptions::metadata_type, kit/target_main.cpp): the
// engine configuration, and pattern helpers over the kit's one buffer
// pattern (patternByte, kit/two_process_fixture.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "kit/engine_config.h"
#include "kit/two_process_fixture.h"
#include "tent/transfer_engine.h"

namespace mooncake::tent::testing {

inline void fillPattern(void* buf, size_t size, uint8_t seed) {
    auto* bytes = static_cast<uint8_t*>(buf);
    for (size_t i = 0; i < size; ++i) bytes[i] = patternByte(i, seed);
}

// The first index in [0, size) that is not pattern `seed`; size when none.
inline size_t firstMismatch(const void* buf, size_t size, uint8_t seed,
                            size_t pattern_offset = 0) {
    auto* bytes = static_cast<const uint8_t*>(buf);
    for (size_t i = 0; i < size; ++i) {
        if (bytes[i] != patternByte(pattern_offset + i, seed)) return i;
    }
    return size;
}

// An engine on loopback over `type` at `servers`, named `name` ("" = the
// default host:port name), with `xport` its only transport and `ttl_ms`
// its key's TTL (0: the engine's default).
inline std::shared_ptr<Config> storeEngineConfig(const std::string& type,
                                                 const std::string& servers,
                                                 const std::string& name,
                                                 TransportType xport,
                                                 int ttl_ms) {
    auto conf = onlyTransport(xport);
    conf->set("metadata_type", type);
    conf->set("metadata_servers", servers);
    if (!name.empty()) conf->set("local_segment_name", name);
    if (ttl_ms != 0) conf->set("metadata/ttl_ms", ttl_ms);
    return conf;
}

}  // namespace mooncake::tent::testing
