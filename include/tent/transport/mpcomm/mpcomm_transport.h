// MpcommTransport: TENT's transport over MPComm (registered as MPCOMM,
// config name "mpcomm").
//
// Everything here that needs the TENT runtime: publishing this process's
// MPComm endpoint in the segment descriptor, resolving a SegmentID to a
// peer and its endpoint, driving sub-batches, and the capabilities. The
// provider is reached only through MpcommAdapter; the second constructor
// takes one, which is how tests substitute a mock.
//
// Where each rule lives:
//   mpcomm_transport.cpp        install/uninstall, capabilities, teardown
//   mpcomm_transport_config.cpp environment variables and config keys
//   mpcomm_call_gate.cpp        who may be inside the adapter
//   mpcomm_registration.cpp     addMemoryBuffer/removeMemoryBuffer
//   mpcomm_peer_resolution.cpp  SegmentID -> peer, restart suspicion,
//                               pre-connect
//   mpcomm_batches.cpp          sub-batches, bounded handshake waits
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
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_set>

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

// Lets data-path calls into the adapter run concurrently and lets
// uninstall() wait until none is inside before shutting the adapter down.
class MpcommCallGate {
 public:
    // False once closed: the caller must not touch the adapter. Inline:
    // a request passes the gate on submit and on poll, and a call into
    // the library for each pass cost as much as the atomics themselves.
    // Both sides are sequentially consistent: a caller counts itself in
    // before it reads `closed_`, close() sets `closed_` before it reads
    // the count, so one of them always sees the other.
    bool enter() {
        active_.fetch_add(1);
        if (closed_.load()) {
            leave();
            return false;
        }
        return true;
    }
    void leave() {
        if (active_.fetch_sub(1) == 1 && closed_.load()) notifyDrained();
    }
    // Refuses new callers and waits for the ones inside to leave.
    void close();
    void open();

 private:
    void notifyDrained();

    std::atomic<bool> closed_{true};
    std::atomic<int> active_{0};
    std::mutex mu_;
    std::condition_variable drained_;
};

// Leaves the call gate on scope exit.
class MpcommGateTicket {
 public:
    explicit MpcommGateTicket(MpcommCallGate& gate) : gate_(gate) {}
    ~MpcommGateTicket() { gate_.leave(); }
    MpcommGateTicket(const MpcommGateTicket&) = delete;
    MpcommGateTicket& operator=(const MpcommGateTicket&) = delete;

 private:
    MpcommCallGate& gate_;
};

// A segment descriptor read into what a request needs. Each thread keeps
// its own (so nothing here is shared or locked) and reuses one for as long
// as SegmentManager::getRemoteCached() hands it the same descriptor: the
// endpoint is parsed once per descriptor, not once per request.
struct MpcommResolvedPeer {
    SegmentDescRef desc;  // the descriptor this was read from
    Status status;        // why the segment cannot be used, or OK
    MpcommPeerView view;
    // From the last poll() that answered kReady for `view`; lets later
    // requests skip poll() while link->readyFor(view) holds.
    std::shared_ptr<const MpcommPeerLink> link;

    // What poll() would answer kReady for, read without the registry's
    // lock; false sends the caller to poll().
    bool linkReady() const { return link && link->readyFor(view); }
};

// This thread's resolutions (mpcomm_peer_resolution.cpp).
struct MpcommResolveCache;

// What every resolution of one submission shares, read once when it starts
// instead of once per target: the clock the descriptor leases are checked
// against, this thread's resolution cache, and whether any peer is
// suspected at all. A suspicion raised while a submission runs is taken by
// the next one.
struct MpcommResolveScope {
    SegmentManager::CacheClock::time_point now;
    MpcommResolveCache* cache = nullptr;
    bool suspicions = false;
    // MpcommPeerRegistry::linksLowered(), read before any link is checked.
    uint64_t links_lowered = 0;
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
    void warmupSegment(SegmentID handle) override;

