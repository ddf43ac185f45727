// Config::loadText on arbitrary text, then the typed getters and the dump
// every engine reads; a loaded configuration must survive dump() and load
// back, and a second dump must be a fixed point (the first may normalise
// numbers and escapes).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "tent/common/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using mooncake::tent::Config;
    const std::string text(reinterpret_cast<const char*>(data), size);
    Config conf;
    if (!conf.loadText(text, "fuzz").ok()) return 0;
    for (const char* key :
         {"transports/tcp/enable", "transports/tcp/timeout_ms",
          "rpc/idle_timeout_ms", "metadata/cache_ttl_ms", "rpc_server_port",
          "a", "a/b/c", "//", ""}) {
        (void)conf.get(key, false);
        (void)conf.get(key, 7);
        (void)conf.get<int64_t>(key, -1);
        (void)conf.get<uint64_t>(key, 1);
        (void)conf.get(key, 0.5);
        (void)conf.get(key, "x");
        (void)conf.contains(key);
    }
    Config again, third;
    if (!again.loadText(conf.dump(), "dump").ok()) std::abort();
    const std::string dumped = again.dump();
    if (!third.loadText(dumped, "dump").ok() || third.dump() != dumped) {
        std::abort();
    }
    return 0;
}
