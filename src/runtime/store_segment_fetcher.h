// StoreSegmentFetcher: the SegmentFetcher for metadata_type etcd and redis.
// A segment name is looked up under storeSegmentKey(name); the value is
// what SegmentPublisher wrote ({"holder":...,"segment":...}).
//
// While the store is unreachable a segment fetched before is served from
// the last copy read (so established transfers go on after the segment
// manager's cache TTL); a segment never read fails, naming the store.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "runtime/store_health.h"
#include "tent/runtime/metastore.h"
#include "tent/runtime/segment_manager.h"

namespace mooncake::tent {

// The key a segment's descriptor is published under:
// "mooncake/tent/segments/<segment name>".
std::string storeSegmentKey(const std::string& segment_name);

class StoreSegmentFetcher : public SegmentFetcher {
 public:
    StoreSegmentFetcher(std::shared_ptr<MetaStore> store,
                        std::shared_ptr<StoreHealth> health)
        : store_(std::move(store)), health_(std::move(health)) {}

    Status fetch(const std::string& segment_name, SegmentDesc& out) override;
    // The store's watch on the segment keys (MetaStore::watch), where the
    // store has one.
    bool startWatching(std::function<void(const std::string&)> changed,
                       std::function<void()> gap) override;
    void stopWatching() override;
    // The live watch's subscriptions and notifications (0 without one).
    uint64_t watchConnects() const;

 private:
    std::shared_ptr<MetaStore> store_;
    std::shared_ptr<StoreHealth> health_;
    std::mutex mu_;  // guards last_read_; never held across a store call
    std::unordered_map<std::string, SegmentDesc> last_read_;
    mutable std::mutex watch_mu_;  // guards watch_
    std::unique_ptr<MetaStoreWatch> watch_;
};

}  // namespace mooncake::tent
