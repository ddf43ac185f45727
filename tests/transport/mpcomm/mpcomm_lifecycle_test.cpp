// Peers across a cluster's lifetime, through MpcommTransport over the mock
// adapter: handshakes bounded by transports/mpcomm/connect_timeout_ms and
// recorded even when late, bounded teardown, restarted peers (incarnation)
// and re-registration (registration epoch).
#include <gtest/gtest.h>

#include <future>

#include "kit/wait_until.h"
#include "mpcomm_lifecycle_fixture.h"

namespace mooncake::tent {
namespace {

using testing::BackgroundCall;
using testing::LogCapture;
using testing::MpcommLifecycleFixture;
using testing::waitUntil;

class MpcommLifecycle : public MpcommLifecycleFixture {
 protected:
    static constexpr int64_t kTimeoutMs = 200;

    // Installs with kTimeoutMs and leaves kPeer2's first handshake held
    // inside connect(): one submission to it waited kTimeoutMs and failed.
    void installWithAHeldHandshake() {
        setConnectTimeout(kTimeoutMs);
        ASSERT_TRUE(install().ok());
        adapter_->hold(kPeer2);
        auto batch = submit({request(Request::WRITE, openSegment(kPeer2), 8)});
        ASSERT_EQ(statusOf(batch, 0).s, FAILED);
        release(batch);
        ASSERT_EQ(adapter_->connectCallsTo(kPeer2), 1);
        ASSERT_EQ(transport_->peers().flightsRunning(), 1u);
    }

    // Connects kPeer (segment `peer`) with one WRITE and waits until no
    // handshake runs, so that a test's late handshake can only be kPeer2's,
    // even where a loaded sanitizer build takes longer than the bound.
    void connectFirst(SegmentID peer) {
        auto warm = submit({request(Request::WRITE, peer, 8)});
        ASSERT_TRUE(waitUntil([&] { return transport_->peers().idle(); }));
        ASSERT_TRUE(stateIs(kPeer, MpcommPeerState::READY));
        release(warm);
    }

