// Engine configurations and texts the suites share: an engine on loopback
// with one transport, and a buffer as the engine names it in errors.
#pragma once

#include <memory>
#include <sstream>
#include <string>

#include "tent/common/config.h"
#include "tent/transfer_engine.h"

namespace mooncake::tent::testing {

// Loopback RPC, `xport` enabled and every other transport disabled (a
// transport this build lacks is listed too, so that a suite keeps meaning
// one transport when more are built).
inline std::shared_ptr<Config> onlyTransport(TransportType xport) {
    auto conf = std::make_shared<Config>();
    conf->set("rpc_server_hostname", std::string("127.0.0.1"));
    for (const char* name : {"tcp", "mpcomm", "rdma", "shm", "nvlink", "mnnvl",
                             "gds", "io_uring"}) {
        conf->set(std::string("transports/") + name + "/enable",
                  parseTransportType(name) == xport);
    }
    return conf;
}

// "<addr> (length <size>)": how the engine's refusals name a buffer.
inline std::string bufferText(const void* addr, size_t size) {
    std::ostringstream os;
    os << addr << " (length " << size << ")";
    return os.str();
}

}  // namespace mooncake::tent::testing
