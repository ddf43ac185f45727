// FaultyMpcommAdapter over the mock: the eight provider faults through
// MpcommTransport, each against its recovery rule (mpcomm_fault_cases.h),
// plus what only the mock can show: a dead peer fails only its own tasks
// while another peer of the same batch carries on, and the wrapper's own
// handle bookkeeping.
#include <gtest/gtest.h>

#include "mpcomm_fault_cases.h"

namespace mooncake::tent {
namespace {

using testing::FaultyMpcommAdapter;
using testing::MockMpcommAdapter;
using testing::MpcommFaultFixture;

class MpcommFaultsOverMock : public MpcommFaultFixture {
 protected:
    std::shared_ptr<MpcommAdapter> makeProvider() override {
        adapter_->move_bytes = true;
        return adapter_;
    }
    void startPeer() override {
        peer_endpoint_ = "10.0.0.2:14000";
        publishPeer("v1:" + peer_endpoint_,
                    {mpcommBuffer(peerAddr(), peer_mem_.size())});
    }
    int prepareLocalPort() override { return 13579; }  // the default
};

TEST_F(MpcommFaultsOverMock, InstallFailureIsReturnedUnwoundAndRetryable) {
    checkInstallFailure();
    EXPECT_EQ(adapter_->init_calls, 1);
    EXPECT_EQ(adapter_->misuse, 0);
}

TEST_F(MpcommFaultsOverMock, AcceptFailureIsReturnedUnwoundAndRetryable) {
    checkAcceptFailure();
    EXPECT_EQ(adapter_->start_accept_calls, 1);
    EXPECT_EQ(adapter_->stop_accept_calls, 0);
}

TEST_F(MpcommFaultsOverMock, ConnectFailingThreeTimesConnectsOnTheFourth) {
    checkConnectFailures(3);
    EXPECT_EQ(adapter_->connectCallsTo(kPeer), 1);
}

TEST_F(MpcommFaultsOverMock, ConnectFailingOnceConnectsOnTheSecond) {
    checkConnectFailures(1);
}

TEST_F(MpcommFaultsOverMock, QueryFailingTwiceQueriesOnlyOverOneConnection) {
    checkQueryFailures(2);
    EXPECT_EQ(adapter_->connectCallsTo(kPeer), 1);
    EXPECT_EQ(adapter_->queryCallsTo(kPeer), 1);
}

TEST_F(MpcommFaultsOverMock, RefusedIssuesFailOnlyTheirTasks) {
    checkIssueRefusal();
    EXPECT_EQ(adapter_->handlesNotReleasedOnce(), 0);
}

TEST_F(MpcommFaultsOverMock, ATransferErrorFailsItAndTheNextUseRecovers) {
    checkTransferError();
    EXPECT_EQ(adapter_->handlesNotReleasedOnce(), 0);
    EXPECT_EQ(adapter_->misuse, 0);
}

TEST_F(MpcommFaultsOverMock, AShortTransferFailsWithOnlyItsPrefixMoved) {
    checkShortTransfer();
    auto transfers = adapter_->transfers();
    ASSERT_GE(transfers.size(), 2u);
    // What the provider was asked to move.
    EXPECT_EQ(transfers[0].length, kLength - faulty_->short_by);
    EXPECT_EQ(transfers[1].length, kLength - faulty_->short_by);
    EXPECT_EQ(adapter_->handlesNotReleasedOnce(), 0);
}

TEST_F(MpcommFaultsOverMock, ADeadPeerFailsUntilItRestartsThenReconnects) {
    checkPeerDeathAndRestart();
    EXPECT_EQ(adapter_->connectCallsTo(kPeer), 2);
    EXPECT_EQ(adapter_->handlesNotReleasedOnce(), 0);
    EXPECT_EQ(adapter_->misuse, 0);
}

TEST_F(MpcommFaultsOverMock, ADeadPeersHandshakeFailsAfterAReinstall) {
    checkPeerDeathAcrossReinstall();
    EXPECT_EQ(adapter_->misuse, 0);
}

// Only the dead peer's tasks fail; the other peer of the same batches keeps
// completing and is never reconnected.
TEST_F(MpcommFaultsOverMock, ADeadPeerFailsOnlyItsOwnTasks) {
    std::vector<char> peer2_mem(kLength, 0);
    publishOn(*peer2_sm_, "v1:10.0.0.3:14001",
              {mpcommBuffer(reinterpret_cast<uint64_t>(peer2_mem.data()),
                            peer2_mem.size())});
    SegmentID peer2 = openSegment(kPeer2);
    ASSERT_NO_FATAL_FAILURE(installAndRegister());
    expectRoundTrip(19);  // connected first: death is not a failed connect
    faulty_->killPeer(kPeer);
    for (int round = 0; round < 3; ++round) {
        std::vector<char> bytes = pattern(kLength, 20 + round);
        std::memcpy(local_data_, bytes.data(), kLength);
        Request other = request(Request::WRITE, peer2, kLength,
                                reinterpret_cast<uint64_t>(peer2_mem.data()));
        auto batch = submit({to(Request::WRITE, 0), other});
        EXPECT_EQ(finalStatus(batch, 0).s, FAILED);
        EXPECT_EQ(finalStatus(batch, 1).s, COMPLETED);
        EXPECT_EQ(std::memcmp(peer2_mem.data(), bytes.data(), kLength), 0);
        EXPECT_TRUE(peerIs(0, std::vector<char>(kLength, 0)));
        release(batch);
    }
    // Neither peer was connected again.
    EXPECT_EQ(faulty_->connect_calls, 2);
    EXPECT_EQ(adapter_->connectCallsTo(kPeer), 1);
    EXPECT_EQ(adapter_->connectCallsTo(kPeer2), 1);
    EXPECT_EQ(faulty_->handlesNotReleasedOnce(), 0);
}

// The wrapper's bookkeeping itself: handles it never issued, double
// releases and results read before completion are misuse; a scripted
// budget is consumed exactly.
TEST(FaultyMpcommAdapterItself, CountsMisuseAndConsumesBudgetsExactly) {
    auto mock = std::make_shared<MockMpcommAdapter>();
    mock->auto_complete = false;
    FaultyMpcommAdapter faulty(mock);
    ASSERT_TRUE(faulty.init("h", "", 13579).ok());
    faulty.connect_failures = 2;
    EXPECT_FALSE(faulty.connect("p", "10.0.0.2", 1).ok());
    EXPECT_FALSE(faulty.connect("p", "10.0.0.2", 1).ok());
    EXPECT_TRUE(faulty.connect("p", "10.0.0.2", 1).ok());
    EXPECT_EQ(faulty.injected, 2);
    EXPECT_EQ(mock->connect_calls, 1);

    MpcommTransferHandle handle = faulty.putAsync(0x1000, "p", 0x2000, 8);
    ASSERT_NE(handle, kInvalidMpcommTransferHandle);
    faulty.getTransferResult(handle);  // before isTransferComplete()
    EXPECT_EQ(faulty.misuse, 1);
    EXPECT_FALSE(faulty.isTransferComplete(handle));
    faulty.releaseTransfer(handle);  // allowed while in flight
    faulty.releaseTransfer(handle);
    EXPECT_EQ(faulty.misuse, 2);
    faulty.releaseTransfer(handle + 100);
    EXPECT_EQ(faulty.misuse, 3);
    EXPECT_EQ(faulty.releasesOf(handle), 2);
    EXPECT_EQ(faulty.handlesNotReleasedOnce(), 1);
    EXPECT_EQ(mock->releasesOf(mock->transfers().back().handle), 1);
    faulty.releaseTransfer(kInvalidMpcommTransferHandle);  // a no-op
    EXPECT_EQ(faulty.misuse, 3);
    faulty.shutdown();
}

}  // namespace
}  // namespace mooncake::tent
