#include "tent/transport/mpcomm/mpcomm_transport.h"

#include <glog/logging.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <sstream>
#include <unordered_map>
#include <utility>
#include <vector>

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

// Leaves the call gate on scope exit.
class GateTicket {
 public:
    explicit GateTicket(MpcommCallGate& gate) : gate_(gate) {}
    ~GateTicket() { gate_.leave(); }
    GateTicket(const GateTicket&) = delete;
    GateTicket& operator=(const GateTicket&) = delete;

 private:
    MpcommCallGate& gate_;
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

// "10.0.0.1:12345" -> "10.0.0.1"; a name without ':' is all host.
std::string hostPartOf(const std::string& segment_name) {
    size_t colon = segment_name.rfind(':');
    return colon == std::string::npos ? segment_name
                                      : segment_name.substr(0, colon);
}

std::string hexAddr(uint64_t addr) {
    std::ostringstream os;
    os << "0x" << std::hex << addr;
    return os.str();
}

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

}  // namespace

// --- environment ---------------------------------------------------------

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
    env = parsed;
    return Status::OK();
}

// --- call gate -----------------------------------------------------------

bool MpcommCallGate::enter() {
    active_.fetch_add(1);
    if (closed_.load()) {
        leave();
        return false;
    }
    return true;
}

void MpcommCallGate::leave() {
    if (active_.fetch_sub(1) == 1 && closed_.load()) {
        std::lock_guard<std::mutex> lock(mu_);
        drained_.notify_all();
    }
}

void MpcommCallGate::close() {
    closed_.store(true);
    std::unique_lock<std::mutex> lock(mu_);
    drained_.wait(lock, [this] { return active_.load() == 0; });
}

void MpcommCallGate::open() { closed_.store(false); }

// --- lifecycle -----------------------------------------------------------

MpcommTransport::MpcommTransport()
    : MpcommTransport(createDefaultMpcommAdapter()) {}

MpcommTransport::MpcommTransport(std::shared_ptr<MpcommAdapter> adapter)
    : adapter_(std::move(adapter)), registry_(adapter_) {}

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
    if (!adapter_) {
        return Status::InvalidArgument("MpcommTransport: no MPComm adapter");
    }
    if (!adapter_->available()) {
        return Status::NotImplemented(adapter_->unavailableReason());
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
    const std::string attr = buildMpcommEndpointAttr(host_id, tcp_port);
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
    env_ = env;
    local_name_ = host_id;
    installed_ = true;
    generation_.fetch_add(1);
    unwind.dismiss();
    gate_.open();
    LOG(INFO) << "MpcommTransport: Installed successfully, host_id=" << host_id
              << ", tcp_port=" << tcp_port
              << ", devices=" << (devices.empty() ? "(none)" : devices);
    return Status::OK();
}

Status MpcommTransport::uninstall() {
    std::lock_guard<std::mutex> lock(lifecycle_mu_);
    if (!installed_) return Status::OK();
    // From here no caller enters the adapter, and those inside have left.
    gate_.close();
    teardown();
    return Status::OK();
}

