// TransferEngineImpl construction: configuration, control plane, segment
// manager and transports; and the teardown that undoes them in reverse.
#include <glog/logging.h>

#include <chrono>

#include "common/range_check.h"
#include "net/auth_handshake.h"
#include "runtime/transfer_engine_impl.h"

namespace mooncake::tent {

TransferEngineImpl::TransferEngineImpl(std::shared_ptr<Config> conf,
                                       const std::string& config_path)
    : conf_(std::move(conf)) {
    init_status_ = construct(config_path);
    if (!init_status_.ok()) {
        LOG(ERROR) << "TransferEngine is not available: "
                   << init_status_.message();
        // Whatever came up before the failure goes down again now, so an
        // unavailable engine holds no port and no threads.
        teardown();
    }
}

TransferEngineImpl::~TransferEngineImpl() { teardown(); }

Status TransferEngineImpl::notAvailable() const {
    return Status::InternalError("TransferEngine is not available: " +
                                 std::string(init_status_.message()));
}

Status TransferEngineImpl::construct(const std::string& config_path) {
    if (!conf_) conf_ = std::make_shared<Config>();
    if (!config_path.empty()) CHECK_STATUS(conf_->loadFile(config_path));
    CHECK_STATUS(conf_->applyEnvOverride());

    const std::string metadata_type = conf_->get("metadata_type", "p2p");
    if (metadata_type != "p2p" && metadata_type != "etcd" &&
        metadata_type != "redis" && metadata_type != "http") {
        return Status::InvalidMetadataType(
            "metadata_type " + metadata_type +
            " is not supported (p2p, etcd, redis and http are)");
    }

    topology_ = std::make_shared<Topology>();
    Status s = topology_->discover();
    if (!s.ok()) {
        // Transports that need devices check the topology themselves; an
        // empty one is valid (see topology.h).
        LOG(WARNING) << "Topology discovery failed, continuing without "
                        "devices: "
                     << s.message();
        topology_ = std::make_shared<Topology>();
    }

    int64_t ttl_ms = conf_->get<int64_t>("metadata/cache_ttl_ms", 10000);
    if (ttl_ms < 0) {
        return Status::InvalidArgument(
            "metadata/cache_ttl_ms must not be negative, got " +
            std::to_string(ttl_ms));
    }
    const int64_t miss_refresh_ms =
        conf_->get<int64_t>("metadata/miss_refresh_interval_ms",
                            SegmentManager::kDefaultMissRefreshIntervalMs);
    if (miss_refresh_ms < 0) {
        return Status::InvalidArgument(
            "metadata/miss_refresh_interval_ms must not be negative, got " +
            std::to_string(miss_refresh_ms));
    }
    int rpc_timeout_ms =
        conf_->get("rpc/timeout_ms", P2PSegmentFetcher::kDefaultTimeoutMs);
    CHECK_STATUS(checkPositive("rpc/timeout_ms", rpc_timeout_ms));
    std::string auth_token;
    CHECK_STATUS(net::readAuthToken(*conf_, auth_token));
    auto p2p_fetcher =
        std::make_shared<P2PSegmentFetcher>(rpc_timeout_ms, auth_token);
    std::shared_ptr<SegmentFetcher> fetcher = p2p_fetcher;
    if (metadata_type != "p2p") {
        CHECK_STATUS(openMetadataStore(metadata_type, fetcher));
    }
    // Named once the RPC port is bound (startControlPlane()).
    segments_ = std::make_shared<SegmentManager>(
        "", std::move(fetcher), std::chrono::milliseconds(ttl_ms));
    segments_->setMissRefreshInterval(
        std::chrono::milliseconds(miss_refresh_ms));
    // The bounds of descriptor fetching as the components hold them.
    LOG(INFO) << "TransferEngine: metadata/cache_ttl_ms="
              << segments_->cacheTtl().count()
              << ", rpc/timeout_ms=" << p2p_fetcher->timeoutMs();
    LOG(INFO) << "TransferEngine: metadata/miss_refresh_interval_ms="
              << segments_->missRefreshInterval().count();
    CHECK_STATUS(startControlPlane());
    CHECK_STATUS(startNotifications());
    if (store_) CHECK_STATUS(claimSegmentName());

    CHECK_STATUS(FailoverSettings::load(*conf_, failover_));
    CHECK_STATUS(startMetrics());
    CHECK_STATUS(selector_.loadPolicy(*conf_, topology_.get()));
    loadTransports();
    CHECK_STATUS(startProgressWorker());
    if (store_) CHECK_STATUS(startPublishing());
    return Status::OK();
}

Status TransferEngineImpl::startControlPlane() {
    const Json::Value port_value = conf_->getValue("rpc_server_port");
    int64_t port = 0;
    if (!port_value.isNull()) {
        if (!port_value.isIntegral() || port_value.asInt64() < 0 ||
            port_value.asInt64() > 65535) {
            return Status::InvalidArgument(
                "rpc_server_port must be an integer in [0, 65535], got " +
                port_value.toStyledString().substr(
                    0, port_value.toStyledString().find('\n')));
        }
        port = port_value.asInt64();
    }
    control_ = std::make_shared<ControlService>(segments_);
    CHECK_STATUS(control_->configure(*conf_));
    Status started = control_->start(static_cast<uint16_t>(port));
    if (!started.ok() && port != 0) {
        // As upstream: a configured port is a preference. Two engines given
        // the same one both start; the second serves on a free port, which
        // getRpcServerPort() and (p2p) the segment name report.
        LOG(WARNING) << "TransferEngine: rpc_server_port " << port
                     << " cannot be bound (" << started.message()
                     << "); serving on a free port instead";
        started = control_->start(0);
    }
    CHECK_STATUS(started);
    rpc_port_ = control_->port();

    hostname_ = conf_->get("rpc_server_hostname", "");
    if (hostname_.empty()) hostname_ = discoverLocalHostname();
    // p2p metadata: peers find us by this name, so it replaces any
    // configured local_segment_name. A store keeps a configured one.
    local_segment_name_ = store_ ? storeSegmentName()
                                 : hostname_ + ":" + std::to_string(rpc_port_);
    conf_->set("local_segment_name", local_segment_name_);
    CHECK_STATUS(segments_->updateLocal([this](SegmentDesc& desc) {
        desc.name = local_segment_name_;
        desc.machine_id = localMachineId();
        return Status::OK();
    }));
    LOG(INFO) << "TransferEngine: segment " << local_segment_name_
              << " (metadata_type=" << conf_->get("metadata_type", "p2p")
              << ")";
    return Status::OK();
}

void TransferEngineImpl::loadTransports() {
    std::vector<TransportType> loaded;
    for (const TransportEntry& entry : transportTable()) {
        const std::string gate =
            std::string("transports/") + entry.name + "/enable";
        if (!conf_->get(gate, entry.enabled_by_default)) continue;
        std::unique_ptr<Transport> transport = buildTransport(entry);
        std::string name = local_segment_name_;
        Status s = transport->install(name, control_, topology_, conf_);
        if (!s.ok()) {
            LOG(WARNING) << "Transport " << entry.name
                         << " skipped: " << s.message();
            // A half-installed transport may hold threads or sockets.
            transport->uninstall();
            continue;
        }
        loaded.push_back(entry.type);
        transports_.push_back(Loaded{&entry, std::move(transport)});
    }
    selector_.setLoaded(loaded);
    // What each one declared at install: selection routes by it.
    for (const Loaded& l : transports_) {
        selector_.setCapabilities(l.entry->type, l.transport->capabilities());
    }
    copy_requests_ = false;
    for (const Loaded& l : transports_) {
        copy_requests_ |=
            failover_.enabled() && !l.transport->keepsTaskRequests();
    }
    if (transports_.empty()) {
        LOG(WARNING) << "TransferEngine: no transport is loaded; memory "
                        "registration will fail";
    }
}

void TransferEngineImpl::teardown() {
    metrics_server_.reset();  // bounded: see MetricsHttpServer::stop()
    // No pass over the batches runs once they are released below.
    if (progress_worker_) progress_worker_->stop();
    // The name is given up first: peers stop finding a segment that is
    // going away.
    stopPublishing();
    // Frees the sub-batches while their transports are still there.
    batches_.releaseAll();
    // Transports go first: they may still talk to peers through the
    // segment manager, and peers may still ask our control service.
    for (auto it = transports_.rbegin(); it != transports_.rend(); ++it) {
        Status s = it->transport->uninstall();
        if (!s.ok()) {
            LOG(WARNING) << "Transport " << it->entry->name
                         << " uninstall failed: " << s.message();
        }
    }
    {
        // Memory a transport allocated (shm) goes back to it while it
        // still exists; no transport touches memory once uninstalled.
        std::lock_guard<std::mutex> lock(memory_mu_);
        for (auto it = allocations_.begin(); it != allocations_.end();) {
            if (!it->second.owner) {
                ++it;
                continue;
            }
            it->second.owner->freeLocalMemory(it->first, it->second.size);
            it = allocations_.erase(it);
        }
    }
    transports_.clear();
    // Before the control service: its Notify handler fills inbox_.
    if (channel_) channel_->stop();
    if (control_) control_->stop();
    channel_.reset();
    inbox_.reset();
    control_.reset();
    {
        std::lock_guard<std::mutex> lock(memory_mu_);
        for (auto& [ptr, a] : allocations_) {
            a.platform->free(ptr, a.size, a.location);
        }
        allocations_.clear();
        registered_.clear();
    }
    segments_.reset();
}

std::vector<std::string> TransferEngineImpl::installedTransportNames() const {
    std::vector<std::string> names;
    for (const Loaded& l : transports_) names.push_back(l.entry->name);
    return names;
}

}  // namespace mooncake::tent
