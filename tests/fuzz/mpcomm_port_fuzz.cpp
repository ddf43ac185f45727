// parseMpcommTcpPort: whatever it accepts is all decimal digits (leading
// zeros allowed) whose value is the port, in 1..65535; a refusal names the
// rule.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "tent/transport/mpcomm/mpcomm_peer_registry.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string text(reinterpret_cast<const char*>(data), size);
    int port = -1;
    mooncake::tent::Status s = mooncake::tent::parseMpcommTcpPort(text, port);
    if (s.ok()) {
        size_t first = text.find_first_not_of('0');
        if (port < 1 || port > 65535 || first == std::string::npos ||
            text.find_first_not_of("0123456789") != std::string::npos ||
            text.substr(first) != std::to_string(port)) {
            std::abort();
        }
    } else if (s.message().find("invalid MPComm TCP port") ==
               std::string::npos) {
        std::abort();
    }
    return 0;
}
