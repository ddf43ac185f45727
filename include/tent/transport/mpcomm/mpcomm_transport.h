// MpcommTransport: TENT's transport over MPComm (registered as MPCOMM,
// config name "mpcomm").
//
// Everything here that needs the TENT runtime: publishing this process's
// MPComm endpoint in the segment descriptor, resolving a SegmentID to a
// peer and its endpoint, driving sub-batches, and the capabilities. The
// provider is reached only through MpcommAdapter; the second constructor
// takes one, which is how tests substitute a mock.
//
// Where each rule lives (the helpers are private to
// src/transport/mpcomm/, each a header and one .cpp):
//   mpcomm_transport.cpp        install/uninstall, capabilities, teardown
//   mpcomm_transport_config     environment variables and config keys
//   mpcomm_call_gate            who may be inside the adapter
//   mpcomm_registration         addMemoryBuffer/removeMemoryBuffer
//   mpcomm_peer_resolver        SegmentID -> peer, restart suspicion,
//                               pre-connect (with mpcomm_resolve_cache.h)
//   mpcomm_batch_driver         sub-batches, bounded handshake waits
//
// Teardown: uninstall() lets the callers inside the adapter leave (each
// waits at most connect_timeout_ms for a handshake), then waits for the
// handshakes still running on their own threads; both within one
// connect_timeout_ms from the call.
// One that does not return is abandoned with a WARNING naming it; the
// provider is then shut down by that handshake's thread when it returns,
// and install() refuses until it has. Tasks still PENDING read FAILED, and
// their handles are never passed to the adapter again.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "tent/runtime/transport.h"
#include "tent/transport/mpcomm/mpcomm_adapter.h"
#include "tent/transport/mpcomm/mpcomm_peer_registry.h"
#include "tent/transport/mpcomm/mpcomm_task_mapping.h"

namespace mooncake::tent {

class MpcommBatchDriver;
class MpcommCallGate;
class MpcommPeerResolver;
class MpcommRegistration;

class MpcommTransport : public Transport {
 public:
    static constexpr const char* kModulesPath = "/proc/modules";

    MpcommTransport();
    explicit MpcommTransport(std::shared_ptr<MpcommAdapter> adapter);
    ~MpcommTransport() override;

    Status install(std::string& local_segment_name,
                   std::shared_ptr<ControlService> metadata,
                   std::shared_ptr<Topology> local_topology,
                   std::shared_ptr<Config> conf = nullptr) override;
    Status uninstall() override;

    Status allocateSubBatch(SubBatchRef& batch, size_t max_size) override;
    Status freeSubBatch(SubBatchRef& batch) override;
    Status submitTransferTasks(
        SubBatchRef batch, const std::vector<Request>& request_list) override;
    Status getTransferStatus(SubBatchRef batch, int task_id,
                             TransferStatus& status) override;

    Status addMemoryBuffer(BufferDesc& desc,
                           const MemoryOptions& options) override;
    Status addMemoryBuffer(std::vector<BufferDesc>& desc_list,
                           const MemoryOptions& options) override;
    Status removeMemoryBuffer(BufferDesc& desc) override;

    void warmupSegment(SegmentID handle) override;

    const char* getName() const override { return "mpcomm"; }

    // Where install() looks for nvidia_peermem (tests point it at a file).
    void setModulesPath(std::string path) { modules_path_ = std::move(path); }
    // The peer cache, for diagnostics and tests.
    const MpcommPeerRegistry& peers() const { return registry_; }

 private:
    // OK unless `desc` is device memory and GPU support is off.
    Status checkDeviceSupport(const BufferDesc& desc) const;
    // The single place that decides what this transport can carry.
    static Capabilities probeCapabilities(const std::string& modules_path,
                                          const Config* conf);
    Status publishEndpoint(const std::string& attr);
    Status withdrawEndpoint();
    // Everything after the gate is closed, within `deadline`.
    void teardown(std::chrono::steady_clock::time_point deadline);

    std::shared_ptr<MpcommAdapter> adapter_;
    MpcommPeerRegistry registry_;
    std::unique_ptr<MpcommCallGate> gate_;
    std::unique_ptr<MpcommPeerResolver> resolver_;
    std::unique_ptr<MpcommRegistration> buffers_;
    std::unique_ptr<MpcommBatchDriver> batches_;
    std::string modules_path_ = kModulesPath;

    // Lifecycle state, changed only by install()/uninstall() while the
    // gate is closed.
    std::mutex lifecycle_mu_;
    bool installed_ = false;
    // transports/mpcomm/connect_timeout_ms and transports/mpcomm/preconnect
    // as install() read them.
    int64_t connect_timeout_ms_ = 0;
    bool preconnect_ = false;
    std::string local_name_;
    std::shared_ptr<ControlService> metadata_;
};

}  // namespace mooncake::tent
