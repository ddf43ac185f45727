// The MPComm transport's lifecycle (install, bounded uninstall), settings,
// capabilities and registration of local memory.
#include "tent/transport/mpcomm/mpcomm_transport.h"

#include <glog/logging.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <limits>
#include <utility>
#include <variant>
#include <vector>

#include "mpcomm_peer_resolver.h"
#include "tent/runtime/topology.h"

namespace mooncake::tent {

namespace {

// Undoes install()'s completed steps, newest first, unless dismissed.
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

constexpr const char kConnectTimeoutKey[] =
    "transports/mpcomm/connect_timeout_ms";
constexpr const char kPreconnectKey[] = "transports/mpcomm/preconnect";
constexpr const char kAdvertiseKey[] = "transports/mpcomm/advertise_address";

Status readPortVariable(const char* name, int& port) {
    const char* value = std::getenv(name);
    if (value == nullptr) return Status::OK();
    Status st = parseMpcommTcpPort(value, port);
    if (!st.ok()) {
        return Status::InvalidArgument(std::string(name) + ": " +
                                       std::string(st.message()));
    }
    return Status::OK();
}

// A present key that is not an integer in range is an error; Config::get()
// alone would silently fall back to the default.
Status readConnectTimeout(const Config& conf, int64_t& timeout_ms) {
    if (!conf.contains(kConnectTimeoutKey)) return Status::OK();
    constexpr int64_t kNotAnInteger = std::numeric_limits<int64_t>::min();
    int64_t value = conf.get<int64_t>(kConnectTimeoutKey, kNotAnInteger);
    if (value == kNotAnInteger) {
        std::string text = conf.get<std::string>(kConnectTimeoutKey, "");
        return Status::InvalidArgument(
            std::string(kConnectTimeoutKey) +
            " must be an integer number of "
            "milliseconds in 1.." +
            std::to_string(MpcommTransportSettings::kMaxConnectTimeoutMs) +
            ", got " +
            (text.empty() ? "a non-integer value" : "'" + text + "'"));
    }
    if (value < 1 || value > MpcommTransportSettings::kMaxConnectTimeoutMs) {
        return Status::InvalidArgument(
            std::string(kConnectTimeoutKey) + " must be in 1.." +
            std::to_string(MpcommTransportSettings::kMaxConnectTimeoutMs) +
            " ms, got " + std::to_string(value));
    }
    timeout_ms = value;
    return Status::OK();
}

// Device memory of any kind (cuda, rocm, ...), by the runtime's
// LocationParser (upstream has the same class).
bool isDeviceBuffer(const std::string& location) {
    const std::string type = LocationParser(location).type();
    return type != "cpu" && type != kWildcardLocation;
}

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

Status MpcommTransportEnv::fromEnvironment(MpcommTransportEnv& env) {
    MpcommTransportEnv parsed;
    CHECK_STATUS(readPortVariable("MPCOMM_TCP_PORT", parsed.tcp_port));
    CHECK_STATUS(
        readPortVariable("MPCOMM_REMOTE_TCP_PORT", parsed.remote_tcp_port));
    const char* filter = std::getenv("MPCOMM_NIC_FILTER");
    if (filter != nullptr && *filter != '\0') {
        parsed.has_nic_filter = true;
        parsed.nic_filter = filter;
    }
    const char* advertise = std::getenv("MPCOMM_ADVERTISE_ADDR");
    if (advertise != nullptr) {
        Status st =
            parseMpcommAdvertiseAddress(advertise, parsed.advertise_address);
        if (!st.ok()) {
            return Status::InvalidArgument("MPCOMM_ADVERTISE_ADDR: " +
                                           std::string(st.message()));
        }
    }
    env = parsed;
    return Status::OK();
}

Status MpcommTransportSettings::fromConfig(const Config* conf,
                                           const MpcommTransportEnv& env,
                                           MpcommTransportSettings& settings) {
    MpcommTransportSettings parsed;
    if (conf != nullptr) {
        CHECK_STATUS(readConnectTimeout(*conf, parsed.connect_timeout_ms));
        parsed.preconnect = conf->get(kPreconnectKey, true);
        std::string advertise = conf->get(kAdvertiseKey, "");
        if (conf->contains(kAdvertiseKey)) {
            Status st = parseMpcommAdvertiseAddress(advertise,
                                                    parsed.advertise_address);
            if (!st.ok()) {
                return Status::InvalidArgument(std::string(kAdvertiseKey) +
                                               ": " +
                                               std::string(st.message()));
            }
        }
    }
    // The variable wins over the key.
    if (!env.advertise_address.empty()) {
        parsed.advertise_address = env.advertise_address;
    }
    settings = parsed;
    return Status::OK();
}

MpcommTransport::MpcommTransport()
    : MpcommTransport(createDefaultMpcommAdapter()) {}

MpcommTransport::MpcommTransport(std::shared_ptr<MpcommAdapter> adapter)
    : adapter_(std::move(adapter)),
      registry_(adapter_),
      resolver_(std::make_unique<MpcommPeerResolver>(registry_)) {}

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
    // MPComm pins GPU pages through nvidia-peermem and has no fallback.
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
    // Validated before the provider is touched.
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
        publishEndpoint("");
        metadata_.reset();
    });
    CHECK_STATUS(publishEndpoint(attr));

    caps = probeCapabilities(modules_path_, conf.get());
    connect_timeout_ms_ = settings.connect_timeout_ms;
    preconnect_ = settings.preconnect;
    local_name_ = host_id;
    resolver_->bind(metadata, env.remote_tcp_port);
    installed_ = true;
    const uint64_t generation = generation_.fetch_add(1) + 1;
    unwind.dismiss();
    open_generation_.store(generation);
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
    // One bound for the callers waiting for a handshake and the
    // handshakes themselves.
    const auto deadline = std::chrono::steady_clock::now() +
                          std::chrono::milliseconds(connect_timeout_ms_);
    closeGate();
    teardown(deadline);
    return Status::OK();
}

