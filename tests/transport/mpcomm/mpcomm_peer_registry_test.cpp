// MpcommPeerRegistry against the mock adapter: connect once, query retry,
// key refresh by registration epoch, reconnect by incarnation, single
// flight, bounded waits and late outcomes.
#include "tent/transport/mpcomm/mpcomm_peer_registry.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "kit/mock_mpcomm_adapter.h"
#include "kit/mpcomm_test_support.h"
#include "kit/wait_until.h"

namespace mooncake::tent {
namespace {

using testing::LogCapture;
using testing::MockMpcommAdapter;
using Clock = MpcommPeerRegistry::Clock;

const std::string kPeer = "10.0.0.2:12346";

MpcommPeerView view(const std::string& host, const std::string& addr, int port,
                    uint64_t incarnation = 7, uint64_t epoch = 1) {
    return MpcommPeerView{host, addr, port, incarnation, epoch};
}

const MpcommPeerView kView = view(kPeer, "10.0.0.2", 14000);

class MpcommPeerRegistryTest : public ::testing::Test {
 protected:
    // A bound no healthy test comes near; a hang fails instead of hanging.
    Status ensure(const MpcommPeerView& peer) {
        return registry_.ensure(peer, Clock::now() + std::chrono::seconds(20),
                                20000);
    }

    // poll() until kReady: the ticket then holds the peer's link (null
    // when the handshake failed or did not finish in time).
    std::shared_ptr<const MpcommPeerLink> readyLink(
        const MpcommPeerView& peer) {
        MpcommPeerRegistry::Ticket ticket;
        const auto deadline = Clock::now() + std::chrono::seconds(20);
        for (;;) {
            Status error;
            switch (registry_.poll(peer, ticket, error)) {
                case MpcommPeerRegistry::Progress::kReady:
                    return ticket.link();
                case MpcommPeerRegistry::Progress::kFailed:
                    return nullptr;
                case MpcommPeerRegistry::Progress::kWaiting:
                    break;
            }
            if (!registry_.waitForAny({&ticket}, deadline)) return nullptr;
        }
    }

    // `n` threads call ensure(kView) with connect() held; returns once one
    // handshake is inside connect() and all `n` callers wait on it.
    void startCallersOnAHeldHandshake(int n) {
        adapter_->hold_connects = true;
        callers_results_.assign(n, Status());
        for (int i = 0; i < n; ++i) {
            callers_.emplace_back(
                [this, i] { callers_results_[i] = ensure(kView); });
        }
        ASSERT_TRUE(testing::waitUntil([&] {
            return adapter_->connectsEntered() == 1 &&
                   registry_.waiters(kPeer) == static_cast<size_t>(n);
        }));
    }
    // Lets the held handshake finish; what each caller got.
    std::vector<Status> releaseCallers() {
        adapter_->releaseConnects();
        for (auto& t : callers_) t.join();
        callers_.clear();
        return callers_results_;
    }

    void TearDown() override {
        if (!callers_.empty()) releaseCallers();
    }

