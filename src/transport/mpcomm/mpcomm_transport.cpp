// The MPComm transport's lifecycle: install() brings MPComm up and
// advertises it, uninstall() takes it down within a bound; the one place
// that decides the capabilities; and every other Transport call, handed to
// the private helper that owns it (see mpcomm_transport.h).
#include "tent/transport/mpcomm/mpcomm_transport.h"

#include <glog/logging.h>

#include <chrono>
#include <fstream>
#include <functional>
#include <utility>
#include <variant>
#include <vector>

#include "mpcomm_batch_driver.h"
#include "mpcomm_call_gate.h"
#include "mpcomm_peer_resolver.h"
#include "mpcomm_registration.h"
#include "mpcomm_transport_config.h"

namespace mooncake::tent {

namespace {

// Undoes the completed steps of install(), newest first, unless dismissed.
class UnwindOnFailure {
 public:
    UnwindOnFailure() = default;
    UnwindOnFailure(const UnwindOnFailure&) = delete;
    UnwindOnFailure& operator=(const UnwindOnFailure&) = delete;
    ~UnwindOnFailure() {
        if (dismissed_) return;
        for (auto it = steps_.rbegin(); it != steps_.rend(); ++it) (*it)();
    }
    void add(std::function<void()> undo) { steps_.push_back(std::move(undo)); }
    void dismiss() { dismissed_ = true; }

