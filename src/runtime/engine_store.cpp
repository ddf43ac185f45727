// TransferEngineImpl with a metadata store (metadata_type etcd or redis):
// the store client, the segment's name, and its publication. The store is
// only the directory: data still moves over the transports, and the RPC
// server still runs (its port names the segment when local_segment_name is
// not set, as with p2p).
#include <glog/logging.h>

#include "common/range_check.h"
#include "runtime/segment_publisher.h"
#include "runtime/store_health.h"
#include "runtime/store_segment_fetcher.h"
#include "runtime/transfer_engine_impl.h"

namespace mooncake::tent {

namespace {
// metadata/cache_ttl_ms when a store watch is live and the key is not set.
constexpr int64_t kDefaultWatchCacheTtlMs = 300000;
}  // namespace

Status TransferEngineImpl::openMetadataStore(
    const std::string& type, std::shared_ptr<SegmentFetcher>& fetcher) {
    MetaStoreOptions options;
    options.timeout_ms =
        conf_->get("metadata/store_timeout_ms", options.timeout_ms);
    options.ttl_ms = conf_->get("metadata/ttl_ms", options.ttl_ms);
    options.max_value_bytes =
        conf_->get("metadata/max_value_bytes", options.max_value_bytes);
    options.watch_reconnect_max_ms = conf_->get(
        "metadata/watch_reconnect_max_ms", options.watch_reconnect_max_ms);
    if (options.watch_reconnect_max_ms <= 0) {
        return Status::InvalidArgument(
            "metadata/watch_reconnect_max_ms must be positive, got " +
            std::to_string(options.watch_reconnect_max_ms));
    }
    const std::string servers = conf_->get("metadata_servers", "");
    std::shared_ptr<MetaStore> store;
    CHECK_STATUS(MetaStore::Create(type, servers, options, store));
    // Unreachable at start is an error: a segment nobody can find is of
    // no use, and the operator wants to hear about it now.
    Status s = store->ping();
    if (!s.ok()) {
        return Status(s.code(), "cannot reach the " + type +
                                    " metadata store at " + servers + ": " +
                                    std::string(s.message()));
    }
    store_ = std::move(store);
    store_health_ = std::make_shared<StoreHealth>(*store_);
    fetcher = std::make_shared<StoreSegmentFetcher>(store_, store_health_);
    return Status::OK();
}

std::string TransferEngineImpl::storeSegmentName() {
    const std::string configured = conf_->get("local_segment_name", "");
    if (configured.empty()) {
        return hostname_ + ":" + std::to_string(rpc_port_);
    }
    // The transports take their listening host from the segment name when
    // it is host:port; a chosen name is not, so they are told the host.
    conf_->set("rpc_server_hostname", hostname_);
    if (!conf_->contains("transports/mpcomm/advertise_address")) {
        conf_->set("transports/mpcomm/advertise_address", hostname_);
    }
    return configured;
}

Status TransferEngineImpl::claimSegmentName() {
    publisher_ = std::make_shared<SegmentPublisher>(
        store_, store_health_, segments_,
        conf_->get("metadata/ttl_ms", MetaStoreOptions::kDefaultTtlMs),
        conf_->get("metadata/store_timeout_ms",
                   MetaStoreOptions::kDefaultTimeoutMs),
        hostname_ + ":" + std::to_string(rpc_port_));
    return publisher_->claim();
}

Status TransferEngineImpl::startPublishing() {
    // The transports have added their endpoints: this first write is what
    // peers read, and from here on every change is written by the thread.
    CHECK_STATUS(publisher_->start());
    // Weak: a listener copied by a synchronizeLocal() that races with
    // teardown finds the publisher stopped (or gone), never freed.
    std::weak_ptr<SegmentPublisher> publisher = publisher_;
    segments_->setPublishListener([publisher] {
        if (auto live = publisher.lock()) live->publishChange();
    });
    // The store's change notifications invalidate peers' descriptors as
    // they change; the TTL is then only the backstop for what they miss
    // (a key that expired with its writer), so it defaults longer.
    const int64_t watch_ttl_ms = conf_->get<int64_t>(
        "metadata/watch_cache_ttl_ms", kDefaultWatchCacheTtlMs);
    if (watch_ttl_ms < 0) {
        return Status::InvalidArgument(
            "metadata/watch_cache_ttl_ms must not be negative, got " +
            std::to_string(watch_ttl_ms));
    }
    if (conf_->get("metadata/watch", true) && segments_->startWatching()) {
        if (!conf_->contains("metadata/cache_ttl_ms")) {
            segments_->setCacheTtl(std::chrono::milliseconds(watch_ttl_ms));
        }
        LOG(INFO) << "TransferEngine: watching the " << store_->type()
                  << " store for segment changes; metadata/cache_ttl_ms="
                  << segments_->cacheTtl().count();
    }
    return Status::OK();
}

void TransferEngineImpl::stopPublishing() {
    if (segments_) {
        segments_->setPublishListener(nullptr);
        segments_->stopWatching();
    }
    if (publisher_) publisher_->stop();
    publisher_.reset();
}

}  // namespace mooncake::tent
