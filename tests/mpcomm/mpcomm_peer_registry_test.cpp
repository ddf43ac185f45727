// MpcommPeerRegistry against the mock adapter: connect once, query retry,
// key refresh, single flight.
#include "tent/transport/mpcomm/mpcomm_peer_registry.h"

#include <gtest/gtest.h>

#include <thread>

#include "mpcomm/mock_mpcomm_adapter.h"
#include "mpcomm/mpcomm_test_support.h"

namespace mooncake::tent {
namespace {

using testing::LogCapture;
using testing::MockMpcommAdapter;

const std::string kPeer = "10.0.0.2:12346";
const std::vector<MpcommBufferRange> kOneBuffer = {{0x1000, 0x1000}};

class MpcommPeerRegistryTest : public ::testing::Test {
 protected:
    std::shared_ptr<MockMpcommAdapter> adapter_ =
        std::make_shared<MockMpcommAdapter>();
    MpcommPeerRegistry registry_{adapter_};
};

TEST_F(MpcommPeerRegistryTest, FirstUseConnectsThenQueriesAndIsReady) {
    LogCapture logs;
    ASSERT_TRUE(registry_.ensure(kPeer, "10.0.0.2", 14000, kOneBuffer).ok());
    EXPECT_EQ(adapter_->connect_calls, 1);
    EXPECT_EQ(adapter_->query_calls, 1);
    ASSERT_EQ(adapter_->connects().size(), 1u);
    EXPECT_EQ(adapter_->connects()[0].host_id, kPeer);
    EXPECT_EQ(adapter_->connects()[0].addr, "10.0.0.2");
    EXPECT_EQ(adapter_->connects()[0].port, 14000);
    MpcommPeerState state;
    ASSERT_TRUE(registry_.stateOf(kPeer, state));
    EXPECT_EQ(state, MpcommPeerState::READY);
    EXPECT_EQ(logs.count("MpcommTransport: Connected to segment " + kPeer), 1);
}

TEST_F(MpcommPeerRegistryTest, AReadyPeerIsReusedWithoutTalkingToIt) {
    ASSERT_TRUE(registry_.ensure(kPeer, "10.0.0.2", 14000, kOneBuffer).ok());
    for (int i = 0; i < 5; ++i) {
        ASSERT_TRUE(
            registry_.ensure(kPeer, "10.0.0.2", 14000, kOneBuffer).ok());
    }
    EXPECT_EQ(adapter_->connect_calls, 1);
    EXPECT_EQ(adapter_->query_calls, 1);
    EXPECT_EQ(registry_.size(), 1u);
}

TEST_F(MpcommPeerRegistryTest,
       ConnectFailureCachesNothingAndTheNextCallReconnects) {
    adapter_->connect_failures = 2;
    Status first = registry_.ensure(kPeer, "10.0.0.2", 14000, kOneBuffer);
    EXPECT_TRUE(first.IsRdmaError());
    EXPECT_EQ(first.message(), "MPComm connect to 10.0.0.2:14000 (host " +
                                   kPeer + ") failed, error=-4");
    EXPECT_FALSE(registry_.contains(kPeer));
    EXPECT_EQ(registry_.size(), 0u);
    EXPECT_FALSE(registry_.ensure(kPeer, "10.0.0.2", 14000, kOneBuffer).ok());
    EXPECT_FALSE(registry_.contains(kPeer));
    ASSERT_TRUE(registry_.ensure(kPeer, "10.0.0.2", 14000, kOneBuffer).ok());
    EXPECT_EQ(adapter_->connect_calls, 3);
    EXPECT_EQ(adapter_->query_calls, 1) << "no query without a connection";
}

TEST_F(MpcommPeerRegistryTest,
       QueryFailureKeepsTheConnectionAndRetriesTheQuery) {
    LogCapture logs;
    adapter_->query_failures = 1;
    Status st = registry_.ensure(kPeer, "10.0.0.2", 14000, kOneBuffer);
    EXPECT_FALSE(st.ok());
    int native = 0;
    ASSERT_TRUE(mpcommNativeStatusOf(st, native));
    EXPECT_EQ(native, -9);
    MpcommPeerState state;
    ASSERT_TRUE(registry_.stateOf(kPeer, state));
    EXPECT_EQ(state, MpcommPeerState::CONNECTED_NO_KEYS);
    EXPECT_EQ(logs.count("MpcommTransport: Failed to query remote buffers "
                         "from " +
                         kPeer + ", error=-9"),
              1);

    ASSERT_TRUE(registry_.ensure(kPeer, "10.0.0.2", 14000, kOneBuffer).ok());
    EXPECT_EQ(adapter_->connect_calls, 1) << "the handshake is not repeated";
    EXPECT_EQ(adapter_->query_calls, 2);
    ASSERT_TRUE(registry_.stateOf(kPeer, state));
    EXPECT_EQ(state, MpcommPeerState::READY);
    EXPECT_EQ(logs.count("MpcommTransport: Connected to segment " + kPeer), 1);
}

TEST_F(MpcommPeerRegistryTest,
       KeysAreRefetchedWhenAPublishedRangeIsNotCovered) {
    ASSERT_TRUE(registry_.ensure(kPeer, "10.0.0.2", 14000, kOneBuffer).ok());
    // A sub-range of what the keys cover needs nothing.
    ASSERT_TRUE(
        registry_.ensure(kPeer, "10.0.0.2", 14000, {{0x1800, 0x100}}).ok());
    EXPECT_EQ(adapter_->query_calls, 1);
    // The peer registered another buffer.
    std::vector<MpcommBufferRange> grown = {{0x1000, 0x1000}, {0x8000, 0x2000}};
    ASSERT_TRUE(registry_.ensure(kPeer, "10.0.0.2", 14000, grown).ok());
    EXPECT_EQ(adapter_->query_calls, 2);
    EXPECT_EQ(adapter_->connect_calls, 1);
    // A range that grew past what was covered counts as not covered.
    ASSERT_TRUE(
        registry_.ensure(kPeer, "10.0.0.2", 14000, {{0x8000, 0x3000}}).ok());
    EXPECT_EQ(adapter_->query_calls, 3);
}

TEST_F(MpcommPeerRegistryTest, KeysAreNotRefetchedWhenARangeDisappears) {
    std::vector<MpcommBufferRange> two = {{0x1000, 0x1000}, {0x8000, 0x2000}};
    ASSERT_TRUE(registry_.ensure(kPeer, "10.0.0.2", 14000, two).ok());
    ASSERT_TRUE(registry_.ensure(kPeer, "10.0.0.2", 14000, kOneBuffer).ok());
    ASSERT_TRUE(registry_.ensure(kPeer, "10.0.0.2", 14000, {}).ok());
    EXPECT_EQ(adapter_->query_calls, 1);
}

TEST_F(MpcommPeerRegistryTest, TheRefreshGoesToTheEndpointActuallyConnected) {
    adapter_->query_failures = 1;
    EXPECT_FALSE(registry_.ensure(kPeer, "10.0.0.2", 14000, kOneBuffer).ok());
    // The caller now names another endpoint (say a re-published attribute);
    // the connection MPComm holds is still the first one.
    ASSERT_TRUE(registry_.ensure(kPeer, "10.9.9.9", 15555, kOneBuffer).ok());
    ASSERT_TRUE(registry_
                    .ensure(kPeer, "10.9.9.9", 15555,
                            {{0x1000, 0x1000}, {0x9000, 0x10}})
                    .ok());
    auto queries = adapter_->queries();
    ASSERT_EQ(queries.size(), 3u);
    for (const auto& q : queries) {
        EXPECT_EQ(q.host_id, kPeer);
        EXPECT_EQ(q.addr, "10.0.0.2");
        EXPECT_EQ(q.port, 14000);
    }
    EXPECT_EQ(adapter_->connect_calls, 1);
}

TEST_F(MpcommPeerRegistryTest, PeersAreKeyedByHostIdAndClearForgetsThemAll) {
    ASSERT_TRUE(registry_.ensure("a:1", "10.0.0.3", 1000, {}).ok());
    ASSERT_TRUE(registry_.ensure("b:2", "10.0.0.4", 1000, {}).ok());
    EXPECT_EQ(registry_.size(), 2u);
    EXPECT_TRUE(registry_.contains("a:1"));
    EXPECT_TRUE(registry_.contains("b:2"));
    EXPECT_FALSE(registry_.contains("c:3"));
    MpcommPeerState state;
    EXPECT_FALSE(registry_.stateOf("c:3", state));
    registry_.clear();
    EXPECT_EQ(registry_.size(), 0u);
    EXPECT_FALSE(registry_.contains("a:1"));
}

// N callers race for one peer: exactly one handshake and one query, and
// every caller gets the first caller's result.
TEST_F(MpcommPeerRegistryTest, ConcurrentCallersShareOneHandshake) {
    constexpr int kThreads = 32;
    adapter_->hold_connects = true;
    std::vector<std::thread> threads;
    std::vector<Status> results(kThreads);
    for (int i = 0; i < kThreads; ++i) {
        threads.emplace_back([this, i, &results] {
            results[i] = registry_.ensure(kPeer, "10.0.0.2", 14000, kOneBuffer);
        });
    }
    // One caller is inside connect(), the others wait for it.
    ASSERT_TRUE(testing::waitFor([&] {
        return adapter_->connectsEntered() == 1 &&
               registry_.waiters(kPeer) == kThreads - 1;
    }));
    MpcommPeerState state;
    ASSERT_TRUE(registry_.stateOf(kPeer, state));
    EXPECT_EQ(state, MpcommPeerState::CONNECTING);
    adapter_->releaseConnects();
    for (auto& t : threads) t.join();
    for (const auto& st : results) EXPECT_TRUE(st.ok()) << st;
    EXPECT_EQ(adapter_->connect_calls, 1);
    EXPECT_EQ(adapter_->query_calls, 1);
    EXPECT_EQ(registry_.waiters(kPeer), 0u);
}

TEST_F(MpcommPeerRegistryTest,
       ConcurrentCallersAllReceiveTheFirstCallersFailure) {
    constexpr int kThreads = 32;
    adapter_->hold_connects = true;
    adapter_->connect_failures = 1;
    std::vector<std::thread> threads;
    std::vector<Status> results(kThreads);
    for (int i = 0; i < kThreads; ++i) {
        threads.emplace_back([this, i, &results] {
            results[i] = registry_.ensure(kPeer, "10.0.0.2", 14000, kOneBuffer);
        });
    }
    ASSERT_TRUE(testing::waitFor([&] {
        return adapter_->connectsEntered() == 1 &&
               registry_.waiters(kPeer) == kThreads - 1;
    }));
    adapter_->releaseConnects();
    for (auto& t : threads) t.join();
    for (const auto& st : results) {
        EXPECT_EQ(st.message(), "MPComm connect to 10.0.0.2:14000 (host " +
                                    kPeer + ") failed, error=-4");
    }
    EXPECT_EQ(adapter_->connect_calls, 1);
    EXPECT_EQ(adapter_->query_calls, 0);
    EXPECT_FALSE(registry_.contains(kPeer));
}

TEST_F(MpcommPeerRegistryTest, AHandshakeInProgressDoesNotBlockOtherPeers) {
    ASSERT_TRUE(registry_.ensure("other:1", "10.0.0.9", 1000, {}).ok());
    adapter_->hold_connects = true;
    std::thread slow([this] {
        EXPECT_TRUE(registry_.ensure(kPeer, "10.0.0.2", 14000, {}).ok());
    });
    ASSERT_TRUE(
        testing::waitFor([&] { return adapter_->connectsEntered() == 2; }));
    MpcommPeerState state;
    ASSERT_TRUE(registry_.stateOf(kPeer, state));
    EXPECT_EQ(state, MpcommPeerState::CONNECTING);
    // Answered while kPeer's connect() is still held.
    EXPECT_TRUE(registry_.ensure("other:1", "10.0.0.9", 1000, {}).ok());
    EXPECT_EQ(registry_.waiters("other:1"), 0u);
    adapter_->releaseConnects();
    slow.join();
    EXPECT_EQ(mpcommPeerStateName(MpcommPeerState::CONNECTED_NO_KEYS),
              std::string("CONNECTED_NO_KEYS"));
}

}  // namespace
}  // namespace mooncake::tent
