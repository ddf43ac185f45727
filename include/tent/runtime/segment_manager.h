// SegmentManager: the local segment descriptor and the remote ones we use.
//
// Local: the descriptor starts with the name given to the constructor (the
// engine renames it with updateLocal() once its RPC port is bound).
// getLocal() hands out immutable snapshots (copy-on-write). The only
// way to change the descriptor is updateLocal(mutator), which runs the
// mutator on a private copy and publishes it only if the mutator succeeds;
// concurrent updates are serialized, none is lost. synchronizeLocal() makes
// the latest snapshot visible to peers (with p2p metadata the RPC server
// serves getLocal() on demand, so it is a publication barrier).
//
// Remote: openRemote() resolves a segment name through the fetcher and
// assigns a SegmentID (never LOCAL_SEGMENT_ID; reopening a closed name gives
// a fresh id). Each open segment has one shared copy of its descriptor per
// manager, valid for `cache_ttl` after the store read that filled it;
// getRemoteCached() serves from a per-thread entry pointing at that copy
// (a hit takes no lock), refills the entry from the shared copy, and only
// when that is stale reads the store: one thread per segment at a time,
// the others waiting for and taking its result, so store reads are
// O(peers) per engine whatever the number of threads. invalidateRemote()
// drops the shared copy and every thread's entry for that id. A request naming
// memory the cached copy does not hold (the peer registered it after the copy
// was read) calls refreshAfterMiss(), which re-reads the descriptor at most
// once per segment per `miss_refresh_interval`, so a wrong address cannot make
// every request fetch.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "tent/runtime/segment.h"

namespace mooncake::tent {

// Fetches a peer's descriptor by segment name (p2p: "host:port" -> RPC).
class SegmentFetcher {
 public:
    virtual ~SegmentFetcher() = default;
    virtual Status fetch(const std::string& segment_name, SegmentDesc& out) = 0;
    // Starts the change notifications of the fetcher's source, where it has
    // them: `changed(name)` when segment `name` was written or removed
    // there, `gap()` when notifications may have been lost (the
    // subscription broke and is back). False (the default: p2p, http)
    // when there are none. stopWatching() returns once no callback runs.
    virtual bool startWatching(
        std::function<void(const std::string& segment_name)> changed,
        std::function<void()> gap) {
        (void)changed;
        (void)gap;
        return false;
    }
    virtual void stopWatching() {}
};

class SegmentManager {
 public:
    using Mutator = std::function<Status(SegmentDesc&)>;
    using CacheClock = std::chrono::steady_clock;

    // One open remote segment, and one thread's cached copy of its
    // descriptor (opaque; named here only so that the per-thread caches
    // can hold them).
    struct OpenSegment;
    struct CacheEntry;
    // The engine's one copy of an open segment's descriptor.
    struct SharedCopy;

    // A caller's hold on the calling thread's cached copy of one remote
    // descriptor, for callers that keep a cache of their own per target
    // (a transport's per-thread peer resolutions). current() answers, with
    // no lock, hash look-up or clock read, whether getRemoteCached() would
    // still hand out the same descriptor: the copy's TTL has not run out at
    // `now`, and nothing that can change a copy before then has happened
    // since the lease was filled (an invalidateRemote() or closeRemote(),
    // a getRemote() refresh, the manager's destruction). It reads the
    // lease and one count the manager shares among its leases, never the
    // segment's or the cache entry's memory, so the leases of many
    // segments cost little more than one to check. Any of those events
    // ends every lease of the manager, on every thread; an ended lease
    // costs its holder one getRemoteCached() hit. Refills after a copy
    // expired end none. Valid only on the thread that filled it.
    class RemoteLease {
     public:
        // `now` from cacheNow(), read once for a run of checks.
        bool current(CacheClock::time_point now) const {
            return changes_ != nullptr && now < expiry_ &&
                   changes_->load(std::memory_order_acquire) == seen_;
        }
        // current() against `changes`, the manager's remoteChanges() read
        // once for a run of checks (before `now`): no shared memory is
        // read. A reset lease's expiry is the clock's epoch, so it is never
        // current.
        bool currentAt(CacheClock::time_point now, uint64_t changes) const {
            return now < expiry_ && changes == seen_;
        }
        // When its TTL runs out: a caller that keeps many leases current
        // under one change count checks their earliest end once.
        CacheClock::time_point expiresAt() const { return expiry_; }
        // The change count it was filled against.
        uint64_t seenChanges() const { return seen_; }
        void reset() { *this = RemoteLease(); }