void MpcommTransport::teardown(std::chrono::steady_clock::time_point deadline) {
    Status st = publishEndpoint("");
    if (!st.ok()) {
        LOG(WARNING) << "MpcommTransport: could not withdraw the MPComm "
                        "endpoint of "
                     << local_name_ << ": " << st;
    }
    releaseAllBuffers();
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

void MpcommTransport::notifyDrained() {
    std::lock_guard<std::mutex> lock(drain_mu_);
    drained_.notify_all();
}

void MpcommTransport::closeGate() {
    open_generation_.store(0);
    std::unique_lock<std::mutex> lock(drain_mu_);
    drained_.wait(lock, [this] { return active_calls_.load() == 0; });
}

// Without GPU support a device pointer would be registered as host memory.
Status MpcommTransport::checkDeviceSupport(const BufferDesc& desc) const {
    if (!isDeviceBuffer(desc.location) || caps.gpu_to_gpu) {
        return Status::OK();
    }
    return Status::InvalidArgument(
        "mpcomm transport cannot register device memory at " + desc.location +
        ": GPU memory support is off (nvidia_peermem not loaded, or "
        "transports/mpcomm/disable_gpu_direct_rdma is true)");
}

// Registers and publishes an address once; a second add only tags it.
Status MpcommTransport::addMemoryBuffer(BufferDesc& desc,
                                        const MemoryOptions& options) {
    CHECK_STATUS(checkDeviceSupport(desc));
    if (enterCall() == 0) {
        return Status::InvalidArgument(
            "MpcommTransport: not installed; cannot register buffer " +
            mpcommHexAddr(desc.addr));
    }
    CallTicket ticket{this};
    void* addr = reinterpret_cast<void*>(desc.addr);
    std::lock_guard<std::mutex> lock(buffers_mu_);
    if (registered_.count(desc.addr) == 0) {
        CHECK_STATUS(adapter_->registerMemory(addr, desc.length));
        // NUMA placement is left to MPComm (-1).
        Status st = adapter_->publishBuffer(addr, desc.length, -1);
        if (!st.ok()) {
            adapter_->unregisterMemory(addr);
            return st;
        }
        registered_[desc.addr] = desc.length;
    }
    if (std::find(desc.transports.begin(), desc.transports.end(), MPCOMM) ==
        desc.transports.end()) {
        desc.transports.push_back(MPCOMM);
    }
    return Status::OK();
}

// All or nothing: a failure takes back what this call registered.
Status MpcommTransport::addMemoryBuffer(std::vector<BufferDesc>& desc_list,
                                        const MemoryOptions& options) {
    for (const BufferDesc& desc : desc_list) {
        CHECK_STATUS(checkDeviceSupport(desc));
    }
    for (size_t i = 0; i < desc_list.size(); ++i) {
        Status st = addMemoryBuffer(desc_list[i], options);
        if (!st.ok()) {
            for (size_t j = 0; j < i; ++j) removeMemoryBuffer(desc_list[j]);
            return st;
        }
    }
    return Status::OK();
}

Status MpcommTransport::removeMemoryBuffer(BufferDesc& desc) {
    auto& types = desc.transports;
    types.erase(std::remove(types.begin(), types.end(), MPCOMM), types.end());
    // Not installed: shutdown already released every registration.
    if (enterCall() == 0) return Status::OK();
    CallTicket ticket{this};
    std::lock_guard<std::mutex> lock(buffers_mu_);
    if (registered_.erase(desc.addr) == 0) return Status::OK();
    void* addr = reinterpret_cast<void*>(desc.addr);
    adapter_->unpublishBuffer(addr);
    adapter_->unregisterMemory(addr);
    return Status::OK();
}

void MpcommTransport::releaseAllBuffers() {
    std::lock_guard<std::mutex> lock(buffers_mu_);
    for (const auto& [addr, length] : registered_) {
        void* ptr = reinterpret_cast<void*>(addr);
        adapter_->unpublishBuffer(ptr);
        adapter_->unregisterMemory(ptr);
    }
    registered_.clear();
}

void MpcommTransport::warmupSegment(SegmentID handle) {
    if (enterCall() == 0) return;
    CallTicket ticket{this};
    if (!preconnect_) return;
    resolver_->warmup(handle);
}

// Publishes `attr` as this segment's MPComm endpoint; "" withdraws it.
Status MpcommTransport::publishEndpoint(const std::string& attr) {
    if (!metadata_) return Status::OK();
    SegmentManager& segments = metadata_->segmentManager();
    CHECK_STATUS(segments.updateLocal([&attr](SegmentDesc& desc) {
        auto& attrs = std::get<MemorySegmentDesc>(desc.detail).transport_attrs;
        if (attr.empty()) {
            attrs.erase(MPCOMM);
        } else {
            attrs[MPCOMM] = attr;
        }
        return Status::OK();
    }));
    return segments.synchronizeLocal();
}

}  // namespace mooncake::tent
