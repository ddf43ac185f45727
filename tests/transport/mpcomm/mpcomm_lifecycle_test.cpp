// Peers across a cluster's lifetime, through MpcommTransport over the mock
// adapter: handshakes bounded by transports/mpcomm/connect_timeout_ms and
// recorded even when late, and bounded teardown. Restarted peers and
// re-registration are in mpcomm_lifecycle_peers_test.cpp.
#include <gtest/gtest.h>

#include "kit/wait_until.h"
#include "mpcomm_lifecycle_fixture.h"

namespace mooncake::tent {
namespace {

using testing::BackgroundCall;
using testing::LogCapture;
using testing::MpcommLifecycle;
using testing::waitUntil;

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

// Two new peers in one submission: the one whose handshake finishes has its
// tasks posted while the submitter still waits for the other's.
TEST_F(MpcommLifecycle, AReadyPeersTasksArePostedWhileAnotherPeerIsAwaited) {
    setConnectTimeout(60000);
    ASSERT_TRUE(install().ok());
    SegmentID peer = openPeer();
    SegmentID peer2 = openSegment(kPeer2);
    adapter_->hold(kPeer2);
    const size_t posted_before = adapter_->transfers().size();
    Transport::SubBatchRef batch = allocate();
    Status held_submit;
    BackgroundCall submitter(*adapter_, [&] {
        held_submit = transport_->submitTransferTasks(
            batch, {request(Request::WRITE, peer2, 4),
                    request(Request::WRITE, peer, 8)});
    });
    ASSERT_TRUE(waitUntil(
        [&] { return adapter_->transfers().size() == posted_before + 1; }));
    EXPECT_FALSE(submitter.done());
    EXPECT_EQ(adapter_->transfers().back().host_id, kPeer);
    EXPECT_EQ(adapter_->transfers().back().length, 8u);

    adapter_->release(kPeer2);
    submitter.join();
    ASSERT_TRUE(held_submit.ok()) << held_submit;
    EXPECT_EQ(statusOf(batch, 0).s, COMPLETED);
    EXPECT_EQ(statusOf(batch, 1).s, COMPLETED);
    ASSERT_EQ(adapter_->transfers().size(), posted_before + 2);
    EXPECT_EQ(adapter_->transfers().back().host_id, kPeer2);
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

}  // namespace
}  // namespace mooncake::tent
