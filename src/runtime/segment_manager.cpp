#include "tent/runtime/segment_manager.h"

#include <time.h>
#include <unistd.h>

#include <limits>
#include <random>
#include <unordered_map>
#include <utility>

namespace mooncake::tent {

struct SegmentManager::SharedCopy {
    SegmentDescRef desc;
    CacheClock::time_point expiry;
    // The segment's generation when the store read began.
    uint64_t generation = 0;
};

struct SegmentManager::OpenSegment {
    explicit OpenSegment(std::string n) : name(std::move(n)) {}
    const std::string name;
    // Bumped by invalidateRemote()/closeRemote(); a thread's cache entry is
    // valid only while it carries the current value, which is how one
    // thread drops every other thread's cached copy without touching their
    // thread_local storage.
    std::atomic<uint64_t> generation{0};
    // Set by closeRemote() and by the manager's destructor: thread caches
    // hold the segment strongly, and this is how they learn to drop it.
    std::atomic<bool> closed{false};
    // CacheClock time (ns since its epoch) of the last refreshAfterMiss()
    // re-read; kNever before the first, so that the first miss re-reads
    // however recently the segment was opened.
    static constexpr int64_t kNever = std::numeric_limits<int64_t>::min();
    std::atomic<int64_t> last_miss_refresh_ns{kNever};

    // The engine's one copy of the descriptor, shared by every thread: a
    // thread's own entry is filled from it, and only a thread that finds
    // it stale reads the store. Immutable once published; swapped with
    // std::atomic_load/atomic_store, which libstdc++ guards with a pool
    // mutex held for a pointer copy. Only a thread-cache miss (once per
    // TTL per thread, or after an invalidation) pays that; hits never do.
    std::shared_ptr<const SharedCopy> shared;
    // Held across a store read so that of the threads finding `shared`
    // stale at once, one reads and the others take its result.
    std::mutex fetch_mu;

    std::shared_ptr<const SharedCopy> sharedCopy() const {
        return std::atomic_load_explicit(&shared, std::memory_order_acquire);
    }
    void publish(std::shared_ptr<const SharedCopy> copy) {
        std::atomic_store_explicit(&shared, std::move(copy),
                                   std::memory_order_release);
    }
    // Whether a copy may be handed out at `now`.
    bool current(const SharedCopy* copy, CacheClock::time_point now) const {
        return copy != nullptr &&
               copy->generation == generation.load(std::memory_order_acquire) &&
               now < copy->expiry;
    }
};

struct SegmentManager::CacheEntry {
    SegmentDescRef desc;
    CacheClock::time_point expiry;
    uint64_t generation = 0;
    // The open segment the entry was filled for. Held strongly so that a
    // hit needs neither the manager's lock nor its map: closing the
    // segment bumps its generation, which expires the entry.
    std::shared_ptr<SegmentManager::OpenSegment> segment;

