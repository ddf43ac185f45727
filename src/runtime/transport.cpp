#include "tent/runtime/transport.h"

#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "tent/transport/mpcomm/mpcomm_transport.h"
#include "tent/transport/tcp/tcp_transport.h"

namespace mooncake::tent {

Status Transport::install(std::string& local_segment_name,
                          std::shared_ptr<ControlService> metadata,
                          std::shared_ptr<Topology> local_topology,
                          std::shared_ptr<Config> conf) {
    return Status::OK();
}

Status Transport::uninstall() { return Status::OK(); }

Status Transport::unsupported(const char* operation) const {
    return Status::NotImplemented(std::string(getName()) +
                                  " transport does not support " + operation);
}

Status Transport::addMemoryBuffer(BufferDesc& desc,
                                  const MemoryOptions& options) {
    return unsupported("addMemoryBuffer");
}

Status Transport::addMemoryBuffer(std::vector<BufferDesc>& desc_list,
                                  const MemoryOptions& options) {
    for (BufferDesc& desc : desc_list) {
        CHECK_STATUS(addMemoryBuffer(desc, options));
    }
    return Status::OK();
}

Status Transport::removeMemoryBuffer(BufferDesc& desc) {
    return unsupported("removeMemoryBuffer");
}

namespace {

std::unique_ptr<Transport> makeTcp() {
    return std::make_unique<TcpTransport>();
}

// The MPComm transport is compiled in every configuration; without
// USE_MPCOMM its adapter is a stub and install() fails naming the option.
// Loading it by default there would only add a "skipped" line to every
// start, so its gate defaults to on only when the provider is linked.
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
