// MetaStore against a real redis-server, etcd and HTTP metadata server: the
// compare-and-set rules SegmentPublisher relies on, TTL renewal and lapse, and
// the configuration refusals.
#include "tent/runtime/metastore.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <string>

#include "kit/store_server.h"
#include "kit/wait_until.h"

namespace mooncake::tent::testing {
namespace {

class MetaStoreTest : public ::testing::TestWithParam<std::string> {
 protected:
    void SetUp() override {
        TENT_SKIP_OR_FAIL_WITHOUT_STORE(GetParam());
        server_ = std::make_unique<StoreServer>(GetParam());
        Status s = server_->start();
        ASSERT_TRUE(s.ok()) << s.ToString();
    }

    std::shared_ptr<MetaStore> client(int ttl_ms = 2000) {
        MetaStoreOptions options;
        options.timeout_ms = 1000;
        options.ttl_ms = ttl_ms;
        std::shared_ptr<MetaStore> store;
        Status s =
            MetaStore::Create(GetParam(), server_->address(), options, store);
        EXPECT_TRUE(s.ok()) << s.ToString();
        return store;
    }

    std::string read(MetaStore& store, const std::string& key) {
        std::string value;
        bool found = false;
        EXPECT_TRUE(store.get(key, value, found).ok());
        return found ? value : "<absent>";
    }

    std::unique_ptr<StoreServer> server_;
};

TEST_P(MetaStoreTest, CompareAndSetWritesOnlyOverTheExpectedValue) {
    auto a = client();
    auto b = client();
    const std::string key = "test/cas/" + std::to_string(getpid());
    bool swapped = false;
    ASSERT_TRUE(a->compareAndSet(key, "", "one", swapped).ok());
    EXPECT_TRUE(swapped);
    // Taken: neither an absent nor a wrong expectation writes.
    ASSERT_TRUE(b->compareAndSet(key, "", "two", swapped).ok());
    EXPECT_FALSE(swapped);
    ASSERT_TRUE(b->compareAndSet(key, "zero", "two", swapped).ok());
    EXPECT_FALSE(swapped);
    EXPECT_EQ(read(*a, key), "one");
    ASSERT_TRUE(b->compareAndSet(key, "one", "two", swapped).ok());
    EXPECT_TRUE(swapped);
    EXPECT_EQ(read(*a, key), "two");
    // Binary-safe values (etcd's travel in base64).
    const std::string binary("a\0b\xff{\"x\":1}", 11);
    ASSERT_TRUE(b->compareAndSet(key, "two", binary, swapped).ok());
    EXPECT_TRUE(swapped);
    EXPECT_EQ(read(*a, key), binary);
    bool removed = false;
    ASSERT_TRUE(a->compareAndRemove(key, "two", removed).ok());
    EXPECT_FALSE(removed);
    ASSERT_TRUE(a->compareAndRemove(key, binary, removed).ok());
    EXPECT_TRUE(removed);
    EXPECT_EQ(read(*a, key), "<absent>");
}

TEST_P(MetaStoreTest, KeyLivesWhileKeptAliveAndLapsesAfter) {
    auto store = client(2000);
    const std::string key = "test/ttl/" + std::to_string(getpid());
    bool swapped = false;
    ASSERT_TRUE(store->compareAndSet(key, "", "v", swapped).ok());
    ASSERT_TRUE(swapped);
    // Renewed for twice the TTL, it is still there.
    const auto start = std::chrono::steady_clock::now();
    while (std::chrono::steady_clock::now() - start <
           std::chrono::milliseconds(4000)) {
        bool alive = false;
        ASSERT_TRUE(store->keepAlive(key, alive).ok());
        ASSERT_TRUE(alive);
        ASSERT_EQ(read(*store, key), "v");
        std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
    // Left alone, it lapses within the TTL (plus etcd's 0.5 s sweep).
    const auto last = std::chrono::steady_clock::now();
    ASSERT_TRUE(waitUntil([&] { return read(*store, key) == "<absent>"; },
                          std::chrono::milliseconds(5000)));
    EXPECT_LE(std::chrono::steady_clock::now() - last,
              std::chrono::milliseconds(2000 + 1000));
    bool alive = true;
    ASSERT_TRUE(store->keepAlive(key, alive).ok());
    EXPECT_FALSE(alive);
    // Written again after the lapse (etcd: under a new lease).
    ASSERT_TRUE(store->compareAndSet(key, "", "w", swapped).ok());
    EXPECT_TRUE(swapped);
    EXPECT_EQ(read(*store, key), "w");
}

TEST_P(MetaStoreTest, SecondServerAnswersWhenTheFirstIsDown) {
    MetaStoreOptions options;
    options.timeout_ms = 500;
    std::shared_ptr<MetaStore> store;
    const std::string servers = "127.0.0.1:1," + server_->address();
    ASSERT_TRUE(MetaStore::Create(GetParam(), servers, options, store).ok());
    EXPECT_TRUE(store->ping().ok());
    EXPECT_EQ(store->servers(), servers);
}

TEST_P(MetaStoreTest, CallsOnAStoppedServerFailNamingItAndTheTimeout) {
    auto store = client();
    server_->stop();
    std::string value;
    bool found = false;
    Status s = store->get("k", value, found);
    ASSERT_TRUE(s.IsMetadataError()) << s.ToString();
    const std::string name = GetParam() + " at " + server_->address() +
                             " (metadata/store_timeout_ms=1000)";
    EXPECT_NE(s.message().find(name), std::string::npos) << s.message();
}

INSTANTIATE_TEST_SUITE_P(Stores, MetaStoreTest,
                         ::testing::Values("redis", "etcd", "http"));

TEST(MetaStoreConfigTest, BadServersAndKeysAreRefusedNamingTheValue) {
    std::shared_ptr<MetaStore> store;
    MetaStoreOptions options;
    EXPECT_EQ(MetaStore::Create("redis", "", options, store),
              Status::InvalidArgument("metadata_type redis needs "
                                      "metadata_servers (a comma list of "
                                      "host:port)"));
    EXPECT_EQ(MetaStore::Create("etcd", "127.0.0.1:2379,nope", options, store),
              Status::InvalidArgument(
                  "metadata_servers \"127.0.0.1:2379,nope\": entry \"nope\" "
                  "is not host:port (a comma list of host:port is "
                  "expected)"));
    EXPECT_EQ(MetaStore::Create("zookeeper", "h:1", options, store),
              Status::InvalidMetadataType("metadata_type zookeeper is not "
                                          "supported (p2p, etcd, redis and "
                                          "http are)"));
    options.ttl_ms = 999;
    EXPECT_EQ(MetaStore::Create("redis", "h:1", options, store),
              Status::InvalidArgument(
                  "metadata/ttl_ms must be at least 1000, got 999"));
    options.ttl_ms = 1000;
    options.timeout_ms = 0;
    EXPECT_EQ(MetaStore::Create("redis", "h:1", options, store),
              Status::InvalidArgument(
                  "metadata/store_timeout_ms must be positive, got 0"));
    std::vector<std::string> list;
    ASSERT_TRUE(MetaStore::parseServers(" a:1 , b:2", list).ok());
    EXPECT_EQ(list, (std::vector<std::string>{"a:1", "b:2"}));
}

}  // namespace
}  // namespace mooncake::tent::testing