 private:
    std::vector<std::function<void()>> steps_;
    bool dismissed_ = false;
};

// The RDMA NICs of the topology as MPComm's comma-separated device list.
std::string rdmaDeviceList(const Topology* topology) {
    std::string out;
    if (topology == nullptr) return out;
    for (const auto& nic : topology->nic_list_) {
        if (nic.type != Topology::NIC_RDMA) continue;
        if (!out.empty()) out += ',';
        out += nic.name;
    }
    return out;
}

}  // namespace

// --- lifecycle -----------------------------------------------------------

MpcommTransport::MpcommTransport()
    : MpcommTransport(createDefaultMpcommAdapter()) {}

MpcommTransport::MpcommTransport(std::shared_ptr<MpcommAdapter> adapter)
    : adapter_(std::move(adapter)),
      registry_(adapter_),
      gate_(std::make_unique<MpcommCallGate>()),
      resolver_(std::make_unique<MpcommPeerResolver>(registry_)),
      buffers_(std::make_unique<MpcommRegistration>(adapter_.get(), *gate_)),
      batches_(std::make_unique<MpcommBatchDriver>(adapter_.get(), registry_,
                                                   *resolver_, *gate_)) {}

MpcommTransport::~MpcommTransport() { uninstall(); }

Capabilities MpcommTransport::probeCapabilities(const std::string& modules_path,
                                                const Config* conf) {
    Capabilities caps;
    caps.dram_to_dram = true;
    if (conf != nullptr &&
        conf->get("transports/mpcomm/disable_gpu_direct_rdma", false)) {
        LOG(INFO) << "MpcommTransport: GPU memory support disabled by "
                     "transports/mpcomm/disable_gpu_direct_rdma";
        return caps;
    }
    // GPU pages are pinned through nvidia-peermem; without it MPComm would
    // register device pointers as host memory.
    bool peermem = false;
    std::ifstream modules(modules_path);
    std::string line;
    while (!peermem && std::getline(modules, line)) {
        peermem = line.compare(0, line.find(' '), "nvidia_peermem") == 0;
    }
    if (!peermem) {
        LOG(INFO) << "MpcommTransport: nvidia_peermem not detected, GPU "
                     "memory support is disabled";
        return caps;
    }
    caps.dram_to_gpu = true;
    caps.gpu_to_dram = true;
    caps.gpu_to_gpu = true;
    return caps;
}

Status MpcommTransport::install(std::string& local_segment_name,
                                std::shared_ptr<ControlService> metadata,
                                std::shared_ptr<Topology> local_topology,
                                std::shared_ptr<Config> conf) {
    std::lock_guard<std::mutex> lock(lifecycle_mu_);
    if (installed_) {
        return Status::InvalidArgument(
            "MpcommTransport: already installed as " + local_name_);
    }
    if (!metadata) {
        return Status::InvalidArgument(
            "MpcommTransport: install() needs the engine's ControlService");
    }
    // Validated before the provider is touched: a bad port must not reach
    // MPComm as 0 or as a truncated number.
    MpcommTransportEnv env;
    CHECK_STATUS(MpcommTransportEnv::fromEnvironment(env));
    MpcommTransportSettings settings;
    CHECK_STATUS(
        MpcommTransportSettings::fromConfig(conf.get(), env, settings));
    if (!adapter_) {
        return Status::InvalidArgument("MpcommTransport: no MPComm adapter");
    }
    if (!adapter_->available()) {
        return Status::NotImplemented(adapter_->unavailableReason());
    }
    if (!registry_.idle()) {
        // The provider is still inside a call that the last uninstall()
        // abandoned; it cannot be re-initialised under it.
        return Status::InvalidArgument(
            "MpcommTransport: an MPComm handshake abandoned by the last "
            "uninstall() has not returned yet; MPComm cannot be "
            "re-initialised until it does");
    }
    const std::string& host_id = local_segment_name;
    std::string devices = env.has_nic_filter
                              ? env.nic_filter
                              : rdmaDeviceList(local_topology.get());

    UnwindOnFailure unwind;
    // A failed init() may have opened devices; shutdown() tolerates it.
    unwind.add([this] { adapter_->shutdown(); });
    CHECK_STATUS(adapter_->init(host_id, devices, env.tcp_port));
    CHECK_STATUS(adapter_->startAcceptThread());
    unwind.add([this] { adapter_->stopAcceptThread(); });

    const int tcp_port = adapter_->tcpPort();
    // An advertise address (it has no ':') stands for the whole name.
    const std::string attr = buildMpcommEndpointAttr(
        settings.advertise_address.empty() ? host_id
                                           : settings.advertise_address,
        tcp_port);
    std::string check_addr;
    int check_port = 0;
    Status valid = parseMpcommEndpointAttr(attr, check_addr, check_port);
    if (!valid.ok()) {
        return Status::InvalidArgument(
            "MpcommTransport: cannot advertise local segment " + host_id +
            ": " + std::string(valid.message()));
    }
    metadata_ = metadata;
    unwind.add([this] {
        withdrawEndpoint();
        metadata_.reset();
    });
    CHECK_STATUS(publishEndpoint(attr));

    caps = probeCapabilities(modules_path_, conf.get());
    connect_timeout_ms_ = settings.connect_timeout_ms;
    preconnect_ = settings.preconnect;
    local_name_ = host_id;
    resolver_->bind(metadata, env.remote_tcp_port);
    installed_ = true;
    batches_->start(settings.connect_timeout_ms);
    unwind.dismiss();
    gate_->open();
    LOG(INFO) << "MpcommTransport: Installed successfully, host_id=" << host_id
              << ", tcp_port=" << tcp_port
              << ", devices=" << (devices.empty() ? "(none)" : devices);
    if (!settings.advertise_address.empty()) {
        LOG(INFO) << "MpcommTransport: advertising " << attr
                  << " (advertise address " << settings.advertise_address
                  << ")";
    }
    return Status::OK();
}

Status MpcommTransport::uninstall() {
    std::lock_guard<std::mutex> lock(lifecycle_mu_);
    if (!installed_) return Status::OK();
    // One bound for the whole teardown: callers waiting for a handshake
    // and the handshakes themselves share it.
    const auto deadline = std::chrono::steady_clock::now() +
                          std::chrono::milliseconds(connect_timeout_ms_);
    // From here no caller enters the adapter, and those inside have left.
    gate_->close();
    teardown(deadline);
    return Status::OK();
}

void MpcommTransport::teardown(std::chrono::steady_clock::time_point deadline) {
    Status st = withdrawEndpoint();
    if (!st.ok()) {
        LOG(WARNING) << "MpcommTransport: could not withdraw the MPComm "
                        "endpoint of "
                     << local_name_ << ": " << st;
    }
    buffers_->releaseAll();
    // Handshakes run on their own threads; they get what is left of the
    // bound uninstall() started with.
    std::vector<std::string> stuck = registry_.drain(deadline);
    std::shared_ptr<MpcommAdapter> adapter = adapter_;
    auto shut_down = [adapter] {
        adapter->stopAcceptThread();
        adapter->shutdown();
    };
    if (stuck.empty()) {
        shut_down();
    } else {
        std::string hosts;
        for (const auto& host : stuck)
            hosts += (hosts.empty() ? "" : ", ") + host;
        LOG(WARNING) << "MpcommTransport: uninstall abandons " << stuck.size()
                     << " MPComm handshake(s) still inside the provider after "
                        "transports/mpcomm/connect_timeout_ms="
                     << connect_timeout_ms_ << " (peers: " << hosts
                     << "); MPComm is shut down when they return";
        registry_.runWhenIdle(shut_down);
    }
    caps = Capabilities{};
    installed_ = false;
    resolver_->unbind();
    metadata_.reset();
}

// --- the rest of Transport, each handed to the helper that owns it ------

Status MpcommTransport::allocateSubBatch(SubBatchRef& batch, size_t max_size) {
    return batches_->allocateSubBatch(batch, max_size);
}

Status MpcommTransport::freeSubBatch(SubBatchRef& batch) {
    return batches_->freeSubBatch(batch);
}

Status MpcommTransport::submitTransferTasks(
    SubBatchRef batch, const std::vector<Request>& request_list) {
    return batches_->submitTransferTasks(batch, request_list);
}

Status MpcommTransport::getTransferStatus(SubBatchRef batch, int task_id,
                                          TransferStatus& status) {
    return batches_->getTransferStatus(batch, task_id, status);
}

// Device memory goes to the provider (which pins it through
// nvidia-peermem) only while the transport declares GPU support; otherwise
// a device pointer would be registered as host memory. The location is
// read as text ("cuda:N"), not through the runtime's platform, so that the
// unit builds in upstream's tree too (scripts/upstream_check.sh).
Status MpcommTransport::checkDeviceSupport(const BufferDesc& desc) const {
    const bool device = desc.location.rfind("cuda", 0) == 0;
    if (!device || caps.gpu_to_gpu) {
        return Status::OK();
    }
    return Status::InvalidArgument(
        "mpcomm transport cannot register device memory at " + desc.location +
        ": GPU memory support is off (nvidia_peermem not loaded, or "
        "transports/mpcomm/disable_gpu_direct_rdma is true)");
}

Status MpcommTransport::addMemoryBuffer(BufferDesc& desc,
                                        const MemoryOptions& options) {
    CHECK_STATUS(checkDeviceSupport(desc));
    return buffers_->add(desc);
}

Status MpcommTransport::addMemoryBuffer(std::vector<BufferDesc>& desc_list,
                                        const MemoryOptions& options) {
    for (const BufferDesc& desc : desc_list) {
        CHECK_STATUS(checkDeviceSupport(desc));
    }
    return buffers_->add(desc_list);
}

Status MpcommTransport::removeMemoryBuffer(BufferDesc& desc) {
    return buffers_->remove(desc);
}

void MpcommTransport::warmupSegment(SegmentID handle) {
    if (!gate_->enter()) return;
    MpcommGateTicket ticket(*gate_);
    // Read inside the gate: install() writes the settings while it is shut.
    if (!preconnect_) return;
    resolver_->warmup(handle);
}

Status MpcommTransport::publishEndpoint(const std::string& attr) {
    SegmentManager& segments = metadata_->segmentManager();
    CHECK_STATUS(segments.updateLocal([&attr](SegmentDesc& desc) {
        std::get<MemorySegmentDesc>(desc.detail).transport_attrs[MPCOMM] = attr;
        return Status::OK();
    }));
    return segments.synchronizeLocal();
}

Status MpcommTransport::withdrawEndpoint() {
    if (!metadata_) return Status::OK();
    SegmentManager& segments = metadata_->segmentManager();
    CHECK_STATUS(segments.updateLocal([](SegmentDesc& desc) {
        std::get<MemorySegmentDesc>(desc.detail).transport_attrs.erase(MPCOMM);
        return Status::OK();
    }));
    return segments.synchronizeLocal();
}

}  // namespace mooncake::tent