void MpcommTransport::teardown() {
    Status st = withdrawEndpoint();
    if (!st.ok()) {
        LOG(WARNING) << "MpcommTransport: could not withdraw the MPComm "
                        "endpoint of "
                     << local_name_ << ": " << st;
    }
    {
        std::lock_guard<std::mutex> lock(buffers_mu_);
        for (const auto& [addr, length] : registered_) {
            void* ptr = reinterpret_cast<void*>(addr);
            adapter_->unpublishBuffer(ptr);
            adapter_->unregisterMemory(ptr);
        }
        registered_.clear();
    }
    registry_.clear();
    adapter_->stopAcceptThread();
    adapter_->shutdown();
    caps = Capabilities{};
    installed_ = false;
    metadata_.reset();
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

// --- registration --------------------------------------------------------

Status MpcommTransport::addMemoryBuffer(BufferDesc& desc,
                                        const MemoryOptions& options) {
    if (!gate_.enter()) {
        return Status::InvalidArgument(
            "MpcommTransport: not installed; cannot register buffer " +
            hexAddr(desc.addr));
    }
    GateTicket ticket(gate_);
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

Status MpcommTransport::addMemoryBuffer(std::vector<BufferDesc>& desc_list,
                                        const MemoryOptions& options) {
    for (size_t i = 0; i < desc_list.size(); ++i) {
        Status st = addMemoryBuffer(desc_list[i], options);
        if (!st.ok()) {
            // All or nothing: take back what this call registered.
            for (size_t j = 0; j < i; ++j) removeMemoryBuffer(desc_list[j]);
            return st;
        }
    }
    return Status::OK();
}

Status MpcommTransport::removeMemoryBuffer(BufferDesc& desc) {
    auto& types = desc.transports;
    types.erase(std::remove(types.begin(), types.end(), MPCOMM), types.end());
    // Uninstalled: shutdown already released every registration.
    if (!gate_.enter()) return Status::OK();
    GateTicket ticket(gate_);
    std::lock_guard<std::mutex> lock(buffers_mu_);
    if (registered_.erase(desc.addr) == 0) return Status::OK();
    void* addr = reinterpret_cast<void*>(desc.addr);
    adapter_->unpublishBuffer(addr);
    adapter_->unregisterMemory(addr);
    return Status::OK();
}

// --- peers ---------------------------------------------------------------

Status MpcommTransport::ensurePeerConnected(SegmentID target,
                                            std::string& host_id) {
    SegmentManager& segments = metadata_->segmentManager();
    SegmentDescRef desc;
    Status found = segments.getRemoteCached(desc, target);
    if (!found.ok() || !desc) {
        return Status(
            found.ok() ? Status::Code::kInvalidArgument : found.code(),
            "MpcommTransport: cannot read the descriptor of "
            "segment id " +
                std::to_string(target) + ": " + std::string(found.message()));
    }
    const std::string& name = desc->name;
    if (desc->type != SegmentType::Memory) {
        return Status::InvalidArgument("MpcommTransport: segment " + name +
                                       " is a file segment; MPComm moves "
                                       "memory only");
    }
    const MemorySegmentDesc& memory = desc->getMemory();
    std::string addr;
    int port = 0;
    const std::string* attr = memory.getTransportAttrs(MPCOMM);
    if (attr != nullptr && !attr->empty()) {
        Status st = parseMpcommEndpointAttr(*attr, addr, port);
        if (!st.ok()) {
            return Status::InvalidArgument("MpcommTransport: segment " + name +
                                           ": " + std::string(st.message()));
        }
    } else if (env_.remote_tcp_port != 0) {
        addr = hostPartOf(name);
        port = env_.remote_tcp_port;
        if (!registry_.contains(name)) {
            LOG(WARNING) << "MpcommTransport: segment " << name
                         << " published no MPComm endpoint; using "
                            "MPCOMM_REMOTE_TCP_PORT="
                         << port << " at " << addr;
        }
    } else {
        return Status::InvalidArgument(
            "MpcommTransport: segment " + name +
            " published no MPComm endpoint (transport_attrs[MPCOMM] is "
            "empty) and MPCOMM_REMOTE_TCP_PORT is not set; the peer does not "
            "run the MPComm transport");
    }

    std::vector<MpcommBufferRange> published;
    for (const auto& buffer : memory.buffers) {
        const auto& types = buffer.transports;
        if (std::find(types.begin(), types.end(), MPCOMM) != types.end()) {
            published.push_back({buffer.addr, buffer.length});
        }
    }
    Status st = registry_.ensure(name, addr, port, published);
    if (!st.ok()) {
        return Status(st.code(), "MpcommTransport: segment " + name + ": " +
                                     std::string(st.message()));
    }
    host_id = name;
    return Status::OK();
}

// --- batches -------------------------------------------------------------

Status MpcommTransport::allocateSubBatch(SubBatchRef& batch, size_t max_size) {
    batch = new MpcommSubBatch(max_size, generation_.load());
    return Status::OK();
}

Status MpcommTransport::freeSubBatch(SubBatchRef& batch) {
    auto* sub = dynamic_cast<MpcommSubBatch*>(batch);
    if (sub == nullptr) {
        return Status::InvalidArgument(
            "MpcommTransport: freeSubBatch got a null or foreign sub-batch");
    }
    if (gate_.enter()) {
        GateTicket ticket(gate_);
        if (sub->generation == generation_.load()) {
            // Transfers still in flight are released here; the adapter
            // defers the provider release until each one is done.
            size_t count = sub->size();
            for (size_t i = 0; i < count; ++i) {
                MpcommTransferHandle handle =
                    sub->tasks[i].mpcomm_handle.exchange(
                        kInvalidMpcommTransferHandle);
                if (handle != kInvalidMpcommTransferHandle) {
                    adapter_->releaseTransfer(handle);
                }
            }
        }
    }
    delete sub;
    batch = nullptr;
    return Status::OK();
}

Status MpcommTransport::submitTransferTasks(
    SubBatchRef batch, const std::vector<Request>& request_list) {
    auto* sub = dynamic_cast<MpcommSubBatch*>(batch);
    if (sub == nullptr) {
        return Status::InvalidArgument(
            "MpcommTransport: submitTransferTasks got a null or foreign "
            "sub-batch");
    }
    if (!gate_.enter()) {
        return Status::InvalidArgument(
            "MpcommTransport: not installed; cannot submit transfers");
    }
    GateTicket ticket(gate_);
    if (sub->generation != generation_.load()) {
        return Status::InvalidArgument(
            "MpcommTransport: sub-batch was allocated before the transport "
            "was installed; allocate a new one");
    }
    std::lock_guard<std::mutex> lock(sub->submit_mu);
    const size_t used = sub->count.load(std::memory_order_relaxed);
    if (request_list.size() > sub->capacity() - used) {
        return Status::TooManyRequests(
            "MpcommTransport: sub-batch capacity is " +
            std::to_string(sub->capacity()) + ", " + std::to_string(used) +
            " tasks submitted, " + std::to_string(request_list.size()) +
            " more requested");
    }

    // Resolve each target once per call; a failure fails only its tasks.
    std::unordered_map<SegmentID, std::pair<Status, std::string>> peers;
    for (size_t i = 0; i < request_list.size(); ++i) {
        const Request& request = request_list[i];
        MpcommTask& task = sub->tasks[used + i];
        task.request = request;
        task.transferred_bytes.store(0, std::memory_order_relaxed);
        task.mpcomm_handle.store(kInvalidMpcommTransferHandle,
                                 std::memory_order_relaxed);

        auto it = peers.find(request.target_id);
        if (it == peers.end()) {
            std::string host_id;
            Status st = ensurePeerConnected(request.target_id, host_id);
            if (!st.ok()) LOG(ERROR) << st.message();
            it = peers.emplace(request.target_id, std::make_pair(st, host_id))
                     .first;
        }
        const auto& [peer_status, host_id] = it->second;
        MpcommTransferHandle handle = kInvalidMpcommTransferHandle;
        if (peer_status.ok()) {
            handle = issueMpcommTransfer(*adapter_, request, host_id);
            if (handle == kInvalidMpcommTransferHandle) {
                LOG(ERROR) << "MpcommTransport: MPComm refused a "
                           << (request.opcode == Request::WRITE ? "WRITE"
                                                                : "READ")
                           << " of " << request.length << " bytes to "
                           << host_id << " at "
                           << hexAddr(request.target_offset);
            }
        }
        task.mpcomm_handle.store(handle, std::memory_order_relaxed);
        task.status_word.store(
            handle == kInvalidMpcommTransferHandle ? FAILED : PENDING,
            std::memory_order_relaxed);
    }
    // Publishes the filled tasks to pollers.
    sub->count.store(used + request_list.size(), std::memory_order_release);
    return Status::OK();
}

Status MpcommTransport::getTransferStatus(SubBatchRef batch, int task_id,
                                          TransferStatus& status) {
    auto* sub = dynamic_cast<MpcommSubBatch*>(batch);
    if (sub == nullptr) {
        return Status::InvalidArgument(
            "MpcommTransport: getTransferStatus got a null or foreign "
            "sub-batch");
    }
    if (task_id < 0 || static_cast<size_t>(task_id) >= sub->size()) {
        return Status::InvalidArgument("MpcommTransport: task id " +
                                       std::to_string(task_id) +
                                       " out of range (sub-batch holds " +
                                       std::to_string(sub->size()) + " tasks)");
    }
    MpcommTask& task = sub->tasks[task_id];
    if (gate_.enter()) {
        GateTicket ticket(gate_);
        if (sub->generation == generation_.load()) {
            pollMpcommTask(*adapter_, task);
        } else {
            abandonMpcommTask(task);
        }
    } else {
        abandonMpcommTask(task);
    }
    status.s = task.status_word.load(std::memory_order_acquire);
    status.transferred_bytes =
        task.transferred_bytes.load(std::memory_order_relaxed);
    return Status::OK();
}

}  // namespace mooncake::tent
