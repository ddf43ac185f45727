// MpcommTransport: TENT's transport over MPComm (config name "mpcomm").
// It publishes this process's MPComm endpoint in the segment descriptor,
// resolves a SegmentID to a peer, registers local memory and drives
// sub-batches; the provider is reached only through MpcommAdapter (the
// second constructor takes one, which is how tests substitute a mock).
// mpcomm_transport.cpp holds the lifecycle and registration,
// mpcomm_transport_datapath.cpp the sub-batches, the private
// mpcomm_peer_resolver.{h,cpp} SegmentID -> peer.
//
// Liveness: a data-path call enters the call gate, which hands back the
// generation of the installation now open (0 when none); a sub-batch's
// handles mean something to the adapter only while it is its own.
//
// Teardown: uninstall() waits for the callers inside the adapter to leave,
// then for the handshakes still running, within one connect_timeout_ms. One
// that does not return is abandoned with a WARNING; its thread shuts the
// provider down when it returns, and install() refuses until then. Tasks
// still PENDING read FAILED.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "tent/common/config.h"
#include "tent/runtime/transport.h"
#include "tent/transport/mpcomm/mpcomm_adapter.h"
#include "tent/transport/mpcomm/mpcomm_peer_registry.h"
#include "tent/transport/mpcomm/mpcomm_task_mapping.h"

namespace mooncake::tent {

class MpcommPeerResolver;
struct MpcommResolveScope;
struct MpcommSubBatch;

// Environment and configuration keys, read and validated once by
// install(); an error names the variable or key and its value.
struct MpcommTransportEnv {
    static constexpr int kDefaultTcpPort = 13579;
    int tcp_port = kDefaultTcpPort;  // MPCOMM_TCP_PORT
    int remote_tcp_port = 0;         // MPCOMM_REMOTE_TCP_PORT; 0 = unset
    bool has_nic_filter = false;     // MPCOMM_NIC_FILTER set and non-empty
    std::string nic_filter;
    std::string advertise_address;  // MPCOMM_ADVERTISE_ADDR; "" = unset

    static Status fromEnvironment(MpcommTransportEnv& env);
};

struct MpcommTransportSettings {
    static constexpr int64_t kDefaultConnectTimeoutMs = 10000;
    static constexpr int64_t kMaxConnectTimeoutMs = 3600000;
    // transports/mpcomm/connect_timeout_ms: the longest a submitter waits
    // for a peer's handshake and key query.
    int64_t connect_timeout_ms = kDefaultConnectTimeoutMs;
    // transports/mpcomm/preconnect: openSegment() starts the handshake.
    bool preconnect = true;
    // MPCOMM_ADVERTISE_ADDR, else transports/mpcomm/advertise_address, else
    // "" (the host part of the local segment name).
    std::string advertise_address;

    static Status fromConfig(const Config* conf, const MpcommTransportEnv& env,
                             MpcommTransportSettings& settings);
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
    // Same capacity: the handles still held are let go and the tasks
    // counted from zero again, with no allocation (the engine's path from
    // one batch to the next in a slot).
    Status recycleSubBatch(SubBatchRef& batch, size_t max_size) override;
    Status submitTransferTasks(
        SubBatchRef batch, const std::vector<Request>& request_list) override;
    bool keepsTaskRequests() const override { return true; }
    Status getTaskRequest(SubBatchRef batch, int task_id,
                          Request& request) override;
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
    // The call gate: the generation of the open installation, counting
    // the caller in; 0 (not counted) while closed. Sequentially consistent
    // on both sides (count, then read; clear, then read the count), so
    // closeGate() and a caller always see one another.
    uint64_t enterCall() {
        active_calls_.fetch_add(1);
        const uint64_t open = open_generation_.load();
        if (open == 0) leaveCall();
        return open;
    }
    void leaveCall() {
        if (active_calls_.fetch_sub(1) == 1 && open_generation_.load() == 0) {
            notifyDrained();
        }
    }
    void notifyDrained();
    void closeGate();
    struct CallTicket {
        MpcommTransport* t;
        ~CallTicket() { t->leaveCall(); }
    };

    // The one place that decides what this transport can carry.
    static Capabilities probeCapabilities(const std::string& modules_path,
                                          const Config* conf);
    Status checkDeviceSupport(const BufferDesc& desc) const;
    Status publishEndpoint(const std::string& attr);
    void teardown(std::chrono::steady_clock::time_point deadline);
    void releaseAllBuffers();

    // Gives up the MPComm handles `sub`'s tasks [from, count) still hold
    // (freeing or recycling it).
    void releaseHandles(MpcommSubBatch& sub, size_t from, size_t count);
    // submitTransferTasks() steps, under the sub-batch's submit_mu.
    size_t slotFor(MpcommSubBatch& sub, SegmentID target,
                   const MpcommResolveScope& scope);
    void settleSome(MpcommSubBatch& sub,
                    MpcommPeerRegistry::Clock::time_point deadline);

    std::shared_ptr<MpcommAdapter> adapter_;
    MpcommPeerRegistry registry_;
    std::unique_ptr<MpcommPeerResolver> resolver_;
    std::string modules_path_ = kModulesPath;

    std::atomic<uint64_t> open_generation_{0};
    std::atomic<int> active_calls_{0};
    std::mutex drain_mu_;
    std::condition_variable drained_;
    // The installation sub-batches are handed out for.
    std::atomic<uint64_t> generation_{0};

    // Local memory registered with MPComm: addr -> length.
    std::mutex buffers_mu_;
    std::map<uint64_t, uint64_t> registered_;

    // Changed only by install()/uninstall() while the gate is closed.
    std::mutex lifecycle_mu_;
    bool installed_ = false;
    int64_t connect_timeout_ms_ = 0;
    bool preconnect_ = false;
    std::string local_name_;
    std::shared_ptr<ControlService> metadata_;
};

}  // namespace mooncake::tent