    std::string abandonWarning() const {
        return "MpcommTransport: uninstall abandons 1 MPComm handshake(s) "
               "still inside the provider after "
               "transports/mpcomm/connect_timeout_ms=" +
               std::to_string(kTimeoutMs) + " (peers: " + kPeer2 +
               "); MPComm is shut down when they return";
    }
};

const std::string kAbandonedError =
    "MpcommTransport: an MPComm handshake abandoned by the last uninstall() "
    "has not returned yet; MPComm cannot be re-initialised until it does";

// --- bounded handshakes ----------------------------------------------------

TEST_F(MpcommLifecycle, AHeldHandshakeFailsOnlyItsPeersTasksWithinTheBound) {
    LogCapture logs;
    setConnectTimeout(kTimeoutMs);
    ASSERT_TRUE(install().ok());
    SegmentID peer = openPeer();
    SegmentID peer2 = openSegment(kPeer2);
    ASSERT_NO_FATAL_FAILURE(connectFirst(peer));
    const size_t posted_before = adapter_->transfers().size();
    adapter_->hold(kPeer2);
    Transport::SubBatchRef batch = allocate();
    Status st;
    int64_t took = timedMs([&] {
        st = transport_->submitTransferTasks(
            batch,
            {request(Request::WRITE, peer, 8),
             request(Request::WRITE, peer2, 8), request(Request::READ, peer, 8),
             request(Request::READ, peer2, 8)});
    });
    ASSERT_TRUE(st.ok()) << st;
    EXPECT_GE(took, kTimeoutMs);
    EXPECT_LT(took, kTimeoutMs + kMarginMs);
    EXPECT_EQ(statusOf(batch, 0).s, COMPLETED);
    EXPECT_EQ(statusOf(batch, 1).s, FAILED);
    EXPECT_EQ(statusOf(batch, 2).s, COMPLETED);
    EXPECT_EQ(statusOf(batch, 3).s, FAILED);
    // Nothing was posted to the peer that never finished its handshake.
    const auto transfers = adapter_->transfers();
    ASSERT_EQ(transfers.size(), posted_before + 2);
    for (size_t i = 0; i < transfers.size(); ++i) {
        EXPECT_EQ(transfers[i].host_id, kPeer) << i;
    }
    EXPECT_EQ(adapter_->connectCallsTo(kPeer), 1);
    EXPECT_EQ(adapter_->connectCallsTo(kPeer2), 1);
    EXPECT_EQ(logs.count(timeoutLine(kPeer2, "10.0.0.3:14001", kTimeoutMs)), 1);
    EXPECT_TRUE(stateIs(kPeer2, MpcommPeerState::CONNECTING));
    release(batch);
}

// A submission posts a ready peer's requests as it reads them, until one
// names a peer that is not ready; from there on every request is grouped
// by target and waits with its peer. Each peer still sees its requests in
// submission order.
TEST_F(MpcommLifecycle, ABatchMixingAReadyPeerAndANewOneKeepsEachPeersOrder) {
    ASSERT_TRUE(install().ok());
    SegmentID peer = openPeer();
    SegmentID peer2 = openSegment(kPeer2);
    ASSERT_NO_FATAL_FAILURE(connectFirst(peer));
    const size_t posted_before = adapter_->transfers().size();
    auto batch = submit(
        {request(Request::WRITE, peer, 1), request(Request::WRITE, peer2, 2),
         request(Request::READ, peer, 3), request(Request::READ, peer2, 4),
         request(Request::WRITE, peer, 5)});
    for (int i = 0; i < 5; ++i) EXPECT_EQ(statusOf(batch, i).s, COMPLETED);
    const auto transfers = adapter_->transfers();
    ASSERT_EQ(transfers.size(), posted_before + 5);
    std::vector<size_t> to_peer, to_peer2;
    for (size_t i = posted_before; i < transfers.size(); ++i) {
        (transfers[i].host_id == kPeer ? to_peer : to_peer2)
            .push_back(transfers[i].length);
    }
    EXPECT_EQ(to_peer, (std::vector<size_t>{1, 3, 5}));
    EXPECT_EQ(to_peer2, (std::vector<size_t>{2, 4}));
    EXPECT_EQ(adapter_->connectCallsTo(kPeer), 1);
    EXPECT_EQ(adapter_->connectCallsTo(kPeer2), 1);
    release(batch);
}

// The submitter waits; nobody else does. The bound is long here so that the
// submitter is provably still waiting while the other calls run.
TEST_F(MpcommLifecycle,
       WhileASubmitterWaitsPollingSubmittingAndRegisteringGoOn) {
    setConnectTimeout(60000);
    ASSERT_TRUE(install().ok());
    SegmentID peer = openPeer();
    SegmentID peer2 = openSegment(kPeer2);
    Transport::SubBatchRef batch = allocate();
    ASSERT_TRUE(
        transport_
            ->submitTransferTasks(batch, {request(Request::WRITE, peer, 8)})
            .ok());
    adapter_->hold(kPeer2);
    Status held_submit;
    BackgroundCall submitter(*adapter_, [&] {
        held_submit = transport_->submitTransferTasks(
            batch, {request(Request::WRITE, peer, 8),
                    request(Request::READ, peer2, 8)});
    });
    ASSERT_TRUE(
        waitUntil([&] { return transport_->peers().waiters(kPeer2) == 1; }));

    // An earlier task of the very sub-batch being submitted to.
    EXPECT_TRUE(returnsPromptly([&] {
        TransferStatus status;
        EXPECT_TRUE(transport_->getTransferStatus(batch, 0, status).ok());
        EXPECT_EQ(status.s, COMPLETED);
    }));
    // Another submission, to the healthy peer, on another thread.
    EXPECT_TRUE(returnsPromptly([&] {
        auto other = submit({request(Request::READ, peer, 16),
                             request(Request::WRITE, peer, 16)});
        EXPECT_EQ(statusOf(other, 0).s, COMPLETED);
        EXPECT_EQ(statusOf(other, 1).s, COMPLETED);
        release(other);
    }));
    // Registration.
    EXPECT_TRUE(returnsPromptly([&] {
        BufferDesc desc = mpcommBuffer(0x70000, 0x1000);
        EXPECT_TRUE(transport_->addMemoryBuffer(desc, MemoryOptions{}).ok());
        EXPECT_TRUE(transport_->removeMemoryBuffer(desc).ok());
    }));
    EXPECT_FALSE(submitter.done());
    EXPECT_EQ(transport_->peers().waiters(kPeer2), 1u);

    adapter_->release(kPeer2);
    submitter.join();
    ASSERT_TRUE(held_submit.ok()) << held_submit;
    ASSERT_EQ(batch->size(), 3u);
    EXPECT_EQ(statusOf(batch, 1).s, COMPLETED);
    EXPECT_EQ(statusOf(batch, 2).s, COMPLETED);
    EXPECT_EQ(adapter_->connectCallsTo(kPeer2), 1);
    release(batch);
}

TEST_F(MpcommLifecycle, AHandshakeThatFinishesAfterItsWaiterGaveUpIsKept) {
    ASSERT_NO_FATAL_FAILURE(installWithAHeldHandshake());
    EXPECT_TRUE(stateIs(kPeer2, MpcommPeerState::CONNECTING));
    adapter_->release(kPeer2);
    ASSERT_TRUE(
        waitUntil([&] { return stateIs(kPeer2, MpcommPeerState::READY); }));
    auto batch = submit({request(Request::WRITE, openSegment(kPeer2), 8)});
    EXPECT_EQ(statusOf(batch, 0).s, COMPLETED);
    EXPECT_EQ(adapter_->connectCallsTo(kPeer2), 1);
    EXPECT_EQ(adapter_->queryCallsTo(kPeer2), 1);
    release(batch);
}

// --- bounded teardown ------------------------------------------------------

TEST_F(MpcommLifecycle, UninstallWithAHeldHandshakeIsBoundedAndDefersShutdown) {
    LogCapture logs;
    ASSERT_NO_FATAL_FAILURE(installWithAHeldHandshake());
    int64_t took = timedMs([&] { ASSERT_TRUE(transport_->uninstall().ok()); });
    EXPECT_LT(took, kTimeoutMs + kMarginMs);
    EXPECT_EQ(logs.linesAt(google::GLOG_WARNING),
              std::vector<std::string>{abandonWarning()});
    // MPComm is still inside connect(): it must not be shut down under it.
    EXPECT_EQ(adapter_->stop_accept_calls, 0);
    EXPECT_EQ(adapter_->shutdown_calls, 0);

    Status refused = install();
    EXPECT_TRUE(refused.IsInvalidArgument());
    EXPECT_EQ(refused.message(), kAbandonedError);
    EXPECT_EQ(adapter_->init_calls, 1);

    adapter_->release(kPeer2);
    ASSERT_TRUE(waitUntil([&] { return adapter_->shutdown_calls == 1; }));
    EXPECT_EQ(adapter_->stop_accept_calls, 1);
    ASSERT_TRUE(install().ok());
    EXPECT_EQ(adapter_->init_calls, 2);
    // The late handshake belonged to the old provider instance: recorded
    // nowhere, so the new one connects afresh.
    EXPECT_EQ(transport_->peers().size(), 0u);
    auto batch = submit({request(Request::WRITE, openSegment(kPeer2), 8)});
    EXPECT_EQ(statusOf(batch, 0).s, COMPLETED);
    EXPECT_EQ(adapter_->connectCallsTo(kPeer2), 2);
    EXPECT_EQ(adapter_->misuse, 0);
    release(batch);
}

TEST_F(MpcommLifecycle, DestroyingTheTransportWithAHeldHandshakeIsBounded) {
    LogCapture logs;
    ASSERT_NO_FATAL_FAILURE(installWithAHeldHandshake());
    int64_t took = timedMs([&] { transport_.reset(); });
    EXPECT_LT(took, kTimeoutMs + kMarginMs);
    EXPECT_EQ(logs.linesAt(google::GLOG_WARNING),
              std::vector<std::string>{abandonWarning()});
    EXPECT_EQ(adapter_->shutdown_calls, 0);
    // The handshake's thread outlives the transport and shuts MPComm down.
    adapter_->release(kPeer2);
    ASSERT_TRUE(waitUntil([&] { return adapter_->shutdown_calls == 1; }));
    EXPECT_EQ(adapter_->stop_accept_calls, 1);
    EXPECT_EQ(adapter_->misuse, 0);
}

// TRANSPORT BUG (mpcomm_peer_registry.cpp:138-141 and :280): the last
// flight removes itself from `running` and takes the deferred shutdown out
// of when_idle under the lock, then runs it unlocked; idle() reads only
// running.empty(), so it is already true while stopAcceptThread() and
// shutdown() are still running, and install() calls init() (then, when that
// fails, shutdown()) concurrently with them (mpcomm_peer_registry.h: "While
// it is pending, idle() is false"; mpcomm_adapter.h: lifecycle calls never
// run concurrently).
TEST_F(MpcommLifecycle, InstallRefusesWhileTheDeferredShutdownIsStillRunning) {
    ASSERT_NO_FATAL_FAILURE(installWithAHeldHandshake());
    ASSERT_TRUE(transport_->uninstall().ok());
    adapter_->holdStopAccept();
    adapter_->release(kPeer2);
    // The handshake returned; its thread is now inside the deferred
    // stopAcceptThread() + shutdown().
    ASSERT_TRUE(waitUntil([&] { return adapter_->stop_accept_calls == 1; }));
    Status refused = install();
    EXPECT_EQ(refused.message(), kAbandonedError);
    EXPECT_EQ(adapter_->init_calls, 1);
    EXPECT_EQ(adapter_->shutdown_calls, 0);

    adapter_->releaseStopAccept();
    ASSERT_TRUE(waitUntil([&] { return adapter_->shutdown_calls >= 1; }));
    ASSERT_TRUE(waitUntil([&] { return transport_->peers().idle(); }));
    ASSERT_TRUE(install().ok());
    EXPECT_EQ(adapter_->shutdown_calls, 1);
    EXPECT_EQ(adapter_->init_calls, 2);
}

// With a submitter waiting on a held handshake, uninstall() waits for the
// submitter to leave and for the handshake within one connect_timeout_ms,
// not one for each.
TEST_F(MpcommLifecycle, UninstallWhileASubmitterWaitsTakesOneBoundNotTwo) {
    constexpr int64_t kLongMs = 3000;
    setConnectTimeout(kLongMs);
    ASSERT_TRUE(install().ok());
    SegmentID peer2 = openSegment(kPeer2);
    adapter_->hold(kPeer2);
    Transport::SubBatchRef batch = allocate();
    BackgroundCall submitter(*adapter_, [&] {
        transport_->submitTransferTasks(batch,
                                        {request(Request::WRITE, peer2, 8)});
    });
    ASSERT_TRUE(
        waitUntil([&] { return transport_->peers().waiters(kPeer2) == 1; }));
    int64_t took = timedMs([&] { ASSERT_TRUE(transport_->uninstall().ok()); });
    EXPECT_LT(took, kLongMs + kMarginMs);
    submitter.join();
    release(batch);
}

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

    publishDefaultPeer();  // a new epoch, read afresh by a new thread only
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
