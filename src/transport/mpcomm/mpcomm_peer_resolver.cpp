// SegmentID -> MPComm peer, the per-thread resolution cache, suspicion of
// restarted peers, and pre-connect (the handshake started at
// openSegment()). The rules are in mpcomm_peer_resolver.h.
#include "mpcomm_peer_resolver.h"

#include <glog/logging.h>

namespace mooncake::tent {

void MpcommPeerResolver::bind(std::shared_ptr<ControlService> metadata,
                              int remote_tcp_port) {
    metadata_ = std::move(metadata);
    remote_tcp_port_ = remote_tcp_port;
    // Process-wide, so that no thread's cached resolution from another
    // transport, or from an earlier installation of this one (other
    // settings, other segment manager), is taken for ours.
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

// The entry's resolution when it still stands: a current lease means
// entry.desc is what getRemoteCached() would hand out, and entry.peer was
// read from it. Null otherwise.
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
    // The thread_local's address costs a __tls_get_addr() call in a shared
    // library: once per submission, not once per target.
    thread_local MpcommResolveCache cache;
    MpcommResolveScope scope;
    scope.now = SegmentManager::cacheNow();
    scope.cache = &cache;
    scope.suspicions = suspect_count_.load(std::memory_order_relaxed) != 0;
    scope.links_lowered = registry_.linksLowered();
    return scope;
}

Status MpcommPeerResolver::resolve(
    SegmentID target, const MpcommResolveScope& scope,
    MpcommResolvedPeer*& peer,
    std::vector<std::shared_ptr<MpcommResolvedPeer>>& retired) {
    SegmentManager& segments = metadata_->segmentManager();
    if (scope.suspicions && takeSuspicion(target)) {
        // A failed transfer may mean a restarted peer: the cached descriptor
        // would still show the old process.
        segments.invalidateRemote(target);
    }
    MpcommResolveCacheEntry& entry = scope.cache->entryFor(target);
    if (!entry.isFor(owner_, target)) {
        // The caller may still point at the evicted resolution.
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
        // Unreachable now; keep suspecting so the next use reads afresh.
        if (target != LOCAL_SEGMENT_ID) suspect(target);
        peer = nullptr;
        return Status(
            found.ok() ? Status::Code::kInvalidArgument : found.code(),
            "MpcommTransport: cannot read the descriptor of segment id " +
                std::to_string(target) + ": " + std::string(found.message()));
    }
    // The same descriptor object means the same content (descriptors are
    // immutable snapshots, and the entry holds this one alive, so its
    // address cannot be reused): a changed incarnation or registration
    // epoch always arrives as a new descriptor.
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
    // A suspicion is taken by resolve(), never here.
    if (scope.suspicions) return nullptr;
    MpcommResolveCacheEntry& entry = scope.cache->entryFor(target);
    if (!entry.isFor(owner_, target)) return nullptr;
    const MpcommResolvedPeer* peer = currentPeer(entry, scope.now);
    if (peer == nullptr || !peer->status.ok() || !peer->linkReady()) {
        return nullptr;
    }
    // scope.links_lowered was read before linkReady() looked.
    entry.ready_peer = entry.peer.get();
    entry.ready_since = scope.links_lowered + 1;
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
    // Only peers that advertise an endpoint: the MPCOMM_REMOTE_TCP_PORT
    // fallback guesses, and a guess is not worth a background handshake.
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
    // Starts the handshake if one is due; nobody waits for it here.
    registry_.poll(peer->view, place, ignored);
}

}  // namespace mooncake::tent
