// SegmentID -> MPComm peer; the rules are in mpcomm_peer_resolver.h.
#include "mpcomm_peer_resolver.h"

#include <glog/logging.h>

#include <algorithm>

namespace mooncake::tent {

void MpcommPeerResolver::bind(std::shared_ptr<ControlService> metadata,
                              int remote_tcp_port) {
    metadata_ = std::move(metadata);
    remote_tcp_port_ = remote_tcp_port;
    // Process-wide, so no thread takes another installation's entry.
    static std::atomic<uint64_t> next_owner{1};
    owner_ = next_owner.fetch_add(1);
}

void MpcommPeerResolver::suspect(SegmentID target) {
    std::lock_guard<std::mutex> lock(suspect_mu_);
    if (suspect_.insert(target).second) suspect_count_.fetch_add(1);
}

bool MpcommPeerResolver::takeSuspicion(SegmentID target) {
    std::lock_guard<std::mutex> lock(suspect_mu_);
    if (suspect_.erase(target) == 0) return false;
    suspect_count_.fetch_sub(1);
    return true;
}

namespace {

// The entry's resolution while its lease stands, else null.
MpcommResolvedPeer* currentPeer(const MpcommResolveCacheEntry& entry,
                                SegmentManager::CacheClock::time_point now) {
    if (entry.lease.current(now) && entry.peer &&
        entry.peer->desc == entry.desc) {
        return entry.peer.get();
    }
    return nullptr;
}

}  // namespace

MpcommResolveScope MpcommPeerResolver::scope() {
    // Reached through a TLS descriptor where GCC builds it
    // (src/CMakeLists.txt; elsewhere a __tls_get_addr() call), and once per
    // submission, not per target: taken after the calls below and read
    // back through `scope.cache`, since the compiler otherwise looks it up
    // again for every use.
    thread_local MpcommResolveCache cache_of_thread;
    MpcommResolveScope scope;
    scope.changes = metadata_->segmentManager().remoteChanges();
    scope.now = SegmentManager::cacheNow();
    scope.suspicions = suspect_count_.load(std::memory_order_relaxed) != 0;
    scope.links_lowered = registry_.linksLowered();
    scope.cache = &cache_of_thread;
    MpcommResolveCache& cache = *scope.cache;
    uint64_t epoch = cache.epoch;
    if (cache.epoch_owner != owner_ || cache.epoch_changes != scope.changes ||
        cache.epoch_links_lowered != scope.links_lowered ||
        scope.now >= cache.epoch_expiry) {
        // Never 0 (an entry not ready) nor kNeverReady: 2^64 scopes away.
        epoch = ++cache.epoch;
        cache.epoch_owner = owner_;
        cache.epoch_changes = scope.changes;
        cache.epoch_links_lowered = scope.links_lowered;
        cache.epoch_expiry = SegmentManager::CacheClock::time_point::max();
    }
    scope.ready_stamp =
        scope.suspicions ? MpcommResolveScope::kNeverReady : epoch;
    return scope;
}

Status MpcommPeerResolver::resolve(
    SegmentID target, const MpcommResolveScope& scope,
    MpcommResolvedPeer*& peer,
    std::vector<std::shared_ptr<MpcommResolvedPeer>>& retired) {
    SegmentManager& segments = metadata_->segmentManager();
    if (scope.suspicions && takeSuspicion(target)) {
        segments.invalidateRemote(target);
    }
    MpcommResolveCacheEntry& entry = scope.cache->entryFor(target);
    if (!entry.isFor(owner_, target)) {
        if (entry.peer) retired.push_back(std::move(entry.peer));
        entry = MpcommResolveCacheEntry();
        entry.owner = owner_;
        entry.target = target;
    }
    peer = currentPeer(entry, scope.now);
    if (peer != nullptr) return peer->status;
    entry.ready_since = 0;
    Status found = segments.getRemoteCached(entry.desc, target, entry.lease);
    if (!found.ok() || !entry.desc) {
        entry.desc.reset();
        // Keep suspecting, so the next use reads afresh.
        if (target != LOCAL_SEGMENT_ID) suspect(target);
        peer = nullptr;
        return Status(
            found.ok() ? Status::Code::kInvalidArgument : found.code(),
            "MpcommTransport: cannot read the descriptor of segment id " +
                std::to_string(target) + ": " + std::string(found.message()));
    }
    // Descriptors are immutable snapshots: a changed incarnation or epoch
    // always arrives as a new object.
    if (!entry.peer || entry.peer->desc != entry.desc) {
        auto fresh = std::make_shared<MpcommResolvedPeer>();
        readDescriptor(entry.desc, *fresh);
        fresh->desc = entry.desc;
        if (entry.peer) retired.push_back(std::move(entry.peer));
        entry.peer = std::move(fresh);
    }
    peer = entry.peer.get();
    return peer->status;
}

const MpcommResolvedPeer* MpcommPeerResolver::readyPeer(
    SegmentID target, const MpcommResolveScope& scope) {
    if (scope.suspicions) return nullptr;
    MpcommResolveCacheEntry& entry = scope.cache->entryFor(target);
    if (!entry.isFor(owner_, target)) return nullptr;
    const MpcommResolvedPeer* peer = currentPeer(entry, scope.now);
    if (peer == nullptr || !peer->status.ok() || !peer->linkReady()) {
        return nullptr;
    }
    entry.ready_peer = entry.peer.get();
    // The stamp stands for scope.changes, so a lease filled against a
    // later count (by resolve(), since the scope was taken) is not marked.
    // currentPeer() found the lease unexpired at scope.now; the epoch ends
    // with the first lease marked in it (scope()).
    if (entry.lease.seenChanges() == scope.changes) {
        entry.ready_since = scope.ready_stamp;
        scope.cache->epoch_expiry =
            std::min(scope.cache->epoch_expiry, entry.lease.expiresAt());
    } else {
        entry.ready_since = 0;
    }
    return peer;
}

void MpcommPeerResolver::readDescriptor(const SegmentDescRef& desc,
                                        MpcommResolvedPeer& peer) {
    MpcommPeerView& view = peer.view;
    const std::string& name = desc->name;
    if (desc->type != SegmentType::Memory) {
        peer.status = Status::InvalidArgument(
            "MpcommTransport: segment " + name +
            " is a file segment; MPComm moves memory only");
        return;
    }
    view.host_id = name;
    view.incarnation = desc->incarnation;
    view.registration_epoch = desc->registration_epoch;
    const std::string* attr = desc->getMemory().getTransportAttrs(MPCOMM);
    if (attr != nullptr && !attr->empty()) {
        Status st = parseMpcommEndpointAttr(*attr, view.addr, view.port);
        if (!st.ok()) {
            peer.status =
                Status::InvalidArgument("MpcommTransport: segment " + name +
                                        ": " + std::string(st.message()));
        }
        return;
    }
    if (remote_tcp_port_ != 0) {
        view.addr = mpcommHostOf(name);
        view.port = remote_tcp_port_;
        if (!registry_.contains(name)) {
            LOG(WARNING) << "MpcommTransport: segment " << name
                         << " published no MPComm endpoint; using "
                            "MPCOMM_REMOTE_TCP_PORT="
                         << view.port << " at " << view.addr;
        }
        return;
    }
    peer.status = Status::InvalidArgument(
        "MpcommTransport: segment " + name +
        " published no MPComm endpoint (transport_attrs[MPCOMM] is empty) and "
        "MPCOMM_REMOTE_TCP_PORT is not set; the peer does not run the MPComm "
        "transport");
}

void MpcommPeerResolver::warmup(SegmentID handle) {
    // Only peers that advertise an endpoint: MPCOMM_REMOTE_TCP_PORT is a
    // guess, not worth a background handshake.
    SegmentDescRef desc;
    if (!metadata_->segmentManager().getRemoteCached(desc, handle).ok() ||
        !desc || desc->type != SegmentType::Memory ||
        desc->getMemory().getTransportAttrs(MPCOMM) == nullptr) {
        return;
    }
    MpcommResolvedPeer* peer = nullptr;
    std::vector<std::shared_ptr<MpcommResolvedPeer>> retired;
    if (!resolve(handle, scope(), peer, retired).ok()) return;
    MpcommPeerRegistry::Ticket place;
    Status ignored;
    registry_.poll(peer->view, place, ignored);
}

}  // namespace mooncake::tent
