#include "tent/runtime/transport.h"

#include <string>

#include "tent/transport/tcp/tcp_transport.h"

// The MPComm transport is compiled in every configuration (its adapter is a
// stub without USE_MPCOMM); the guard only covers a tree where its header
// has not been added yet.
#if __has_include("tent/transport/mpcomm/mpcomm_transport.h")
#include "tent/transport/mpcomm/mpcomm_transport.h"
#define TENT_TABLE_HAS_MPCOMM 1
#endif

namespace mooncake::tent {

Status Transport::install(std::string& local_segment_name,
                          std::shared_ptr<SegmentManager> metadata,
                          std::shared_ptr<Topology> local_topology,
                          std::shared_ptr<Config> conf) {
    return Status::OK();
}

Status Transport::uninstall() { return Status::OK(); }

Status Transport::unsupported(const char* operation) const {
    return Status::NotImplemented(std::string(getName()) +
                                  " transport does not support " + operation);
}

Status Transport::cancelTransferTasks(SubBatchRef batch, int task_id) {
    return unsupported("cancelTransferTasks");
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

Status Transport::sendNotification(SegmentID target,
                                   const std::string& message) {
    return unsupported("sendNotification");
}

namespace {

std::unique_ptr<Transport> makeTcp() {
    return std::make_unique<TcpTransport>();
}

#ifdef TENT_TABLE_HAS_MPCOMM
std::unique_ptr<Transport> makeMpcomm() {
    return std::make_unique<MpcommTransport>();
}
#endif

}  // namespace

const std::vector<TransportEntry>& transportTable() {
    // Rows follow getSupportedTransports() order: MNNVL, NVLINK, RDMA,
    // SUNRISE_LINK, AscendDirect, SHM, TCP, GDS, MPCOMM, TPU.
    static const std::vector<TransportEntry> table = {
        {"tcp", TCP, true, &makeTcp},
#ifdef TENT_TABLE_HAS_MPCOMM
#ifdef TENT_HAVE_MPCOMM
        {"mpcomm", MPCOMM, true, &makeMpcomm},
#else
        // Without the provider install() can only fail, so loading it by
        // default would just add a "skipped" line to every start.
        {"mpcomm", MPCOMM, false, &makeMpcomm},
#endif
#endif
    };
    return table;
}

}  // namespace mooncake::tent