    std::shared_ptr<MockMpcommAdapter> adapter_ =
        std::make_shared<MockMpcommAdapter>();
    MpcommPeerRegistry registry_{adapter_};
    std::vector<std::thread> callers_;
    std::vector<Status> callers_results_;
};

TEST_F(MpcommPeerRegistryTest, FirstUseConnectsThenQueriesAndIsReady) {
    LogCapture logs;
    ASSERT_TRUE(ensure(kView).ok());
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
    ASSERT_TRUE(ensure(kView).ok());
    for (int i = 0; i < 5; ++i) {
        ASSERT_TRUE(ensure(kView).ok());
    }
    EXPECT_EQ(adapter_->connect_calls, 1);
    EXPECT_EQ(adapter_->query_calls, 1);
    EXPECT_EQ(registry_.size(), 1u);
}

TEST_F(MpcommPeerRegistryTest,
       ConnectFailureCachesNothingAndTheNextCallReconnects) {
    adapter_->connect_failures = 2;
    Status first = ensure(kView);
    EXPECT_TRUE(first.IsRdmaError());
    EXPECT_EQ(first.message(), "MPComm connect to 10.0.0.2:14000 (host " +
                                   kPeer + ") failed, error=-4");
    EXPECT_FALSE(registry_.contains(kPeer));
    EXPECT_EQ(registry_.size(), 0u);
    EXPECT_FALSE(ensure(kView).ok());
    EXPECT_FALSE(registry_.contains(kPeer));
    ASSERT_TRUE(ensure(kView).ok());
    EXPECT_EQ(adapter_->connect_calls, 3);
    EXPECT_EQ(adapter_->query_calls, 1) << "no query without a connection";
}

TEST_F(MpcommPeerRegistryTest,
       QueryFailureKeepsTheConnectionAndRetriesTheQuery) {
    LogCapture logs;
    adapter_->query_failures = 1;
    Status st = ensure(kView);
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

    ASSERT_TRUE(ensure(kView).ok());
    EXPECT_EQ(adapter_->connect_calls, 1) << "the handshake is not repeated";
    EXPECT_EQ(adapter_->query_calls, 2);
    ASSERT_TRUE(registry_.stateOf(kPeer, state));
    EXPECT_EQ(state, MpcommPeerState::READY);
    EXPECT_EQ(logs.count("MpcommTransport: Connected to segment " + kPeer), 1);
}

TEST_F(MpcommPeerRegistryTest, KeysAreRefetchedOnlyWhenTheEpochAdvances) {
    ASSERT_TRUE(ensure(view(kPeer, "10.0.0.2", 14000, 7, 5)).ok());
    // The same or an older epoch needs nothing.
    ASSERT_TRUE(ensure(view(kPeer, "10.0.0.2", 14000, 7, 5)).ok());
    ASSERT_TRUE(ensure(view(kPeer, "10.0.0.2", 14000, 7, 3)).ok());
    EXPECT_EQ(adapter_->query_calls, 1);
    // The peer registered or unregistered memory since.
    ASSERT_TRUE(ensure(view(kPeer, "10.0.0.2", 14000, 7, 6)).ok());
    EXPECT_EQ(adapter_->query_calls, 2);
    EXPECT_EQ(adapter_->connect_calls, 1) << "a new epoch never reconnects";
    ASSERT_TRUE(ensure(view(kPeer, "10.0.0.2", 14000, 7, 6)).ok());
    EXPECT_EQ(adapter_->query_calls, 2);
}

TEST_F(MpcommPeerRegistryTest, ANewIncarnationIsTheOneCaseThatReconnects) {
    LogCapture logs;
    ASSERT_TRUE(ensure(view(kPeer, "10.0.0.2", 14000, 0x11, 9)).ok());
    // Restarted on another MPComm port, epoch counting from scratch.
    ASSERT_TRUE(ensure(view(kPeer, "10.0.0.2", 14001, 0x22, 1)).ok());
    EXPECT_EQ(adapter_->connect_calls, 2);
    EXPECT_EQ(adapter_->query_calls, 2);
    ASSERT_EQ(adapter_->connects().size(), 2u);
    EXPECT_EQ(adapter_->connects()[1].port, 14001);
    EXPECT_EQ(logs.count("MpcommTransport: segment " + kPeer +
                         " restarted (incarnation 11 -> 22); reconnecting to "
                         "10.0.0.2:14001"),
              1);
    // Settled: the new process is used without further handshakes.
    ASSERT_TRUE(ensure(view(kPeer, "10.0.0.2", 14001, 0x22, 1)).ok());
    EXPECT_EQ(adapter_->connect_calls, 2);
    EXPECT_EQ(adapter_->query_calls, 2);
}

TEST_F(MpcommPeerRegistryTest, AnUnknownIncarnationMatchesAny) {
    ASSERT_TRUE(ensure(view(kPeer, "10.0.0.2", 14000, 0, 1)).ok());
    ASSERT_TRUE(ensure(view(kPeer, "10.0.0.2", 14000, 0x33, 1)).ok());
    ASSERT_TRUE(ensure(view(kPeer, "10.0.0.2", 14000, 0, 1)).ok());
    EXPECT_EQ(adapter_->connect_calls, 1);
    // 0x33 was adopted: another incarnation now is a restart.
    ASSERT_TRUE(ensure(view(kPeer, "10.0.0.2", 14000, 0x44, 1)).ok());
    EXPECT_EQ(adapter_->connect_calls, 2);
}

TEST_F(MpcommPeerRegistryTest, TheRefreshGoesToTheEndpointActuallyConnected) {
    adapter_->query_failures = 1;
    EXPECT_FALSE(ensure(kView).ok());
    // The caller now names another endpoint of the same process; the
    // connection MPComm holds is still the first one.
    ASSERT_TRUE(ensure(view(kPeer, "10.9.9.9", 15555)).ok());
    ASSERT_TRUE(ensure(view(kPeer, "10.9.9.9", 15555, 7, 2)).ok());
    auto queries = adapter_->queries();
    ASSERT_EQ(queries.size(), 3u);
    for (const auto& q : queries) {
        EXPECT_EQ(q.host_id, kPeer);
        EXPECT_EQ(q.addr, "10.0.0.2");
        EXPECT_EQ(q.port, 14000);
    }
    EXPECT_EQ(adapter_->connect_calls, 1);
}

TEST_F(MpcommPeerRegistryTest, PeersAreKeyedByHostIdAndDrainForgetsThemAll) {
    ASSERT_TRUE(ensure(view("a:1", "10.0.0.3", 1000)).ok());
    ASSERT_TRUE(ensure(view("b:2", "10.0.0.4", 1000)).ok());
    EXPECT_EQ(registry_.size(), 2u);
    EXPECT_TRUE(registry_.contains("a:1"));
    EXPECT_TRUE(registry_.contains("b:2"));
    EXPECT_FALSE(registry_.contains("c:3"));
    MpcommPeerState state;
    EXPECT_FALSE(registry_.stateOf("c:3", state));
    EXPECT_TRUE(registry_.drain(Clock::now()).empty());
    EXPECT_EQ(registry_.size(), 0u);
    EXPECT_FALSE(registry_.contains("a:1"));
}

TEST_F(MpcommPeerRegistryTest,
       AWaiterGivesUpAtItsDeadlineAndTheLateOutcomeIsStillRecorded) {
    adapter_->hold_connects = true;
    auto started = Clock::now();
    Status st =
        registry_.ensure(kView, started + std::chrono::milliseconds(50), 50);
    EXPECT_GE(Clock::now() - started, std::chrono::milliseconds(50));
    EXPECT_EQ(
        st, Status::RpcServiceError("MPComm handshake with " + kPeer +
                                    " at 10.0.0.2:14000 did not finish within "
                                    "transports/mpcomm/connect_timeout_ms=50"));
    MpcommPeerState state;
    ASSERT_TRUE(registry_.stateOf(kPeer, state));
    EXPECT_EQ(state, MpcommPeerState::CONNECTING);
    EXPECT_EQ(registry_.flightsRunning(), 1u);
    adapter_->releaseConnects();
    // The abandoned attempt finishes on its own and records READY.
    ASSERT_TRUE(testing::waitUntil([&] {
        return registry_.stateOf(kPeer, state) &&
               state == MpcommPeerState::READY;
    }));
    ASSERT_TRUE(ensure(kView).ok());
    EXPECT_EQ(adapter_->connect_calls, 1) << "never a second connect()";
    EXPECT_EQ(adapter_->query_calls, 1);
}

TEST_F(MpcommPeerRegistryTest, DrainNamesStuckHandshakesAndDefersIdleWork) {
    adapter_->hold_connects = true;
    MpcommPeerRegistry::Ticket ticket;
    Status error;
    EXPECT_EQ(registry_.poll(kView, ticket, error),
              MpcommPeerRegistry::Progress::kWaiting);
    ASSERT_TRUE(
        testing::waitUntil([&] { return adapter_->connectsEntered() == 1; }));
    auto started = Clock::now();
    std::vector<std::string> stuck =
        registry_.drain(started + std::chrono::milliseconds(50));
    EXPECT_EQ(stuck, std::vector<std::string>{kPeer});
    EXPECT_FALSE(registry_.idle());
    std::atomic<int> ran{0};
    registry_.runWhenIdle([&ran] { ++ran; });
    EXPECT_EQ(ran.load(), 0);
    adapter_->releaseConnects();
    ASSERT_TRUE(testing::waitUntil([&] { return ran.load() == 1; }));
    EXPECT_TRUE(registry_.idle());
    // Drained: the late outcome was not recorded.
    EXPECT_FALSE(registry_.contains(kPeer));
    registry_.runWhenIdle([&ran] { ++ran; });  // idle: runs at once
    EXPECT_EQ(ran.load(), 2);
}

// N callers race for one peer: exactly one handshake and one query, and
// every caller gets the first caller's result.
TEST_F(MpcommPeerRegistryTest, ConcurrentCallersShareOneHandshake) {
    // One handshake thread is inside connect(); every caller waits for it.
    ASSERT_NO_FATAL_FAILURE(startCallersOnAHeldHandshake(32));
    MpcommPeerState state;
    ASSERT_TRUE(registry_.stateOf(kPeer, state));
    EXPECT_EQ(state, MpcommPeerState::CONNECTING);
    for (const auto& st : releaseCallers()) EXPECT_TRUE(st.ok()) << st;
    EXPECT_EQ(adapter_->connect_calls, 1);
    EXPECT_EQ(adapter_->query_calls, 1);
    EXPECT_EQ(registry_.waiters(kPeer), 0u);
}

TEST_F(MpcommPeerRegistryTest,
       ConcurrentCallersAllReceiveTheFirstCallersFailure) {
    adapter_->connect_failures = 1;
    ASSERT_NO_FATAL_FAILURE(startCallersOnAHeldHandshake(32));
    for (const auto& st : releaseCallers()) {
        EXPECT_EQ(st.message(), "MPComm connect to 10.0.0.2:14000 (host " +
                                    kPeer + ") failed, error=-4");
    }
    EXPECT_EQ(adapter_->connect_calls, 1);
    EXPECT_EQ(adapter_->query_calls, 0);
    EXPECT_FALSE(registry_.contains(kPeer));
}

TEST_F(MpcommPeerRegistryTest, AHandshakeInProgressDoesNotBlockOtherPeers) {
    ASSERT_TRUE(ensure(view("other:1", "10.0.0.9", 1000)).ok());
    adapter_->hold_connects = true;
    std::thread slow([this] { EXPECT_TRUE(ensure(kView).ok()); });
    ASSERT_TRUE(
        testing::waitUntil([&] { return adapter_->connectsEntered() == 2; }));
    MpcommPeerState state;
    ASSERT_TRUE(registry_.stateOf(kPeer, state));
    EXPECT_EQ(state, MpcommPeerState::CONNECTING);
    // Answered while kPeer's connect() is still held.
    EXPECT_TRUE(ensure(view("other:1", "10.0.0.9", 1000)).ok());
    EXPECT_EQ(registry_.waiters("other:1"), 0u);
    adapter_->releaseConnects();
    slow.join();
    EXPECT_EQ(mpcommPeerStateName(MpcommPeerState::CONNECTED_NO_KEYS),
              std::string("CONNECTED_NO_KEYS"));
}

// The lock-free answer must never say ready where poll() would not.
// linksLowered() counts each time a link came to say less: what lets a
// reader that found a link ready trust it without reading it again.
TEST_F(MpcommPeerRegistryTest, TheLinkAnswersLikePollWithoutTheLock) {
    std::shared_ptr<const MpcommPeerLink> link = readyLink(kView);
    ASSERT_TRUE(link);
    EXPECT_TRUE(link->readyFor(kView));
    EXPECT_EQ(registry_.linksLowered(), 0u) << "becoming ready lowers none";
    // An incarnation the caller does not know matches, as in poll().
    EXPECT_TRUE(link->readyFor(view(kPeer, "10.0.0.2", 14000, 0, 1)));
    // A higher epoch needs a key query, another incarnation a reconnect:
    // both are poll()'s.
    const MpcommPeerView newer = view(kPeer, "10.0.0.2", 14000, 7, 2);
    const MpcommPeerView restarted = view(kPeer, "10.0.0.2", 14000, 8, 2);
    EXPECT_FALSE(link->readyFor(newer));
    EXPECT_FALSE(link->readyFor(restarted));
    // Once the keys are refreshed the same link is ready for the new
    // epoch, and still for the old one.
    ASSERT_TRUE(ensure(newer).ok());
    EXPECT_TRUE(link->readyFor(newer));
    EXPECT_TRUE(link->readyFor(kView));
    EXPECT_EQ(registry_.linksLowered(), 1u) << "unready during the query";
    // A restart retires the link for good; the new incarnation has its own.
    std::shared_ptr<const MpcommPeerLink> fresh = readyLink(restarted);
    ASSERT_TRUE(fresh);
    EXPECT_NE(fresh, link);
    EXPECT_FALSE(link->readyFor(newer));
    EXPECT_FALSE(link->readyFor(restarted));
    EXPECT_TRUE(fresh->readyFor(restarted));
    EXPECT_EQ(adapter_->connect_calls, 2);
    EXPECT_EQ(registry_.linksLowered(), 2u) << "the old link retired";
    // drain() forgets the peer: no link of it stays ready.
    registry_.drain(Clock::now() + std::chrono::seconds(20));
    EXPECT_FALSE(fresh->readyFor(restarted));
    EXPECT_EQ(registry_.linksLowered(), 3u);
}

}  // namespace
}  // namespace mooncake::tent
