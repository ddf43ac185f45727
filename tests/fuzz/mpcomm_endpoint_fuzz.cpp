// parseMpcommEndpointAttr: an accepted attribute yields a non-empty host
// and a port in 1..65535, and building the attribute back from them parses
// to the same pair.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "tent/transport/mpcomm/mpcomm_peer_registry.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace mooncake::tent;
    const std::string attr(reinterpret_cast<const char*>(data), size);
    std::string host;
    int port = -1;
    if (!parseMpcommEndpointAttr(attr, host, port).ok()) return 0;
    if (host.empty() || port < 1 || port > 65535) std::abort();
    std::string rebuilt = buildMpcommEndpointAttr(host + ":1", port);
    std::string host2;
    int port2 = -1;
    if (!parseMpcommEndpointAttr(rebuilt, host2, port2).ok() || host2 != host ||
        port2 != port) {
        std::abort();
    }
    return 0;
}