     private:
        friend class SegmentManager;
        // The manager's change count (shared, so a lease never outlives
        // what it reads), and its value when the lease was filled.
        std::shared_ptr<const std::atomic<uint64_t>> changes_;
        uint64_t seen_ = 0;
        CacheClock::time_point expiry_{};
    };

    // The clock of the cache's expiry times: CLOCK_MONOTONIC at tick
    // resolution (see segment_manager.cpp).
    static CacheClock::time_point cacheNow();

    SegmentManager(
        std::string local_segment_name, std::shared_ptr<SegmentFetcher> fetcher,
        std::chrono::milliseconds cache_ttl = std::chrono::milliseconds(10000));
    ~SegmentManager();

    SegmentDescRef getLocal() const;
    // Moves after every updateLocal() swapped the local snapshot in: a
    // snapshot taken by getLocal() after reading version V is current
    // while localVersion() still reads V (see RemoteDescMemo::local).
    uint64_t localVersion() const {
        return local_version_.load(std::memory_order_acquire);
    }
    Status updateLocal(const Mutator& mutator);
    Status synchronizeLocal();
    // Called by synchronizeLocal() each time it publishes a new snapshot,
    // on the caller's thread: a metadata store's publisher writes it out
    // and waits for that within its bound (metadata/store_timeout_ms).
    // Empty (the default, and p2p): peers read getLocal() on demand.
    void setPublishListener(std::function<void()> listener);
    // Number of synchronizeLocal() calls that published a new snapshot.
    uint64_t publishedVersion() const { return published_version_.load(); }
    // The count every RemoteLease of this manager was filled against; any
    // event that ends the leases moves it.
    uint64_t remoteChanges() const {
        return remote_changes_->load(std::memory_order_acquire);
    }
    // Unique in the process and never reused, unlike the manager's address:
    // what a per-thread cache of its descriptors is keyed by.
    uint64_t instanceId() const { return instance_id_; }

    Status openRemote(SegmentID& handle, const std::string& segment_name);
    Status closeRemote(SegmentID handle);
    // LOCAL_SEGMENT_ID yields getLocal(). The segment's name is the
    // descriptor's `name`. `desc` may come in holding a descriptor; it is
    // left alone when that is still the current one.
    Status getRemoteCached(SegmentDescRef& desc, SegmentID handle);
    // The same, and fills `lease` for the descriptor handed out (resets it
    // for the local segment, whose descriptor is not cached).
    Status getRemoteCached(SegmentDescRef& desc, SegmentID handle,
                           RemoteLease& lease);
    // Always fetches and refreshes the calling thread's cache.
    Status getRemote(SegmentDescRef& desc, SegmentID handle);
    Status invalidateRemote(SegmentID handle);
    // The same for the segment open under `segment_name` (none: nothing to
    // do), and for every open segment.
    void invalidateRemote(const std::string& segment_name);
    void invalidateAllRemote();
    // Turns the fetcher's change notifications into invalidations, so that
    // a change is seen before the TTL runs out; false when the fetcher has
    // none. Stopped by stopWatching() or the destructor.
    bool startWatching();
    void stopWatching();
    // Notifications that invalidated an open segment.
    uint64_t watchInvalidations() const {
        return watch_invalidations_.load(std::memory_order_relaxed);
    }

