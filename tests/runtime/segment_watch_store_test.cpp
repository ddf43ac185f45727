// A real store's change notifications reaching an engine's segment cache,
// for Redis (PUBLISH on a channel) and etcd (its watch): with a TTL of an
// hour, a peer's re-registration or removal is seen within a bounded wait;
// a store restart breaks the subscription, which comes back (and drops
// every cached copy, since changes may have been missed); destroying the
// manager stops the watch at once.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>

#include "common/json_util.h"
#include "kit/store_server.h"
#include "kit/wait_until.h"
#include "runtime/store_health.h"
#include "runtime/store_segment_fetcher.h"
#include "tent/runtime/metastore.h"
#include "tent/runtime/segment_manager.h"

namespace mooncake::tent {
namespace {

using testing::StoreServer;
using testing::waitUntil;

// What SegmentPublisher writes for segment `name`, tagged `tag`.
std::string record(const std::string& name, const std::string& tag) {
    SegmentDesc desc;
    desc.name = name;
    desc.type = SegmentType::Memory;
    desc.getMemory().transport_attrs[TCP] = tag;
    Json::Value value;
    value["holder"] = "test";
    value["segment"] = segmentToJson(desc);
    return toCompactJson(value);
}

class SegmentWatchStoreTest : public ::testing::TestWithParam<std::string> {
 protected:
    void SetUp() override {
        TENT_SKIP_OR_FAIL_WITHOUT_STORE(GetParam());
        server_ = std::make_unique<StoreServer>(GetParam());
        Status started = server_->start();
        ASSERT_TRUE(started.ok()) << started;
        options_.timeout_ms = 1000;
        options_.watch_reconnect_max_ms = 200;
        ASSERT_TRUE(
            MetaStore::Create(GetParam(), server_->address(), options_, writer_)
                .ok());
        ASSERT_TRUE(
            MetaStore::Create(GetParam(), server_->address(), options_, reader_)
                .ok());
        fetcher_ = std::make_shared<StoreSegmentFetcher>(
            reader_, std::make_shared<StoreHealth>(*reader_));
        mgr_ = std::make_unique<SegmentManager>("local", fetcher_,
                                                std::chrono::hours(1));
    }

    Status write(const std::string& expected, const std::string& value) {
        bool swapped = false;
        CHECK_STATUS(writer_->compareAndSet(storeSegmentKey("peer"), expected,
                                            value, swapped));
        return swapped ? Status::OK() : Status::InternalError("not swapped");
    }

    // The tag of the descriptor the cache hands out now ("" on error).
    std::string cachedTag(SegmentID id) {
        SegmentDescRef desc;
        if (!mgr_->getRemoteCached(desc, id).ok()) return "";
        return desc->getMemory().transport_attrs.at(TCP);
    }

    // Registers "peer" (tag v1), opens it and subscribes: the watch is
    // connected once this returns.
    void openWatched(SegmentID& id) {
        ASSERT_TRUE(write("", record("peer", "v1")).ok());
        ASSERT_TRUE(mgr_->openRemote(id, "peer").ok());
        ASSERT_TRUE(mgr_->startWatching());
        ASSERT_TRUE(waitUntil([&] { return fetcher_->watchConnects() == 1; }));
    }

    MetaStoreOptions options_;
    std::unique_ptr<StoreServer> server_;
    std::shared_ptr<MetaStore> writer_;
    std::shared_ptr<MetaStore> reader_;
    std::shared_ptr<StoreSegmentFetcher> fetcher_;
    std::unique_ptr<SegmentManager> mgr_;
};

TEST_P(SegmentWatchStoreTest, AChangeIsSeenLongBeforeTheTtl) {
    SegmentID id = 0;
    ASSERT_NO_FATAL_FAILURE(openWatched(id));
    EXPECT_EQ(cachedTag(id), "v1");
    EXPECT_EQ(mgr_->remoteFetches(), 1u);

    // Re-registered elsewhere: the notification drops the copy, and the
    // next look-up reads the new one, once.
    ASSERT_TRUE(write(record("peer", "v1"), record("peer", "v2")).ok());
    ASSERT_TRUE(waitUntil([&] { return mgr_->watchInvalidations() == 1; }));
    EXPECT_EQ(cachedTag(id), "v2");
    EXPECT_EQ(cachedTag(id), "v2");
    EXPECT_EQ(mgr_->remoteFetches(), 2u);

    // Unregistered: the next look-up asks the store, which has no copy.
    bool removed = false;
    ASSERT_TRUE(writer_
                    ->compareAndRemove(storeSegmentKey("peer"),
                                       record("peer", "v2"), removed)
                    .ok());
    ASSERT_TRUE(removed);
    ASSERT_TRUE(waitUntil([&] { return mgr_->watchInvalidations() == 2; }));
    SegmentDescRef desc;
    Status s = mgr_->getRemoteCached(desc, id);
    EXPECT_TRUE(s.IsInvalidEntry()) << s.message();
    EXPECT_EQ(mgr_->remoteFetches(), 3u);
}

TEST_P(SegmentWatchStoreTest, ARestartedStoreIsResubscribedAndDropsCopies) {
    SegmentID id = 0;
    ASSERT_NO_FATAL_FAILURE(openWatched(id));
    EXPECT_EQ(cachedTag(id), "v1");

    ASSERT_TRUE(server_->restart(/*wipe=*/true).ok());
    // While the subscription is down the copy stands (the TTL's job).
    ASSERT_TRUE(waitUntil([&] { return fetcher_->watchConnects() == 2; }));
    // Changes made while it was down may be lost: every copy is dropped,
    // and the next look-up finds the wiped store has no such segment.
    // (The reader's pooled connection died with the server: replaced
    // first, so that the look-up is not served the outage's last copy.)
    ASSERT_TRUE(waitUntil([&] { return reader_->ping().ok(); }));
    const uint64_t fetched = mgr_->remoteFetches();
    SegmentDescRef desc;
    Status s = mgr_->getRemoteCached(desc, id);
    EXPECT_TRUE(s.IsInvalidEntry()) << s.message();
    EXPECT_EQ(mgr_->remoteFetches(), fetched + 1);
    ASSERT_TRUE(
        waitUntil([&] { return write("", record("peer", "v3")).ok(); }));
    ASSERT_TRUE(waitUntil([&] { return cachedTag(id) == "v3"; }));
    // And notifications flow again.
    ASSERT_TRUE(write(record("peer", "v3"), record("peer", "v4")).ok());
    ASSERT_TRUE(waitUntil([&] { return cachedTag(id) == "v4"; }));
}

TEST_P(SegmentWatchStoreTest, DestroyingTheManagerStopsTheWatchAtOnce) {
    SegmentID id = 0;
    ASSERT_NO_FATAL_FAILURE(openWatched(id));
    const auto start = std::chrono::steady_clock::now();
    mgr_.reset();
    const auto took = std::chrono::steady_clock::now() - start;
    // Bounded by metadata/store_timeout_ms; the wake-up makes it immediate.
    EXPECT_LT(took, std::chrono::milliseconds(options_.timeout_ms));
    EXPECT_EQ(fetcher_->watchConnects(), 0u);
}

INSTANTIATE_TEST_SUITE_P(Stores, SegmentWatchStoreTest,
                         ::testing::Values("redis", "etcd"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace mooncake::tent