    const char* getName() const override { return "mpcomm"; }

    // Where install() looks for nvidia_peermem (tests point it at a file).
    void setModulesPath(std::string path) { modules_path_ = std::move(path); }
    // The peer cache, for diagnostics and tests.
    const MpcommPeerRegistry& peers() const { return registry_; }

 private:
    // The single place that decides what this transport can carry.
    static Capabilities probeCapabilities(const std::string& modules_path,
                                          const Config* conf);
    // What `target`'s descriptor says about the peer, from this thread's
    // cache while the descriptor is the same (`peer` is null only when no
    // descriptor could be read). A segment suspected of having restarted
    // is read afresh, not from the cache. `peer` is this thread's cache
    // entry, not a counted reference (a submission resolving 64 targets
    // paid two reference-count operations for each): it stays valid until
    // this thread's next resolvePeer(), which may evict it into `retired`,
    // whose owner keeps what it evicts for as long as it uses `peer`.
    // `scope.now` checks the descriptor's lease: while it is current, no
    // look-up at all.
    Status resolvePeer(
        SegmentID target, const MpcommResolveScope& scope,
        MpcommResolvedPeer*& peer,
        std::vector<std::shared_ptr<MpcommResolvedPeer>>& retired);
    MpcommResolveScope resolveScope();
    // What resolvePeer() would hand out for `target` when it is this
    // thread's cache entry as it stands and its peer is ready (its link
    // says what poll() would answer kReady for); else null, and the
    // caller takes the slow path. The full check, for a caller whose
    // MpcommResolveCache::stillReady() just failed (it does not repeat
    // that one). No suspicion taken, no descriptor read,
    // nothing evicted (it only records in the entry that it found the
    // peer ready), so the pointer stays valid until this thread's next
    // resolvePeer().
    const MpcommResolvedPeer* readyPeer(SegmentID target,
                                        const MpcommResolveScope& scope);
    // submitTransferTasks() steps (mpcomm_batches.cpp), under the
    // sub-batch's submit_mu: the slot of `target`, made and resolved on
    // first sight; issuing a settled slot's tasks; and waiting, within
    // connect_timeout_ms, for the peers not ready yet.
    size_t slotFor(MpcommSubBatch& sub, SegmentID target,
                   const MpcommResolveScope& scope);
    void issueSlot(MpcommSubBatch& sub, MpcommSubmitSlot& slot);
    // Posts one task to `peer`; FAILED (and logged) when MPComm refuses it.
    void issueTask(MpcommTask& task, const MpcommResolvedPeer& peer);
    // Makes `slot`'s tasks fail with `why` when it is issued.
    static void failSlot(MpcommSubBatch& sub, MpcommSubmitSlot& slot,
                         Status why);
    void settleSlots(MpcommSubBatch& sub);
    // Reads `desc` into `peer` (the slow part of resolvePeer()).
    void readDescriptor(const SegmentDescRef& desc, MpcommResolvedPeer& peer);
    // A transfer to `target` failed: its next use re-reads the descriptor.
    void suspectPeer(SegmentID target);
    bool takeSuspicion(SegmentID target);
    Status publishEndpoint(const std::string& attr);
    Status withdrawEndpoint();
    // Everything after the gate is closed, within `deadline`.
    void teardown(std::chrono::steady_clock::time_point deadline);

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
    MpcommTransportSettings settings_;
    std::string local_name_;
    std::shared_ptr<ControlService> metadata_;
    // Names this installation in the per-thread resolution caches;
    // process-wide unique, drawn by install().
    uint64_t resolve_owner_ = 0;

    std::mutex buffers_mu_;
    std::map<uint64_t, uint64_t> registered_;  // addr -> length

    // Segments whose last transfer failed; read on the hot path only while
    // suspect_count_ is non-zero.
    std::mutex suspect_mu_;
    std::unordered_set<SegmentID> suspect_;
    std::atomic<size_t> suspect_count_{0};
};

}  // namespace mooncake::tent