    // After a look-up in the descriptor of `handle` missed (no buffer of it
    // covers a request's range): drops every thread's cached copy and
    // re-reads it into `desc` (refreshed true), unless this segment was
    // re-read so within the last miss_refresh_interval, another thread is
    // re-reading it now, or `handle` is LOCAL_SEGMENT_ID (always current):
    // then OK, `desc` untouched and refreshed false. A failed fetch is
    // returned as getRemote() returns it.
    Status refreshAfterMiss(SegmentDescRef& desc, SegmentID handle,
                            bool& refreshed);
    // Re-reads refreshAfterMiss() started, over every segment.
    uint64_t missRefreshes() const {
        return miss_refreshes_.load(std::memory_order_relaxed);
    }
    void setMissRefreshInterval(std::chrono::milliseconds interval) {
        miss_interval_ms_ = interval.count();
    }
    std::chrono::milliseconds missRefreshInterval() const {
        return std::chrono::milliseconds(miss_interval_ms_.load());
    }
    static constexpr int64_t kDefaultMissRefreshIntervalMs = 1000;
    // Remote descriptors read through the fetcher (the store or the peer),
    // openRemote()'s first reads included.
    uint64_t remoteFetches() const {
        return remote_fetches_.load(std::memory_order_relaxed);
    }

    void setCacheTtl(std::chrono::milliseconds ttl) { ttl_ms_ = ttl.count(); }
    std::chrono::milliseconds cacheTtl() const {
        return std::chrono::milliseconds(ttl_ms_.load());
    }

 private:
    Status lookupRemote(SegmentDescRef& desc, SegmentID handle,
                        RemoteLease* lease);
    // Refills this thread's cache entry from the engine's shared copy,
    // reading the store only when that is stale (or `force`), one thread
    // per segment at a time; getRemote() without ending any lease, for
    // when the entry it replaces was not current.
    Status fetchRemote(SegmentDescRef& desc, SegmentID handle,
                       bool force = false);
    // Reads `seg` from the store and publishes it as the shared copy;
    // called under the segment's fetch_mu.
    Status readStore(OpenSegment& seg, std::shared_ptr<const SharedCopy>& out);
    void fillThreadEntry(SegmentID handle,
                         const std::shared_ptr<OpenSegment>& seg,
                         const SharedCopy& copy);
    // The open segment `handle` names; InvalidArgument "unknown segment id
    // N" when none is open under it.
    Status findRemote(SegmentID handle,
                      std::shared_ptr<OpenSegment>& seg) const;

    std::shared_ptr<SegmentFetcher> fetcher_;
    std::atomic<int64_t> ttl_ms_;
    std::atomic<int64_t> miss_interval_ms_{kDefaultMissRefreshIntervalMs};
    std::atomic<uint64_t> miss_refreshes_{0};
    std::atomic<uint64_t> remote_fetches_{0};
    std::atomic<uint64_t> watch_invalidations_{0};
    std::atomic<bool> watching_{false};
    const uint64_t instance_id_;

    mutable std::mutex local_mu_;  // guards local_ (pointer swap)
    std::mutex update_mu_;         // serializes updateLocal()
    SegmentDescRef local_;
    std::function<void()> publish_listener_;  // guarded by local_mu_
    std::atomic<uint64_t> local_version_{0};
    std::atomic<uint64_t> published_version_{0};
    // local_version_ as of the last synchronizeLocal() that published.
    std::atomic<uint64_t> synced_local_version_{0};

    // Bumped after anything that can change what getRemoteCached() hands
    // out before a copy's TTL runs out: what RemoteLease::current()
    // compares.
    const std::shared_ptr<std::atomic<uint64_t>> remote_changes_;
    mutable std::mutex remote_mu_;
    std::unordered_map<SegmentID, std::shared_ptr<OpenSegment>> remote_;
    SegmentID next_id_ = 1;
};

}  // namespace mooncake::tent
