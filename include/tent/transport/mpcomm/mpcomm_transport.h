// MpcommTransport: TENT's transport over MPComm (registered as MPCOMM,
// config name "mpcomm").
//
// Everything here that needs the TENT runtime: publishing this process's
// MPComm endpoint in the segment descriptor, resolving a SegmentID to a
// peer and its endpoint, driving sub-batches, and the capabilities. The
// provider is reached only through MpcommAdapter; the second constructor
// takes one, which is how tests substitute a mock.
//
// Teardown: uninstall() waits for every call that is inside the adapter
// (including a handshake in progress), then unpublishes the endpoint,
// releases registered buffers and shuts the adapter down. Tasks still
// PENDING then read FAILED, and their handles are never passed to the
// adapter again (the adapter's shutdown() owns them).
#pragma once

#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "tent/runtime/transport.h"
#include "tent/transport/mpcomm/mpcomm_adapter.h"
#include "tent/transport/mpcomm/mpcomm_peer_registry.h"
#include "tent/transport/mpcomm/mpcomm_task_mapping.h"

namespace mooncake::tent {

// Environment of the transport, read and validated once by install().
struct MpcommTransportEnv {
    static constexpr int kDefaultTcpPort = 13579;
    int tcp_port = kDefaultTcpPort;  // MPCOMM_TCP_PORT
    int remote_tcp_port = 0;         // MPCOMM_REMOTE_TCP_PORT; 0 = unset
    bool has_nic_filter = false;     // MPCOMM_NIC_FILTER set and non-empty
    std::string nic_filter;

    // Fails naming the variable and its value.
    static Status fromEnvironment(MpcommTransportEnv& env);
};

// Lets data-path calls into the adapter run concurrently and lets
// uninstall() wait until none is inside before shutting the adapter down.
class MpcommCallGate {
 public:
    // False once closed: the caller must not touch the adapter.
    bool enter();
    void leave();
    // Refuses new callers and waits for the ones inside to leave.
    void close();
    void open();

 private:
    std::atomic<bool> closed_{true};
    std::atomic<int> active_{0};
    std::mutex mu_;
    std::condition_variable drained_;
};

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

    bool supportsCancellation() const override { return false; }
    bool supportNotification() const override { return false; }

    const char* getName() const override { return "mpcomm"; }

    // Where install() looks for nvidia_peermem (tests point it at a file).
    void setModulesPath(std::string path) { modules_path_ = std::move(path); }
    // The peer cache, for diagnostics and tests.
    const MpcommPeerRegistry& peers() const { return registry_; }

 private:
    // The single place that decides what this transport can carry.
    static Capabilities probeCapabilities(const std::string& modules_path,
                                          const Config* conf);
    // SegmentID -> connected peer with current keys; host_id is its name.
    Status ensurePeerConnected(SegmentID target, std::string& host_id);
    Status publishEndpoint(const std::string& attr);
    Status withdrawEndpoint();
    void teardown();

    std::shared_ptr<MpcommAdapter> adapter_;
    MpcommPeerRegistry registry_;
    MpcommCallGate gate_;
    std::string modules_path_ = kModulesPath;

    // Lifecycle state, changed only by install()/uninstall() while the
    // gate is closed.
    std::mutex lifecycle_mu_;
    bool installed_ = false;
    std::atomic<uint64_t> generation_{0};
    MpcommTransportEnv env_;
    std::string local_name_;
    std::shared_ptr<ControlService> metadata_;

    std::mutex buffers_mu_;
    std::map<uint64_t, uint64_t> registered_;  // addr -> length
};

}  // namespace mooncake::tent