    // Whether a getRemoteCached() at `now` may hand out `desc`.
    bool current(CacheClock::time_point now) const {
        return generation ==
                   segment->generation.load(std::memory_order_acquire) &&
               now < expiry;
    }
};

// CLOCK_MONOTONIC (steady_clock's clock) at tick resolution, a few times
// cheaper to read on every hit. A TTL is a staleness bound of seconds; a
// tick (at most a few ms) does not change what it means, and a TTL of 0
// still expires at once.
SegmentManager::CacheClock::time_point SegmentManager::cacheNow() {
    timespec ts;
    ::clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return CacheClock::time_point(std::chrono::seconds(ts.tv_sec) +
                                  std::chrono::nanoseconds(ts.tv_nsec));
}

namespace {

using CacheEntry = SegmentManager::CacheEntry;

// Process-wide, never reused: a manager created at the address of a
// destroyed one must not see that one's thread_local entries.
std::atomic<uint64_t> g_next_instance_id{1};

struct CacheKeyHash {
    size_t operator()(const std::pair<uint64_t, SegmentID>& key) const {
        return std::hash<uint64_t>()(key.first * 0x9e3779b97f4a7c15ull ^
                                     static_cast<uint64_t>(key.second));
    }
};

// Keyed by (instance id, segment id).
using ThreadCache = std::unordered_map<std::pair<uint64_t, SegmentID>,
                                       CacheEntry, CacheKeyHash>;

ThreadCache& threadCache() {
    thread_local ThreadCache cache;
    return cache;
}

// Entries of closed segments or destroyed managers are only dropped here,
// so the cache cannot grow without bound in a long-lived thread.
void pruneThreadCache(ThreadCache& cache) {
    constexpr size_t kPruneThreshold = 256;
    if (cache.size() < kPruneThreshold) return;
    for (auto it = cache.begin(); it != cache.end();) {
        if (it->second.segment->closed.load(std::memory_order_acquire)) {
            it = cache.erase(it);
        } else {
            ++it;
        }
    }
}

// Random, so that a process restarted under the same name and port is
// recognised by its peers; never 0, which reads as "unknown".
uint64_t drawIncarnation() {
    std::random_device device;
    std::mt19937_64 engine((uint64_t(device()) << 32) ^ device() ^
                           uint64_t(::getpid()));
    uint64_t value = 0;
    while (value == 0) value = engine();
    return value;
}

Status unknownSegment(SegmentID handle) {
    return Status::InvalidArgument("unknown segment id " +
                                   std::to_string(handle));
}

}  // namespace

SegmentManager::SegmentManager(std::string local_segment_name,
                               std::shared_ptr<SegmentFetcher> fetcher,
                               std::chrono::milliseconds cache_ttl)
    : fetcher_(std::move(fetcher)),
      ttl_ms_(cache_ttl.count()),
      instance_id_(g_next_instance_id.fetch_add(1)),
      remote_changes_(std::make_shared<std::atomic<uint64_t>>(0)) {
    auto initial = std::make_shared<SegmentDesc>();
    initial->incarnation = drawIncarnation();
    initial->name = std::move(local_segment_name);
    initial->type = SegmentType::Memory;
    local_ = std::move(initial);
}

SegmentManager::~SegmentManager() {
    // No notification may reach a manager being destroyed.
    stopWatching();
    // Lets every thread's cache prune this manager's entries.
    std::lock_guard<std::mutex> lock(remote_mu_);
    for (auto& entry : remote_) {
        entry.second->closed.store(true, std::memory_order_release);
    }
    remote_changes_->fetch_add(1, std::memory_order_acq_rel);
}

SegmentDescRef SegmentManager::getLocal() const {
    std::lock_guard<std::mutex> lock(local_mu_);
    return local_;
}

Status SegmentManager::updateLocal(const Mutator& mutator) {
    std::lock_guard<std::mutex> update_lock(update_mu_);
    // update_mu_ keeps local_ stable between this read and the swap below,
    // so no concurrent update can be lost.
    auto copy = std::make_shared<SegmentDesc>(*getLocal());
    Status status = mutator(*copy);
    if (!status.ok()) return status;
    // The mutator may have added or removed buffers.
    if (copy->type == SegmentType::Memory) copy->getMemory().indexBuffers();
    {
        std::lock_guard<std::mutex> lock(local_mu_);
        local_ = std::move(copy);
    }
    local_version_.fetch_add(1, std::memory_order_release);
    return Status::OK();
}

Status SegmentManager::synchronizeLocal() {
    // With p2p metadata the RPC server reads getLocal() per request, so the
    // latest snapshot is already what peers get; this only records that a
    // new one was published.
    uint64_t current = local_version_.load(std::memory_order_acquire);
    uint64_t synced = synced_local_version_.load(std::memory_order_acquire);
    while (synced < current) {
        if (synced_local_version_.compare_exchange_weak(synced, current)) {
            published_version_.fetch_add(1);
            std::function<void()> listener;
            {
                std::lock_guard<std::mutex> lock(local_mu_);
                listener = publish_listener_;
            }
            if (listener) listener();
            break;
        }
    }
    return Status::OK();
}

void SegmentManager::setPublishListener(std::function<void()> listener) {
    std::lock_guard<std::mutex> lock(local_mu_);
    publish_listener_ = std::move(listener);
}

Status SegmentManager::openRemote(SegmentID& handle,
                                  const std::string& segment_name) {
    {
        std::lock_guard<std::mutex> lock(remote_mu_);
        for (const auto& [id, seg] : remote_) {
            if (seg->name == segment_name) {
                handle = id;
                return Status::OK();
            }
        }
    }
    if (!fetcher_) {
        return Status::InvalidArgument("cannot open segment " + segment_name +
                                       ": no segment fetcher configured");
    }
    auto desc = std::make_shared<SegmentDesc>();
    remote_fetches_.fetch_add(1, std::memory_order_relaxed);
    Status status = fetcher_->fetch(segment_name, *desc);
    if (!status.ok()) {
        return Status(status.code(), "cannot open segment " + segment_name +
                                         ": " + std::string(status.message()));
    }
    auto seg = std::make_shared<OpenSegment>(segment_name);
    SegmentID id;
    {
        std::lock_guard<std::mutex> lock(remote_mu_);
        // Another thread may have opened the same name while we fetched.
        for (const auto& [existing_id, existing] : remote_) {
            if (existing->name == segment_name) {
                handle = existing_id;
                return Status::OK();
            }
        }
        id = next_id_++;
        remote_[id] = seg;
    }
    auto copy = std::make_shared<SharedCopy>();
    copy->desc = std::move(desc);
    copy->expiry = cacheNow() + std::chrono::milliseconds(ttl_ms_.load());
    copy->generation = seg->generation.load(std::memory_order_acquire);
    seg->publish(copy);
    fillThreadEntry(id, seg, *copy);
    handle = id;
    return Status::OK();
}

Status SegmentManager::closeRemote(SegmentID handle) {
    std::shared_ptr<OpenSegment> seg;
    {
        // Lookup and removal under one lock, so of two racing closes only
        // one succeeds.
        std::lock_guard<std::mutex> lock(remote_mu_);
        auto node = remote_.extract(handle);
        if (node.empty()) return unknownSegment(handle);
        seg = std::move(node.mapped());
    }
    seg->closed.store(true, std::memory_order_release);
    seg->generation.fetch_add(1, std::memory_order_acq_rel);
    // After the segment's own bump: see lookupRemote().
    remote_changes_->fetch_add(1, std::memory_order_acq_rel);
    threadCache().erase({instance_id_, handle});
    return Status::OK();
}

Status SegmentManager::getRemoteCached(SegmentDescRef& desc, SegmentID handle) {
    return lookupRemote(desc, handle, nullptr);
}

Status SegmentManager::getRemoteCached(SegmentDescRef& desc, SegmentID handle,
                                       RemoteLease& lease) {
    return lookupRemote(desc, handle, &lease);
}

Status SegmentManager::lookupRemote(SegmentDescRef& desc, SegmentID handle,
                                    RemoteLease* lease) {
    if (lease) lease->reset();
    if (handle == LOCAL_SEGMENT_ID) {
        desc = getLocal();
        return Status::OK();
    }
    // A hit takes no lock: the entry's segment is the one open under this
    // id as long as its generation has not moved (ids are never reused,
    // and closeRemote() bumps it).
    ThreadCache& cache = threadCache();
    const std::pair<uint64_t, SegmentID> key{instance_id_, handle};
    // Read before the entry is checked. Invalidations bump the segment's
    // generation first and the change count second, so one that this read
    // misses ends the lease later, and one that it sees shows in the
    // entry's check below.
    uint64_t changes = remote_changes_->load(std::memory_order_acquire);
    auto it = cache.find(key);
    CacheClock::time_point now = cacheNow();
    const bool hit = it != cache.end() && it->second.current(now);
    if (hit) {
        // A caller that passes in the descriptor it holds already (a cache
        // of its own) pays no reference-count traffic.
        if (desc != it->second.desc) desc = it->second.desc;
    } else {
        // The entry was stale or absent, so no lease on it was current: the
        // fill needs no bump, and other threads' leases stand.
        CHECK_STATUS(fetchRemote(desc, handle));
        if (!lease) return Status::OK();
        // The entry just filled may already be stale (invalidated while
        // the fetch ran), and then no lease.
        changes = remote_changes_->load(std::memory_order_acquire);
        it = cache.find(key);
        now = cacheNow();
        if (it == cache.end() || !it->second.current(now)) return Status::OK();
    }
    if (lease) {
        lease->changes_ = remote_changes_;
        lease->seen_ = changes;
        lease->expiry_ = it->second.expiry;
    }
    return Status::OK();
}

Status SegmentManager::getRemote(SegmentDescRef& desc, SegmentID handle) {
    CHECK_STATUS(fetchRemote(desc, handle, /*force=*/true));
    // This thread's entry may have changed while it was current, which a
    // lease on it must not miss; the count is one number, so every other
    // lease ends too (explicit refreshes are rare: getSegmentInfo()).
    if (handle != LOCAL_SEGMENT_ID) {
        remote_changes_->fetch_add(1, std::memory_order_acq_rel);
    }
    return Status::OK();
}

Status SegmentManager::fetchRemote(SegmentDescRef& desc, SegmentID handle,
                                   bool force) {
    if (handle == LOCAL_SEGMENT_ID) {
        desc = getLocal();
        return Status::OK();
    }
    std::shared_ptr<OpenSegment> seg;
    CHECK_STATUS(findRemote(handle, seg));
    std::shared_ptr<const SharedCopy> copy;
    if (!force) {
        copy = seg->sharedCopy();
        if (!seg->current(copy.get(), cacheNow())) copy.reset();
    }
    if (!copy) {
        std::lock_guard<std::mutex> lock(seg->fetch_mu);
        // Another thread may have read the store while this one waited.
        if (!force) {
            copy = seg->sharedCopy();
            if (!seg->current(copy.get(), cacheNow())) copy.reset();
        }
        if (!copy) CHECK_STATUS(readStore(*seg, copy));
    }
    fillThreadEntry(handle, seg, *copy);
    desc = copy->desc;
    return Status::OK();
}

Status SegmentManager::readStore(OpenSegment& seg,
                                 std::shared_ptr<const SharedCopy>& out) {
    // Read before fetching: an invalidation that races with the fetch leaves
    // the copy stale, so the next call fetches again instead of trusting it.
    uint64_t generation = seg.generation.load(std::memory_order_acquire);
    auto fetched = std::make_shared<SegmentDesc>();
    remote_fetches_.fetch_add(1, std::memory_order_relaxed);
    Status status = fetcher_->fetch(seg.name, *fetched);
    if (!status.ok()) {
        return Status(status.code(), "cannot fetch segment " + seg.name + ": " +
                                         std::string(status.message()));
    }
    auto copy = std::make_shared<SharedCopy>();
    copy->desc = std::move(fetched);
    copy->expiry = cacheNow() + std::chrono::milliseconds(ttl_ms_.load());
    copy->generation = generation;
    seg.publish(copy);
    out = std::move(copy);
    return Status::OK();
}

void SegmentManager::fillThreadEntry(SegmentID handle,
                                     const std::shared_ptr<OpenSegment>& seg,
                                     const SharedCopy& copy) {
    ThreadCache& cache = threadCache();
    pruneThreadCache(cache);
    CacheEntry& entry = cache[{instance_id_, handle}];
    entry.desc = copy.desc;
    // The shared copy's expiry, not a fresh TTL: the TTL bounds how long
    // ago the store was read, however late a thread takes the copy.
    entry.expiry = copy.expiry;
    entry.generation = copy.generation;
    entry.segment = seg;
}

Status SegmentManager::invalidateRemote(SegmentID handle) {
    if (handle == LOCAL_SEGMENT_ID) return Status::OK();
    std::shared_ptr<OpenSegment> seg;
    CHECK_STATUS(findRemote(handle, seg));
    seg->generation.fetch_add(1, std::memory_order_acq_rel);
    // After the segment's own bump: see lookupRemote().
    remote_changes_->fetch_add(1, std::memory_order_acq_rel);
    return Status::OK();
}

void SegmentManager::invalidateRemote(const std::string& segment_name) {
    std::shared_ptr<OpenSegment> seg;
    {
        std::lock_guard<std::mutex> lock(remote_mu_);
        for (const auto& entry : remote_) {
            if (entry.second->name == segment_name) seg = entry.second;
        }
    }
    if (!seg) return;
    watch_invalidations_.fetch_add(1, std::memory_order_relaxed);
    seg->generation.fetch_add(1, std::memory_order_acq_rel);
    remote_changes_->fetch_add(1, std::memory_order_acq_rel);
}

void SegmentManager::invalidateAllRemote() {
    {
        std::lock_guard<std::mutex> lock(remote_mu_);
        for (const auto& entry : remote_) {
            entry.second->generation.fetch_add(1, std::memory_order_acq_rel);
        }
    }
    remote_changes_->fetch_add(1, std::memory_order_acq_rel);
}

bool SegmentManager::startWatching() {
    if (!fetcher_ || watching_.load()) return watching_.load();
    // The callbacks run on the fetcher's thread; stopWatching() (the
    // destructor's first step) returns only once none runs, so `this`
    // outlives them.
    bool live = fetcher_->startWatching(
        [this](const std::string& name) { invalidateRemote(name); },
        [this] { invalidateAllRemote(); });
    watching_.store(live);
    return live;
}

void SegmentManager::stopWatching() {
    if (fetcher_ && watching_.exchange(false)) fetcher_->stopWatching();
}

Status SegmentManager::refreshAfterMiss(SegmentDescRef& desc, SegmentID handle,
                                        bool& refreshed) {
    refreshed = false;
    if (handle == LOCAL_SEGMENT_ID) return Status::OK();
    std::shared_ptr<OpenSegment> seg;
    CHECK_STATUS(findRemote(handle, seg));
    // The exact clock: the interval is the only thing between a stream of
    // bad requests and the peer (or the store) it would make us read.
    const int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                            CacheClock::now().time_since_epoch())
                            .count();
    const int64_t interval_ns = miss_interval_ms_.load() * 1000000;
    int64_t last = seg->last_miss_refresh_ns.load(std::memory_order_acquire);
    if (last != OpenSegment::kNever && now - last < interval_ns) {
        return Status::OK();
    }
    // Of threads missing at once, one re-reads; the others fail their
    // request as if within the interval.
    if (!seg->last_miss_refresh_ns.compare_exchange_strong(
            last, now, std::memory_order_acq_rel)) {
        return Status::OK();
    }
    miss_refreshes_.fetch_add(1, std::memory_order_relaxed);
    // Every thread's copy is as stale as this one: drop them all, then
    // fill this thread's.
    CHECK_STATUS(invalidateRemote(handle));
    CHECK_STATUS(fetchRemote(desc, handle));
    refreshed = true;
    return Status::OK();
}

Status SegmentManager::findRemote(SegmentID handle,
                                  std::shared_ptr<OpenSegment>& seg) const {
    std::lock_guard<std::mutex> lock(remote_mu_);
    auto it = remote_.find(handle);
    if (it == remote_.end()) return unknownSegment(handle);
    seg = it->second;
    return Status::OK();
}

}  // namespace mooncake::tent
