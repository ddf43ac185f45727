// MpcommTransport: TENT's transport over MPComm (registered as MPCOMM,
// config name "mpcomm").
//
// Everything here that needs the TENT runtime: publishing this process's
// MPComm endpoint in the segment descriptor, resolving a SegmentID to a
// peer and its endpoint, registering local memory, driving sub-batches,
// and the capabilities. The provider is reached only through
// MpcommAdapter; the second constructor takes one, which is how tests
// substitute a mock.
//
// The unit is three files: mpcomm_transport.cpp (install/uninstall,
// settings, registration, capabilities, teardown),
// mpcomm_transport_datapath.cpp (sub-batches: submit, poll, free) and the
// private mpcomm_peer_resolver.{h,cpp} (SegmentID -> peer, restart
// suspicion, pre-connect), all in src/transport/mpcomm/.
//
// Liveness: a data-path call enters the call gate, which hands back the
// generation of the installation now open (0 when none); comparing it with
// the sub-batch's is the one check of whether its handles still mean
// anything to the adapter.
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

// Environment of the transport, read and validated once by install().
struct MpcommTransportEnv {
    static constexpr int kDefaultTcpPort = 13579;
    int tcp_port = kDefaultTcpPort;  // MPCOMM_TCP_PORT
    int remote_tcp_port = 0;         // MPCOMM_REMOTE_TCP_PORT; 0 = unset
    bool has_nic_filter = false;     // MPCOMM_NIC_FILTER set and non-empty
    std::string nic_filter;
    std::string advertise_address;  // MPCOMM_ADVERTISE_ADDR; "" = unset

    // Fails naming the variable and its value.
    static Status fromEnvironment(MpcommTransportEnv& env);
};

// The transport's configuration keys, validated once by install().
struct MpcommTransportSettings {
    static constexpr int64_t kDefaultConnectTimeoutMs = 10000;
    static constexpr int64_t kMaxConnectTimeoutMs = 3600000;
    // transports/mpcomm/connect_timeout_ms: the longest a submitting thread
    // waits for a peer's handshake and key query.
    int64_t connect_timeout_ms = kDefaultConnectTimeoutMs;
    // transports/mpcomm/preconnect: openSegment() starts the handshake.
    bool preconnect = true;
    // MPCOMM_ADVERTISE_ADDR, else transports/mpcomm/advertise_address, else
    // "" (the host part of the local segment name).
    std::string advertise_address;

    // Fails naming the key (or variable) and its value.
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
    // --- the call gate: who may be inside the adapter -------------------
    // The generation of the open installation, counting the caller in;
    // 0 (and not counted) while closed. Both sides are sequentially
    // consistent: a caller counts itself in before it reads the
    // generation, closeGate() clears it before it reads the count, so one
    // of them always sees the other.
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
    // Refuses new callers and waits for the ones inside to leave.
    void closeGate();
    // Leaves the gate on scope exit.
    struct CallTicket {
        MpcommTransport* t;
        ~CallTicket() { t->leaveCall(); }
    };

    // --- lifecycle (mpcomm_transport.cpp) --------------------------------
    // The single place that decides what this transport can carry.
    static Capabilities probeCapabilities(const std::string& modules_path,
                                          const Config* conf);
    // OK unless `desc` is device memory and GPU support is off.
    Status checkDeviceSupport(const BufferDesc& desc) const;
    Status publishEndpoint(const std::string& attr);
    Status withdrawEndpoint();
    // Everything after the gate is closed, within `deadline`.
    void teardown(std::chrono::steady_clock::time_point deadline);
    // uninstall(), with the gate closed: releases every registration.
    void releaseAllBuffers();

    // --- data path (mpcomm_transport_datapath.cpp) -----------------------
    // submitTransferTasks() steps, under the sub-batch's submit_mu: the
    // slot of `target`, made and resolved on first sight; and one round of
    // waiting, within `deadline`, for the peers not ready yet (on the
    // deadline it fails the slots still waiting).
    size_t slotFor(MpcommSubBatch& sub, SegmentID target,
                   const MpcommResolveScope& scope);
    void settleSome(MpcommSubBatch& sub,
                    MpcommPeerRegistry::Clock::time_point deadline);

    std::shared_ptr<MpcommAdapter> adapter_;
    MpcommPeerRegistry registry_;
    std::unique_ptr<MpcommPeerResolver> resolver_;
    std::string modules_path_ = kModulesPath;

    // The gate. open_generation_ is 0 while closed.
    std::atomic<uint64_t> open_generation_{0};
    std::atomic<int> active_calls_{0};
    std::mutex drain_mu_;
    std::condition_variable drained_;
    // The installation sub-batches are handed out for; install() advances
    // it while the gate is closed.
    std::atomic<uint64_t> generation_{0};

    // Local memory registered with MPComm: addr -> length.
    std::mutex buffers_mu_;
    std::map<uint64_t, uint64_t> registered_;

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
