// The transport table: the one place that names the concrete transports.
//
// Each transport compiled into this tree is one row (name, type, the default
// of its config gate transports/<name>/enable, factory). Adding a transport
// to the build is adding its row here, behind its build option if it has
// one; the Transport base (transport.cpp) and the engine's loading loop
// (engine_setup.cpp) know no subclass. The declarations are in
// tent/runtime/transport.h, where tests and benchmarks reach the table and
// the factory override.
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "tent/runtime/transport.h"
#include "tent/transport/mpcomm/mpcomm_transport.h"
#include "tent/transport/shm/shm_transport.h"
#include "tent/transport/tcp/tcp_transport.h"

namespace mooncake::tent {

namespace {

std::unique_ptr<Transport> makeTcp() {
    return std::make_unique<TcpTransport>();
}

// The MPComm transport is compiled in every configuration; without
// USE_MPCOMM its adapter is a stub and install() fails naming the option.
// Loading it by default there would only add a "skipped" line to every
// start, so its gate defaults to on only when the provider is linked.
// Opt-in (docs/shm.md): the copy path is not NUMA-aware.
std::unique_ptr<Transport> makeShm() {
    return std::make_unique<ShmTransport>();
}

std::unique_ptr<Transport> makeMpcomm() {
    return std::make_unique<MpcommTransport>();
}

#ifdef TENT_HAVE_MPCOMM
constexpr bool kMpcommByDefault = true;
#else
constexpr bool kMpcommByDefault = false;
#endif

}  // namespace

const std::vector<TransportEntry>& transportTable() {
    // Rows follow getSupportedTransports() order: MNNVL, NVLINK, RDMA,
    // SUNRISE_LINK, AscendDirect, SHM, TCP, GDS, MPCOMM, TPU.
    static const std::vector<TransportEntry> table = {
        {"shm", SHM, false, &makeShm},
        {"tcp", TCP, true, &makeTcp},
        {"mpcomm", MPCOMM, kMpcommByDefault, &makeMpcomm},
    };
    return table;
}

namespace {

struct FactoryOverrides {
    std::mutex mu;
    std::map<TransportType, TransportFactory> by_type;
};

FactoryOverrides& factoryOverrides() {
    static FactoryOverrides overrides;
    return overrides;
}

}  // namespace

void setTransportFactoryOverride(TransportType type, TransportFactory factory) {
    FactoryOverrides& o = factoryOverrides();
    std::lock_guard<std::mutex> lock(o.mu);
    if (factory) {
        o.by_type[type] = std::move(factory);
    } else {
        o.by_type.erase(type);
    }
}

std::unique_ptr<Transport> buildTransport(const TransportEntry& entry) {
    TransportFactory factory;
    {
        FactoryOverrides& o = factoryOverrides();
        std::lock_guard<std::mutex> lock(o.mu);
        auto it = o.by_type.find(entry.type);
        if (it != o.by_type.end()) factory = it->second;
    }
    // Called outside the lock: a factory may construct anything.
    return factory ? factory() : entry.factory();
}

}  // namespace mooncake::tent
