// Peers across a cluster's lifetime, through MpcommTransport over the mock
// adapter: restarted peers (incarnation) and re-registration
// (registration epoch). Handshakes and teardown are in
// mpcomm_lifecycle_test.cpp.
#include <gtest/gtest.h>

#include <future>

#include "kit/wait_until.h"
#include "mpcomm_lifecycle_fixture.h"

namespace mooncake::tent {
namespace {

using testing::BackgroundCall;
using testing::LogCapture;
using testing::MpcommLifecycle;
using testing::waitUntil;

// --- restarted peers -------------------------------------------------------

TEST_F(MpcommLifecycle, ARestartedPeerIsReconnectedAtItsNewPort) {
    LogCapture logs;
    ASSERT_TRUE(install().ok());
    SegmentID peer = openPeer();
    auto before = submit({request(Request::WRITE, peer, 8)});
    uint64_t old_incarnation = peer_sm_->getLocal()->incarnation;
    restartPeer(*peer_sm_, "v1:10.0.0.2:14002");
    uint64_t new_incarnation = peer_sm_->getLocal()->incarnation;
    // As the descriptor cache's TTL running out would.
    ASSERT_TRUE(local_sm_->invalidateRemote(peer).ok());
    auto after = submit({request(Request::WRITE, peer, 8)});
    EXPECT_EQ(statusOf(after, 0).s, COMPLETED);
    ASSERT_EQ(adapter_->connectCallsTo(kPeer), 2);
    EXPECT_EQ(adapter_->connects().back().addr, "10.0.0.2");
    EXPECT_EQ(adapter_->connects().back().port, 14002);
    EXPECT_EQ(adapter_->queryCallsTo(kPeer), 2);
    EXPECT_EQ(
        logs.count("MpcommTransport: segment " + kPeer +
                   " restarted (incarnation " + hex(old_incarnation) + " -> " +
                   hex(new_incarnation) + "); reconnecting to 10.0.0.2:14002"),
        1);
    release(before);
    release(after);
}

TEST_F(MpcommLifecycle, TheSameIncarnationIsNeverReconnected) {
    ASSERT_TRUE(install().ok());
    SegmentID peer = openPeer();
    std::vector<Transport::SubBatchRef> batches;
    for (int round = 0; round < 3; ++round) {
        // The same process publishing its unchanged descriptor again.
        publishDefaultPeer();
        ASSERT_TRUE(local_sm_->invalidateRemote(peer).ok());
        batches.push_back(submit({request(Request::WRITE, peer, 8)}));
        EXPECT_EQ(statusOf(batches.back(), 0).s, COMPLETED);
    }
    EXPECT_EQ(adapter_->connectCallsTo(kPeer), 1);
    // Each publication advanced the epoch, so each round queried once.
    EXPECT_EQ(adapter_->queryCallsTo(kPeer), 3);
    for (auto batch : batches) release(batch);
}

TEST_F(MpcommLifecycle, AFailedTransferMakesTheNextUseReReadTheDescriptor) {
    ASSERT_TRUE(install().ok());
    SegmentID peer = openPeer();
    adapter_->auto_complete = false;
    auto failed = submit({request(Request::WRITE, peer, 8)});
    const int fetches = fetcher_->fetches;
    adapter_->complete(lastHandle(), false, 0, -5);
    EXPECT_EQ(statusOf(failed, 0).s, FAILED);
    EXPECT_EQ(fetcher_->fetches, fetches) << "failing reads nothing yet";
    adapter_->auto_complete = true;
    auto next = submit({request(Request::WRITE, peer, 8)});
    EXPECT_EQ(fetcher_->fetches, fetches + 1);
    EXPECT_EQ(statusOf(next, 0).s, COMPLETED);
    // Same incarnation: the re-read changes nothing, and is done once.
    auto third = submit({request(Request::WRITE, peer, 8)});
    EXPECT_EQ(fetcher_->fetches, fetches + 1);
    EXPECT_EQ(adapter_->connectCallsTo(kPeer), 1);
    release(failed);
    release(next);
    release(third);
}

TEST_F(MpcommLifecycle, AFailedTransferRevealsARestartBeforeTheCacheExpires) {
    ASSERT_TRUE(install().ok());
    SegmentID peer = openPeer();
    auto first = submit({request(Request::WRITE, peer, 8)});
    restartPeer(*peer_sm_, "v1:10.0.0.2:14002");
    adapter_->auto_complete = false;
    // The cached descriptor still shows the old process.
    auto stale = submit({request(Request::WRITE, peer, 8)});
    EXPECT_EQ(adapter_->connectCallsTo(kPeer), 1);
    const int fetches = fetcher_->fetches;
    adapter_->complete(lastHandle(), false, 0, -5);  // the old one is gone
    EXPECT_EQ(statusOf(stale, 0).s, FAILED);
    adapter_->auto_complete = true;
    auto next = submit({request(Request::WRITE, peer, 8)});
    EXPECT_EQ(fetcher_->fetches, fetches + 1);
    EXPECT_EQ(statusOf(next, 0).s, COMPLETED);
    ASSERT_EQ(adapter_->connectCallsTo(kPeer), 2);
    EXPECT_EQ(adapter_->connects().back().port, 14002);
    release(first);
    release(stale);
    release(next);
}

// --- re-registration -------------------------------------------------------

TEST_F(MpcommLifecycle, AnAdvancedEpochQueriesAgainOverTheSameConnection) {
    ASSERT_TRUE(install().ok());
    SegmentID peer = openPeer();
    auto first = submit({request(Request::WRITE, peer, 8)});
    EXPECT_EQ(adapter_->queryCallsTo(kPeer), 1);
    publishPeer("v1:10.0.0.2:14000",
                {mpcommBuffer(kPeerBuffer, kPeerBufferLength),
                 mpcommBuffer(0x90000, 0x1000)});
    ASSERT_TRUE(local_sm_->invalidateRemote(peer).ok());
    auto second = submit({request(Request::WRITE, peer, 8, 0x90000)});
    EXPECT_EQ(statusOf(second, 0).s, COMPLETED);
    EXPECT_EQ(adapter_->queryCallsTo(kPeer), 2);
    EXPECT_EQ(adapter_->connectCallsTo(kPeer), 1);
    EXPECT_EQ(adapter_->queries().back().port, kPeerPort);
    // Published again under the same epoch: the keys are current.
    publishPeer("v1:10.0.0.2:14000",
                {mpcommBuffer(kPeerBuffer, kPeerBufferLength),
                 mpcommBuffer(0x90000, 0x1000)},
                /*new_epoch=*/false);
    ASSERT_TRUE(local_sm_->invalidateRemote(peer).ok());
    auto third = submit({request(Request::WRITE, peer, 8)});
    EXPECT_EQ(statusOf(third, 0).s, COMPLETED);
    EXPECT_EQ(adapter_->queryCallsTo(kPeer), 2);
    EXPECT_EQ(adapter_->connectCallsTo(kPeer), 1);
    release(first);
    release(second);
    release(third);
}

TEST_F(MpcommLifecycle,
       AKeyRefreshThatHangsFailsOnlyItsTasksAndNeverReconnects) {
    setConnectTimeout(kTimeoutMs);
    ASSERT_TRUE(install().ok());
    SegmentID peer = openPeer();
    SegmentID peer2 = openSegment(kPeer2);
    // Both ready first, so that only the refresh can be late. Their first
    // handshakes are awaited, not raced against the 200 ms bound, which a
    // sanitizer build on a loaded host can outlast.
    auto first = submit(
        {request(Request::WRITE, peer, 8), request(Request::WRITE, peer2, 8)});
    ASSERT_TRUE(waitUntil([&] { return transport_->peers().idle(); }));
    ASSERT_TRUE(stateIs(kPeer, MpcommPeerState::READY));
    ASSERT_TRUE(stateIs(kPeer2, MpcommPeerState::READY));
    ASSERT_EQ(adapter_->queryCallsTo(kPeer), 1);
    publishDefaultPeer();  // a new epoch
    ASSERT_TRUE(local_sm_->invalidateRemote(peer).ok());
    adapter_->hold(kPeer);  // the key query now hangs
    auto held = submit(
        {request(Request::WRITE, peer, 8), request(Request::WRITE, peer2, 8)});
    EXPECT_EQ(statusOf(held, 0).s, FAILED);
    EXPECT_EQ(statusOf(held, 1).s, COMPLETED);
    EXPECT_EQ(adapter_->queryCallsTo(kPeer), 2);
    adapter_->release(kPeer);
    ASSERT_TRUE(waitUntil([&] { return transport_->peers().idle(); }));
    auto after = submit({request(Request::WRITE, peer, 8)});
    EXPECT_EQ(statusOf(after, 0).s, COMPLETED);
    EXPECT_EQ(adapter_->connectCallsTo(kPeer), 1);
    EXPECT_EQ(adapter_->queryCallsTo(kPeer), 2) << "the late query counted";
    release(first);
    release(held);
    release(after);
}

// A thread whose resolution of a peer was found ready posts to it without
// asking the registry. A key query that another thread starts (it read a
// newer registration epoch) makes the link unready; this thread's next
// request to the peer must wait for that query like any other, not post
// on its cached readiness while the keys are being fetched.
TEST_F(MpcommLifecycle, AKeyQueryStartedOnAnotherThreadHoldsThisThreadsPosts) {
    setConnectTimeout(60000);  // no wait here may end by its bound
    ASSERT_TRUE(install().ok());
    SegmentID peer = openPeer();
    std::promise<void> warmed;
    std::promise<void> lowered;
    std::shared_future<void> go = lowered.get_future().share();
    TransferStatusEnum late_status = INITIAL;
    BackgroundCall poster(*adapter_, [&] {
        // The first submission connects through the registry; the second
        // finds the peer ready and records it in this thread's cache.
        auto warm = submit({request(Request::WRITE, peer, 8)});
        auto again = submit({request(Request::WRITE, peer, 8)});
        EXPECT_EQ(statusOf(again, 0).s, COMPLETED);
        release(warm);
        release(again);
        warmed.set_value();
        go.wait();
        auto late = submit({request(Request::WRITE, peer, 8)});
        late_status = statusOf(late, 0).s;
        release(late);
    });
    // Whatever fails below, the poster is let go before it is joined.
    struct LetGo {
        std::promise<void>& lowered;
        bool done = false;
        void now() {
            if (!done) lowered.set_value();
            done = true;
        }
        ~LetGo() { now(); }
    } let_go{lowered};
    warmed.get_future().wait();
    ASSERT_EQ(adapter_->queryCallsTo(kPeer), 1);

    // A new epoch. The engine's one copy of the descriptor is dropped, as a
    // store notification drops it, so the next resolution reads it afresh.
    publishDefaultPeer();
    ASSERT_TRUE(local_sm_->invalidateRemote(peer).ok());
    adapter_->hold(kPeer);
    TransferStatusEnum refresh_status = INITIAL;
    BackgroundCall refresher(*adapter_, [&] {
        auto batch = submit({request(Request::WRITE, peer, 8)});
        refresh_status = statusOf(batch, 0).s;
        release(batch);
    });
    ASSERT_TRUE(
        waitUntil([&] { return transport_->peers().waiters(kPeer) == 1; }));
    const size_t posted = adapter_->transfers().size();
    let_go.now();
    EXPECT_TRUE(waitUntil([&] {
        return transport_->peers().waiters(kPeer) == 2;
    })) << "the poster did not wait for the key query";
    EXPECT_EQ(adapter_->transfers().size(), posted)
        << "posted while the peer's keys were being fetched";
    adapter_->release(kPeer);
    poster.join();
    refresher.join();
    EXPECT_EQ(late_status, COMPLETED);
    EXPECT_EQ(refresh_status, COMPLETED);
    EXPECT_EQ(adapter_->queryCallsTo(kPeer), 2);
    EXPECT_EQ(adapter_->connectCallsTo(kPeer), 1);
}

}  // namespace
}  // namespace mooncake::tent
