// TransferEngine: the public C++ facade; every call forwards to the impl,
// which answers "not available" when construction failed.
#include "tent/transfer_engine.h"

#include "runtime/transfer_engine_impl.h"
#include "tent/runtime/topology.h"

namespace mooncake::tent {

TransferEngine::TransferEngine()
    : impl_(std::make_unique<TransferEngineImpl>(nullptr)) {}

TransferEngine::TransferEngine(const std::string config_path)
    : impl_(std::make_unique<TransferEngineImpl>(nullptr, config_path)) {}

TransferEngine::TransferEngine(std::shared_ptr<Config> config)
    // A private copy: the engine records its derived identity (segment
    // name) in its configuration and must not write into the caller's.
    : impl_(std::make_unique<TransferEngineImpl>(
          config ? std::make_shared<Config>(*config) : nullptr)) {}

TransferEngine::~TransferEngine() = default;

bool TransferEngine::available() const { return impl_->available(); }

const std::string TransferEngine::getSegmentName() const {
    return impl_->segmentName();
}

uint64_t TransferEngine::getDescriptorRereads() const {
    return impl_->descriptorRereads();
}

const std::string TransferEngine::getRpcServerAddress() const {
    if (!impl_->available()) return "";
    return impl_->hostname() + ":" + std::to_string(impl_->rpcPort());
}

uint16_t TransferEngine::getRpcServerPort() const { return impl_->rpcPort(); }

std::vector<std::string> TransferEngine::getSupportedTransports() const {
    return impl_->installedTransportNames();
}

std::shared_ptr<Topology> TransferEngine::getLocalTopology() const {
    return impl_->localTopology();
}

std::string TransferEngine::getLocalTopologyString() const {
    std::shared_ptr<Topology> topology = impl_->localTopology();
    if (!topology) return "{}";
    Json::StreamWriterBuilder builder;
    builder["indentation"] = "";
    return Json::writeString(builder, topology->toJson());
}

Status TransferEngine::exportLocalSegment(std::string& shared_handle) {
    return Status::NotImplemented(
        "exportLocalSegment is not implemented (no shared-handle segments "
        "in this tree)");
}

Status TransferEngine::importRemoteSegment(SegmentID& handle,
                                           const std::string& shared_handle) {
    return Status::NotImplemented(
        "importRemoteSegment is not implemented (no shared-handle segments "
        "in this tree)");
}

Status TransferEngine::openSegment(SegmentID& handle,
                                   const std::string& segment_name) {
    return impl_->openSegment(handle, segment_name);
}

Status TransferEngine::closeSegment(SegmentID handle) {
    return impl_->closeSegment(handle);
}

Status TransferEngine::getSegmentInfo(SegmentID handle, SegmentInfo& info) {
    return impl_->getSegmentInfo(handle, info);
}

Status TransferEngine::allocateLocalMemory(void** addr, size_t size,
                                           Location location) {
    MemoryOptions options;
    options.location = std::move(location);
    return impl_->allocateLocalMemory(addr, size, options);
}

Status TransferEngine::allocateLocalMemory(void** addr, size_t size,
                                           MemoryOptions& options) {
    return impl_->allocateLocalMemory(addr, size, options);
}

Status TransferEngine::freeLocalMemory(void* addr) {
    return impl_->freeLocalMemory(addr);
}

Status TransferEngine::allocateSharedMemory(void** addr, size_t size) {
    return impl_->allocateSharedMemory(addr, size);
}

Status TransferEngine::freeSharedMemory(void* addr) {
    return impl_->freeSharedMemory(addr);
}

Status TransferEngine::registerLocalMemory(void* addr, size_t size,
                                           Permission permission) {
    MemoryOptions options;
    options.perm = permission;
    return impl_->registerLocalMemory({addr}, {size}, options);
}

Status TransferEngine::registerLocalMemory(std::vector<void*> addr_list,
                                           std::vector<size_t> size_list,
                                           Permission permission) {
    MemoryOptions options;
    options.perm = permission;
    return impl_->registerLocalMemory(addr_list, size_list, options);
}

Status TransferEngine::registerLocalMemory(void* addr, size_t size,
                                           MemoryOptions& options) {
    return impl_->registerLocalMemory({addr}, {size}, options);
}

Status TransferEngine::registerLocalMemory(std::vector<void*> addr_list,
                                           std::vector<size_t> size_list,
                                           MemoryOptions& options) {
    return impl_->registerLocalMemory(addr_list, size_list, options);
}

Status TransferEngine::unregisterLocalMemory(void* addr, size_t size) {
    return impl_->unregisterLocalMemory({addr}, {size});
}

Status TransferEngine::unregisterLocalMemory(std::vector<void*> addr_list,
                                             std::vector<size_t> size_list) {
    return impl_->unregisterLocalMemory(addr_list, size_list);
}

BatchID TransferEngine::allocateBatch(size_t batch_size) {
    return impl_->allocateBatch(batch_size);
}

Status TransferEngine::freeBatch(BatchID batch_id) {
    return impl_->freeBatch(batch_id);
}

Status TransferEngine::submitTransfer(
    BatchID batch_id, const std::vector<Request>& request_list) {
    return impl_->submitTransfer(batch_id, request_list);
}

Status TransferEngine::getTransferStatus(BatchID batch_id, size_t task_id,
                                         TransferStatus& status) {
    return impl_->getTransferStatus(batch_id, task_id, status);
}

Status TransferEngine::getTransferStatus(
    BatchID batch_id, std::vector<TransferStatus>& status_list) {
    return impl_->getTransferStatus(batch_id, status_list);
}

Status TransferEngine::getTransferStatus(BatchID batch_id,
                                         TransferStatus& overall_status) {
    return impl_->getTransferStatus(batch_id, overall_status);
}

Status TransferEngine::submitTransfer(BatchID batch_id,
                                      const std::vector<Request>& request_list,
                                      const Notification& notifi) {
    return impl_->submitTransfer(batch_id, request_list, notifi);
}

Status TransferEngine::cancelTransfer(BatchID batch_id, size_t task_id) {
    return impl_->cancelTransfer(batch_id, task_id);
}

Status TransferEngine::sendNotification(SegmentID target_id,
                                        const Notification& notifi) {
    return impl_->sendNotification(target_id, notifi);
}

Status TransferEngine::receiveNotification(
    std::vector<Notification>& notifi_list) {
    return impl_->receiveNotification(notifi_list);
}

Status TransferEngine::probePeerAliveByID(SegmentID target_id) {
    return impl_->probePeerAliveByID(target_id);
}

Status TransferEngine::progressBatch(BatchID batch_id,
                                     TransferStatus& overall_status) {
    return impl_->progressBatch(batch_id, overall_status);
}

uint64_t TransferEngine::getFailoverCount(TransportType from,
                                          TransportType to) const {
    const FailoverCounters& counters = impl_->failoverCounters();
    if (from == UNSPEC && to == UNSPEC) return counters.total();
    return counters.count(from, to);
}

Status TransferEngine::getNicLoadStats(std::vector<NicLoadStats>& stats) const {
    stats.clear();
    return Status::NotImplemented(
        "getNicLoadStats: no transport in this tree reports NIC load (it "
        "needs RDMA NICs)");
}

}  // namespace mooncake::tent
