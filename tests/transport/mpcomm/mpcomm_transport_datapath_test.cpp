// Peer resolution, batches, completion and teardown through MpcommTransport.
#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <thread>

#include "kit/wait_until.h"
#include "mpcomm_transport_fixture.h"

namespace mooncake::tent {
namespace {

using testing::LogCapture;
using testing::MpcommTransportFixture;
using testing::ScopedEnv;

class MpcommDataPath : public MpcommTransportFixture {
 protected:
    void SetUp() override {
        MpcommTransportFixture::SetUp();
        publishDefaultPeer();
    }
    // Allocates a sub-batch of `capacity` and submits `requests` into it.
    Transport::SubBatchRef submit(const std::vector<Request>& requests,
                                  size_t capacity = 16) {
        Transport::SubBatchRef batch = nullptr;
        EXPECT_TRUE(transport_->allocateSubBatch(batch, capacity).ok());
        Status st = transport_->submitTransferTasks(batch, requests);
        EXPECT_TRUE(st.ok()) << st;
        return batch;
    }
    void release(Transport::SubBatchRef batch) {
        EXPECT_TRUE(transport_->freeSubBatch(batch).ok());
    }
};

TEST_F(MpcommDataPath, TheFirstRequestConnectsToTheAdvertisedEndpoint) {
    ASSERT_TRUE(install().ok());
    SegmentID peer = openPeer();
    LogCapture logs;
    auto batch = submit({request(Request::WRITE, peer, 128)});
    ASSERT_EQ(adapter_->connects().size(), 1u);
    EXPECT_EQ(adapter_->connects()[0].host_id, kPeer);
    EXPECT_EQ(adapter_->connects()[0].addr, "10.0.0.2");
    EXPECT_EQ(adapter_->connects()[0].port, 14000);
    EXPECT_EQ(adapter_->query_calls, 1);
    EXPECT_EQ(statusOf(batch, 0).s, COMPLETED);
    auto second = submit({request(Request::READ, peer, 64)});
    EXPECT_EQ(adapter_->connect_calls, 1);
    EXPECT_EQ(logs.count("MpcommTransport: Connected to segment " + kPeer), 1);
    release(batch);
    release(second);
}

TEST_F(MpcommDataPath, WriteMapsToPutAndReadToGetOneTransferPerRequest) {
    ASSERT_TRUE(install().ok());
    SegmentID peer = openPeer();
    auto batch = submit({request(Request::WRITE, peer, 256, kPeerBuffer),
                         request(Request::READ, peer, 512, kPeerBuffer + 512)});
    auto t = adapter_->transfers();
    ASSERT_EQ(t.size(), 2u);
    EXPECT_TRUE(t[0].is_put);
    EXPECT_EQ(t[0].local_addr, reinterpret_cast<uintptr_t>(local_data_));
    EXPECT_EQ(t[0].host_id, kPeer);
    EXPECT_EQ(t[0].remote_addr, kPeerBuffer);
    EXPECT_EQ(t[0].length, 256u);
    EXPECT_FALSE(t[1].is_put);
    EXPECT_EQ(t[1].remote_addr, kPeerBuffer + 512);
    EXPECT_EQ(t[1].length, 512u);
    TransferStatus s0 = statusOf(batch, 0), s1 = statusOf(batch, 1);
    EXPECT_EQ(s0.s, COMPLETED);
    EXPECT_EQ(s0.transferred_bytes, 256u);
    EXPECT_EQ(s1.s, COMPLETED);
    EXPECT_EQ(s1.transferred_bytes, 512u);
    release(batch);
}

TEST_F(MpcommDataPath, APeerWithoutAnEndpointFailsItsRequestNamingTheSegment) {
    publishPeer("", {mpcommBuffer(kPeerBuffer, kPeerBufferLength)});
    ASSERT_TRUE(install().ok());
    SegmentID peer = openPeer();
    LogCapture logs;
    auto batch = submit({request(Request::WRITE, peer, 64)});
    EXPECT_EQ(statusOf(batch, 0).s, FAILED);
    EXPECT_EQ(adapter_->connect_calls, 0);
    EXPECT_EQ(adapter_->put_calls, 0);
    EXPECT_EQ(logs.count("MpcommTransport: segment " + kPeer +
                         " published no MPComm endpoint "
                         "(transport_attrs[MPCOMM] is empty) and "
                         "MPCOMM_REMOTE_TCP_PORT is not set; the peer does "
                         "not run the MPComm transport"),
              1);
    release(batch);
}

TEST_F(MpcommDataPath, WithoutAnEndpointMpcommRemoteTcpPortIsUsedWithAWarning) {
    publishPeer("", {mpcommBuffer(kPeerBuffer, kPeerBufferLength)});
    ScopedEnv remote("MPCOMM_REMOTE_TCP_PORT", "15001");
    ASSERT_TRUE(install().ok());
    SegmentID peer = openPeer();
    LogCapture logs;
    auto batch = submit({request(Request::WRITE, peer, 64)});
    EXPECT_EQ(statusOf(batch, 0).s, COMPLETED);
    ASSERT_EQ(adapter_->connects().size(), 1u);
    EXPECT_EQ(adapter_->connects()[0].addr, "10.0.0.2");
    EXPECT_EQ(adapter_->connects()[0].port, 15001);
    EXPECT_EQ(logs.count("MpcommTransport: segment " + kPeer +
                         " published no MPComm endpoint; using "
                         "MPCOMM_REMOTE_TCP_PORT=15001 at 10.0.0.2"),
              1);
    release(batch);
}

TEST_F(MpcommDataPath, APublishedEndpointWinsOverMpcommRemoteTcpPort) {
    ScopedEnv remote("MPCOMM_REMOTE_TCP_PORT", "15001");
    ASSERT_TRUE(install().ok());
    auto batch = submit({request(Request::WRITE, openPeer(), 64)});
    ASSERT_EQ(adapter_->connects().size(), 1u);
    EXPECT_EQ(adapter_->connects()[0].port, 14000);
    release(batch);
}

TEST_F(MpcommDataPath, AMalformedEndpointFailsTheRequestNamingTheSegment) {
    publishPeer("v2:10.0.0.2:14000",
                {mpcommBuffer(kPeerBuffer, kPeerBufferLength)});
    ASSERT_TRUE(install().ok());
    LogCapture logs;
    auto batch = submit({request(Request::WRITE, openPeer(), 64)});
    EXPECT_EQ(statusOf(batch, 0).s, FAILED);
    EXPECT_EQ(adapter_->connect_calls, 0);
    EXPECT_EQ(logs.count("MpcommTransport: segment " + kPeer +
                         ": invalid MPComm endpoint attribute "
                         "'v2:10.0.0.2:14000': unsupported version 'v2' "
                         "(this build reads v1)"),
              1);
    release(batch);
}

TEST_F(MpcommDataPath, AReopenedSegmentReusesTheConnectionOfItsHost) {
    ASSERT_TRUE(install().ok());
    SegmentID first = openPeer();
    auto a = submit({request(Request::WRITE, first, 64)});
    ASSERT_TRUE(local_sm_->closeRemote(first).ok());
    SegmentID second = openPeer();
    ASSERT_NE(first, second);
    auto b = submit({request(Request::WRITE, second, 64)});
    EXPECT_EQ(statusOf(b, 0).s, COMPLETED);
    EXPECT_EQ(adapter_->connect_calls, 1);
    EXPECT_EQ(adapter_->query_calls, 1);
    EXPECT_EQ(transport_->peers().size(), 1u);
    release(a);
    release(b);
}

TEST_F(MpcommDataPath, KeysAreRefetchedWhenThePeerRegistersMoreMemory) {
    ASSERT_TRUE(install().ok());
    SegmentID peer = openPeer();
    auto a = submit({request(Request::WRITE, peer, 64)});
    EXPECT_EQ(adapter_->query_calls, 1);
    publishPeer("v1:10.0.0.2:14000",
                {mpcommBuffer(kPeerBuffer, kPeerBufferLength),
                 mpcommBuffer(0x90000, 0x1000)});
    // The descriptor cache has a TTL; drop it as its expiry would.
    ASSERT_TRUE(local_sm_->invalidateRemote(peer).ok());
    auto b = submit({request(Request::WRITE, peer, 64, 0x90000)});
    EXPECT_EQ(statusOf(b, 0).s, COMPLETED);
    EXPECT_EQ(adapter_->query_calls, 2);
    EXPECT_EQ(adapter_->connect_calls, 1);
    release(a);
    release(b);
}

// A peer this thread found ready is used without a resolution only while
// the descriptor's lease stands: whatever ends it (`end_lease`) sends the
// next submission back to the descriptor, even after a submission marked
// the peer ready (the second one here), and the peer's new registration
// epoch is read.
class MpcommReadyPeer : public MpcommDataPath {
 protected:
    void expectReResolvedAfter(
        const std::function<void(SegmentID)>& end_lease) {
        ASSERT_TRUE(install().ok());
        SegmentID peer = openPeer();
        auto a = submit({request(Request::WRITE, peer, 64)});
        auto b = submit({request(Request::WRITE, peer, 64)});
        EXPECT_EQ(statusOf(b, 0).s, COMPLETED);
        EXPECT_EQ(adapter_->query_calls, 1);
        publishPeer("v1:10.0.0.2:14000",
                    {mpcommBuffer(kPeerBuffer, kPeerBufferLength),
                     mpcommBuffer(0x90000, 0x1000)});
        end_lease(peer);
        auto c = submit({request(Request::WRITE, peer, 64, 0x90000)});
        EXPECT_EQ(statusOf(c, 0).s, COMPLETED);
        EXPECT_EQ(adapter_->query_calls, 2) << "the new epoch was not read";
        release(a);
        release(b);
        release(c);
    }
};

TEST_F(MpcommReadyPeer, IsReResolvedAfterAnInvalidation) {
    expectReResolvedAfter([&](SegmentID peer) {
        ASSERT_TRUE(local_sm_->invalidateRemote(peer).ok());
    });
}

TEST_F(MpcommReadyPeer, IsReResolvedWhenItsLeaseExpires) {
    constexpr auto kTtl = std::chrono::milliseconds(200);
    local_sm_ = std::make_shared<SegmentManager>(kLocal, fetcher_, kTtl);
    fetcher_->add(kLocal, local_sm_);
    local_cs_ = std::make_shared<ControlService>(local_sm_);
    expectReResolvedAfter([&](SegmentID) {
        // After the read: the lease ends by then at the latest. Time
        // passing is what is tested: nothing else ends the lease.
        const auto read_by = SegmentManager::cacheNow();
        ASSERT_TRUE(testing::waitUntil(
            [&] { return SegmentManager::cacheNow() > read_by + kTtl; }));
    });
}

TEST_F(MpcommDataPath, TheBufferListIsNeverReadOnlyTheEpochIs) {
    ASSERT_TRUE(install().ok());
    SegmentID peer = openPeer();
    auto a = submit({request(Request::WRITE, peer, 64)});
    // A list that changed without its epoch: nothing walks the list, so
    // nothing notices (the peer's engine never publishes such a list).
    std::vector<BufferDesc> many;
    for (uint64_t i = 0; i < 1024; ++i) {
        many.push_back(mpcommBuffer(0x100000 + i * 0x1000, 0x1000));
    }
    publishPeer("v1:10.0.0.2:14000", many, /*new_epoch=*/false);
    ASSERT_TRUE(local_sm_->invalidateRemote(peer).ok());
    auto b = submit({request(Request::WRITE, peer, 64)});
    EXPECT_EQ(adapter_->query_calls, 1);
    release(a);
    release(b);
}

TEST_F(MpcommDataPath, AQueryFailureFailsTheRequestAndTheNextOneQueriesOnly) {
    ASSERT_TRUE(install().ok());
    SegmentID peer = openPeer();
    adapter_->query_failures = 1;
    LogCapture logs;
    auto a = submit({request(Request::WRITE, peer, 64)});
    EXPECT_EQ(statusOf(a, 0).s, FAILED);
    EXPECT_EQ(adapter_->put_calls, 0);
    EXPECT_EQ(logs.count("MpcommTransport: Failed to query remote buffers "
                         "from " +
                         kPeer + ", error=-9"),
              1);
    MpcommPeerState state;
    ASSERT_TRUE(transport_->peers().stateOf(kPeer, state));
    EXPECT_EQ(state, MpcommPeerState::CONNECTED_NO_KEYS);
    auto b = submit({request(Request::WRITE, peer, 64)});
    EXPECT_EQ(statusOf(b, 0).s, COMPLETED);
    EXPECT_EQ(adapter_->connect_calls, 1);
    EXPECT_EQ(adapter_->query_calls, 2);
    release(a);
    release(b);
}

TEST_F(MpcommDataPath, RequestsBeyondCapacityAreRefusedAndNothingIsSubmitted) {
    ASSERT_TRUE(install().ok());
    SegmentID peer = openPeer();
    Transport::SubBatchRef batch = nullptr;
    ASSERT_TRUE(transport_->allocateSubBatch(batch, 2).ok());
    std::vector<Request> three(3, request(Request::WRITE, peer, 8));
    Status st = transport_->submitTransferTasks(batch, three);
    EXPECT_TRUE(st.IsTooManyRequests());
    EXPECT_EQ(st.message(),
              "MpcommTransport: sub-batch capacity is 2, 0 tasks submitted, "
              "3 more requested");
    EXPECT_EQ(batch->size(), 0u);
    EXPECT_EQ(adapter_->put_calls, 0);
    EXPECT_EQ(adapter_->connect_calls, 0);
    ASSERT_TRUE(
        transport_
            ->submitTransferTasks(batch, {request(Request::WRITE, peer, 8),
                                          request(Request::READ, peer, 8)})
            .ok());
    EXPECT_EQ(batch->size(), 2u);
    EXPECT_TRUE(
        transport_
            ->submitTransferTasks(batch, {request(Request::WRITE, peer, 8)})
            .IsTooManyRequests());
    EXPECT_EQ(batch->size(), 2u);
    release(batch);
}

TEST_F(MpcommDataPath, ARequestThatCannotBeIssuedFailsOnlyItsOwnTask) {
    ASSERT_TRUE(install().ok());
    SegmentID peer = openPeer();
    adapter_->issue_failures = 1;
    auto batch = submit({request(Request::WRITE, peer, 8),
                         request(Request::WRITE, peer, 8),
                         request(Request::READ, peer, 8)});
    EXPECT_EQ(statusOf(batch, 0).s, FAILED);
    EXPECT_EQ(statusOf(batch, 1).s, COMPLETED);
    EXPECT_EQ(statusOf(batch, 2).s, COMPLETED);
    release(batch);
}

TEST_F(MpcommDataPath, AnUnknownSegmentFailsOnlyTheRequestsAddressedToIt) {
    ASSERT_TRUE(install().ok());
    SegmentID peer = openPeer();
    auto batch = submit({request(Request::WRITE, peer, 8),
                         request(Request::WRITE, 999, 8),
                         request(Request::WRITE, peer, 8)});
    EXPECT_EQ(statusOf(batch, 0).s, COMPLETED);
    EXPECT_EQ(statusOf(batch, 1).s, FAILED);
    EXPECT_EQ(statusOf(batch, 2).s, COMPLETED);
    release(batch);
}

TEST_F(MpcommDataPath, CompletionIsPolledLazilyAndAShortSuccessIsFailed) {
    ASSERT_TRUE(install().ok());
    adapter_->auto_complete = false;
    SegmentID peer = openPeer();
    auto batch = submit({request(Request::WRITE, peer, 100),
                         request(Request::READ, peer, 100),
                         request(Request::READ, peer, 100)});
    EXPECT_EQ(adapter_->is_complete_calls, 0);
    EXPECT_EQ(statusOf(batch, 0).s, PENDING);
    auto t = adapter_->transfers();
    adapter_->complete(t[0].handle, true, 100);
    adapter_->complete(t[1].handle, true, 60);
    adapter_->complete(t[2].handle, false, 0, -7);
    TransferStatus s0 = statusOf(batch, 0);
    EXPECT_EQ(s0.s, COMPLETED);
    EXPECT_EQ(s0.transferred_bytes, 100u);
    EXPECT_EQ(statusOf(batch, 1).s, FAILED);
    EXPECT_EQ(statusOf(batch, 2).s, FAILED);
    for (const auto& transfer : t) {
        EXPECT_EQ(adapter_->releasesOf(transfer.handle), 1);
    }
    release(batch);
    EXPECT_EQ(adapter_->release_calls, 3);
    EXPECT_EQ(adapter_->misuse, 0);
}

// What the engine does between two batches of a slot: the sub-batch is
// emptied in place, the handles its tasks still hold are released, and
// its capacity is the one asked for; another capacity gets a fresh one.
TEST_F(MpcommDataPath, ARecycledSubBatchIsEmptiedInPlaceAndLetsGoOfItsHandles) {
    ASSERT_TRUE(install().ok());
    adapter_->auto_complete = false;
    SegmentID peer = openPeer();
    auto batch = submit(
        {request(Request::WRITE, peer, 8), request(Request::WRITE, peer, 8)},
        4);
    auto t = adapter_->transfers();
    ASSERT_EQ(t.size(), 2u);
    adapter_->complete(t[0].handle, true, 8);
    EXPECT_EQ(statusOf(batch, 0).s, COMPLETED);  // gives its handle up
    Transport::SubBatchRef before = batch;
    ASSERT_TRUE(transport_->recycleSubBatch(batch, 4).ok());
    EXPECT_EQ(batch, before);
    EXPECT_EQ(batch->size(), 0u);
    EXPECT_EQ(adapter_->releasesOf(t[0].handle), 1);
    EXPECT_EQ(adapter_->releasesOf(t[1].handle), 1);
    adapter_->auto_complete = true;
    std::vector<Request> four(4, request(Request::WRITE, peer, 8));
    ASSERT_TRUE(transport_->submitTransferTasks(batch, four).ok());
    EXPECT_EQ(statusOf(batch, 3).s, COMPLETED);
    EXPECT_TRUE(
        transport_->submitTransferTasks(batch, {four[0]}).IsTooManyRequests());
    ASSERT_TRUE(transport_->recycleSubBatch(batch, 8).ok());
    ASSERT_NE(batch, nullptr);
    EXPECT_EQ(batch->size(), 0u);
    std::vector<Request> eight(8, request(Request::WRITE, peer, 8));
    ASSERT_TRUE(transport_->submitTransferTasks(batch, eight).ok());
    EXPECT_EQ(statusOf(batch, 7).s, COMPLETED);
    release(batch);
    EXPECT_EQ(adapter_->misuse, 0);
}

TEST_F(MpcommDataPath, ATaskIdOutsideTheSubBatchIsRejected) {
    ASSERT_TRUE(install().ok());
    auto batch = submit({request(Request::WRITE, openPeer(), 8)});
    TransferStatus status;
    Status st = transport_->getTransferStatus(batch, 1, status);
    EXPECT_TRUE(st.IsInvalidArgument());
    EXPECT_EQ(st.message(),
              "MpcommTransport: task id 1 out of range (sub-batch holds 1 "
              "tasks)");
    EXPECT_TRUE(
        transport_->getTransferStatus(batch, -1, status).IsInvalidArgument());
    Request kept;
    st = transport_->getTaskRequest(batch, 1, kept);
    EXPECT_EQ(st.message(),
              "MpcommTransport: task id 1 out of range (sub-batch holds 1 "
              "tasks)");
    EXPECT_EQ(transport_->getTransferStatus(nullptr, 0, status).message(),
              "MpcommTransport: getTransferStatus got a null or foreign "
              "sub-batch");
    EXPECT_EQ(transport_->getTaskRequest(nullptr, 0, kept).message(),
              "MpcommTransport: getTaskRequest got a null or foreign "
              "sub-batch");
    release(batch);
}

// The engine's failover re-issues a failed task from the request the
// task kept, as it was submitted.
TEST_F(MpcommDataPath, ATasksRequestIsGivenBackAsSubmitted) {
    ASSERT_TRUE(install().ok());
    EXPECT_TRUE(transport_->keepsTaskRequests());
    const SegmentID peer = openPeer();
    Request first = request(Request::WRITE, peer, 8);
    Request second = request(Request::READ, peer, 16, kPeerBuffer + 64);
    second.transport_hint = MPCOMM;
    auto batch = submit({first, second});
    Request kept;
    ASSERT_TRUE(transport_->getTaskRequest(batch, 1, kept).ok());
    EXPECT_EQ(kept.opcode, Request::READ);
    EXPECT_EQ(kept.source, second.source);
    EXPECT_EQ(kept.target_id, peer);
    EXPECT_EQ(kept.target_offset, second.target_offset);
    EXPECT_EQ(kept.length, 16u);
    EXPECT_EQ(kept.transport_hint, MPCOMM);
    ASSERT_TRUE(transport_->getTaskRequest(batch, 0, kept).ok());
    EXPECT_EQ(kept.opcode, Request::WRITE);
    EXPECT_EQ(kept.length, 8u);
    release(batch);
}

TEST_F(MpcommDataPath, TwoThreadsPollingTheSameTasksReleaseEachHandleOnce) {
    ASSERT_TRUE(install().ok());
    adapter_->auto_complete = false;
    SegmentID peer = openPeer();
    constexpr int kTasks = 64;
    std::vector<Request> requests(kTasks, request(Request::WRITE, peer, 8));
    auto batch = submit(requests, kTasks);
    std::atomic<bool> go{false};
    auto poller = [&] {
        while (!go.load()) std::this_thread::yield();
        bool all_done = false;
        while (!all_done) {
            all_done = true;
            for (int i = 0; i < kTasks; ++i) {
                all_done &= statusOf(batch, i).s == COMPLETED;
            }
        }
    };
    std::thread a(poller), b(poller);
    go = true;
    for (const auto& transfer : adapter_->transfers()) {
        adapter_->complete(transfer.handle, true, 8);
    }
    a.join();
    b.join();
    for (const auto& transfer : adapter_->transfers()) {
        EXPECT_EQ(adapter_->releasesOf(transfer.handle), 1);
    }
    EXPECT_EQ(adapter_->release_calls, kTasks);
    EXPECT_EQ(adapter_->result_calls, kTasks);
    EXPECT_EQ(adapter_->misuse, 0);
    release(batch);
}

TEST_F(MpcommDataPath, FreeingASubBatchReleasesTransfersStillInFlight) {
    ASSERT_TRUE(install().ok());
    adapter_->auto_complete = false;
    auto batch = submit({request(Request::WRITE, openPeer(), 8)});
    auto handle = adapter_->transfers()[0].handle;
    release(batch);
    EXPECT_EQ(adapter_->releasesOf(handle), 1);
}

TEST_F(MpcommDataPath, AFreedSubBatchComesBackEmptyForTheSameCapacity) {
    // The thread keeps what it freed for its next allocation of the same
    // capacity (no allocation per batch); what it hands out again must be
    // indistinguishable from a new one.
    ASSERT_TRUE(install().ok());
    SegmentID peer = openPeer();
    auto first = submit(
        {request(Request::WRITE, peer, 8), request(Request::READ, peer, 16),
         request(Request::WRITE, peer, 24)},
        4);
    EXPECT_EQ(statusOf(first, 2).s, COMPLETED);
    Transport::SubBatch* kept = first;
    release(first);
    Transport::SubBatchRef other = nullptr;
    ASSERT_TRUE(transport_->allocateSubBatch(other, 5).ok());
    EXPECT_NE(other, kept) << "only the same capacity is reused";
    Transport::SubBatchRef again = nullptr;
    ASSERT_TRUE(transport_->allocateSubBatch(again, 4).ok());
    ASSERT_EQ(again, kept);
    EXPECT_EQ(again->size(), 0u);
    TransferStatus status;
    EXPECT_EQ(transport_->getTransferStatus(again, 0, status).message(),
              "MpcommTransport: task id 0 out of range (sub-batch holds 0 "
              "tasks)");
    // Its whole capacity is there again, and no more.
    adapter_->auto_complete = false;
    std::vector<Request> four(4, request(Request::READ, peer, 32));
    ASSERT_TRUE(transport_->submitTransferTasks(again, four).ok());
    EXPECT_TRUE(
        transport_->submitTransferTasks(again, {four[0]}).IsTooManyRequests());
    for (int i = 0; i < 4; ++i) EXPECT_EQ(statusOf(again, i).s, PENDING);
    auto t = adapter_->transfers();
    ASSERT_EQ(t.size(), 7u);
    release(again);
    release(other);
    // The reused sub-batch released its own four transfers, once each,
    // and never the first batch's again.
    for (const auto& transfer : t) {
        EXPECT_EQ(adapter_->releasesOf(transfer.handle), 1);
    }
    EXPECT_EQ(adapter_->misuse, 0);
}

TEST_F(MpcommDataPath, AFreedSubBatchServesTheNextInstallation) {
    ASSERT_TRUE(install().ok());
    SegmentID peer = openPeer();
    auto batch = submit({request(Request::WRITE, peer, 8)}, 2);
    Transport::SubBatch* kept = batch;
    release(batch);
    ASSERT_TRUE(transport_->uninstall().ok());
    ASSERT_TRUE(install().ok());
    // Handed out under the new installation: submissions are accepted.
    auto again = submit({request(Request::WRITE, openPeer(), 8)}, 2);
    ASSERT_EQ(again, kept);
    EXPECT_EQ(statusOf(again, 0).s, COMPLETED);
    release(again);
    EXPECT_EQ(adapter_->misuse, 0);
}

TEST_F(MpcommDataPath,
       AfterUninstallPendingTasksReadFailedWithoutTouchingTheAdapter) {
    ASSERT_TRUE(install().ok());
    adapter_->auto_complete = false;
    SegmentID peer = openPeer();
    auto batch = submit({request(Request::WRITE, peer, 8),
                         request(Request::READ, peer, 8),
                         request(Request::WRITE, peer, 8)});
    auto t = adapter_->transfers();
    adapter_->complete(t[0].handle, true, 8);
    EXPECT_EQ(statusOf(batch, 0).s, COMPLETED);
    ASSERT_TRUE(transport_->uninstall().ok());
    int polls = adapter_->is_complete_calls;
    EXPECT_EQ(statusOf(batch, 0).s, COMPLETED) << "a final status stays";
    EXPECT_EQ(statusOf(batch, 1).s, FAILED);
    EXPECT_EQ(statusOf(batch, 2).s, FAILED);
    EXPECT_EQ(adapter_->is_complete_calls, polls);
    EXPECT_EQ(adapter_->releasesOf(t[1].handle), 0);
    EXPECT_EQ(adapter_->releasesOf(t[2].handle), 0);
    release(batch);
    EXPECT_EQ(adapter_->release_calls, 1);
    EXPECT_EQ(adapter_->misuse, 0);
    EXPECT_EQ(transport_->peers().size(), 0u);
    // Nothing new is accepted.
    Transport::SubBatchRef again = nullptr;
    ASSERT_TRUE(transport_->allocateSubBatch(again, 1).ok());
    EXPECT_EQ(
        transport_
            ->submitTransferTasks(again, {request(Request::WRITE, peer, 8)})
            .message(),
        "MpcommTransport: not installed; cannot submit transfers");
    release(again);
}

// Pollers keep polling while uninstall() runs: none reaches the adapter
// after shutdown(), and every task ends FAILED.
TEST_F(MpcommDataPath, UninstallWithTransfersInFlightAndPollersRunning) {
    ASSERT_TRUE(install().ok());
    adapter_->auto_complete = false;
    SegmentID peer = openPeer();
    constexpr int kTasks = 32;
    std::vector<Request> requests(kTasks, request(Request::READ, peer, 8));
    auto batch = submit(requests, kTasks);
    std::atomic<int> started{0};
    auto poller = [&] {
        ++started;
        bool all_failed = false;
        while (!all_failed) {
            all_failed = true;
            for (int i = 0; i < kTasks; ++i) {
                all_failed &= statusOf(batch, i).s == FAILED;
            }
        }
    };
    std::thread a(poller), b(poller);
    ASSERT_TRUE(testing::waitUntil([&] {
        return started.load() == 2 && adapter_->is_complete_calls > 2 * kTasks;
    }));
    ASSERT_TRUE(transport_->uninstall().ok());
    a.join();
    b.join();
    EXPECT_EQ(adapter_->shutdown_calls, 1);
    EXPECT_EQ(adapter_->misuse, 0);
    EXPECT_EQ(adapter_->release_calls, 0);
    release(batch);
    EXPECT_EQ(adapter_->release_calls, 0);
}

TEST_F(MpcommDataPath, TheLocalSegmentIsReachedThroughItsOwnEndpoint) {
    ASSERT_TRUE(install().ok());
    auto batch = submit({request(Request::WRITE, LOCAL_SEGMENT_ID, 8)});
    EXPECT_EQ(statusOf(batch, 0).s, COMPLETED);
    ASSERT_EQ(adapter_->connects().size(), 1u);
    EXPECT_EQ(adapter_->connects()[0].host_id, kLocal);
    EXPECT_EQ(adapter_->connects()[0].addr, "10.0.0.1");
    EXPECT_EQ(adapter_->connects()[0].port, 13579);
    release(batch);
}

}  // namespace
}  // namespace mooncake::tent
