// tent_mpcomm_fault_test (USE_MPCOMM=ON): FaultyMpcommAdapter over the
// real provider adapter (libmpcomm, or softmpcomm in CI), the eight faults
// through MpcommTransport against their recovery rules
// (mpcomm/mpcomm_fault_cases.h). The peer is a second provider instance in
// this process, so every transfer crosses the provider's real handshake and
// data connections and lands in real memory.
#include <gtest/gtest.h>
#include <unistd.h>

#include "mpcomm_fault_cases.h"
#include "net/socket_io.h"

namespace mooncake::tent {
namespace {

using testing::freeTcpPort;
using testing::MpcommFaultFixture;

class MpcommFaultsOverProvider : public MpcommFaultFixture {
 protected:
    std::shared_ptr<MpcommAdapter> makeProvider() override {
        return createDefaultMpcommAdapter();
    }
    void startPeer() override {
        target_ = createDefaultMpcommAdapter();
        int port = freeTcpPort();
        ASSERT_GT(port, 0);
        Status st = target_->init(kPeer, "", port);
        ASSERT_TRUE(st.ok()) << st;
        ASSERT_TRUE(target_->startAcceptThread().ok());
        ASSERT_TRUE(
            target_->registerMemory(peer_mem_.data(), peer_mem_.size()).ok());
        ASSERT_TRUE(
            target_->publishBuffer(peer_mem_.data(), peer_mem_.size(), -1)
                .ok());
        peer_endpoint_ = "127.0.0.1:" + std::to_string(target_->tcpPort());
        publishPeer("v1:" + peer_endpoint_,
                    {mpcommBuffer(peerAddr(), peer_mem_.size())});
    }
    int prepareLocalPort() override {
        int port = freeTcpPort();
        // Restored first: a second ScopedEnv saves the value it replaces.
        local_port_env_.reset();
        local_port_env_ = std::make_unique<testing::ScopedEnv>(
            "MPCOMM_TCP_PORT", std::to_string(port));
        return port;
    }
    void TearDown() override {
        MpcommFaultFixture::TearDown();  // the initiator first
        if (target_) target_->shutdown();
        local_port_env_.reset();
    }

    std::shared_ptr<MpcommAdapter> target_;
    std::unique_ptr<testing::ScopedEnv> local_port_env_;
};

TEST_F(MpcommFaultsOverProvider, InstallFailureIsReturnedUnwoundAndRetryable) {
    checkInstallFailure();
}

TEST_F(MpcommFaultsOverProvider, AcceptFailureIsReturnedUnwoundAndRetryable) {
    checkAcceptFailure();
}

TEST_F(MpcommFaultsOverProvider, ConnectFailingThreeTimesConnectsOnTheFourth) {
    checkConnectFailures(3);
}

TEST_F(MpcommFaultsOverProvider,
       QueryFailingTwiceQueriesOnlyOverOneConnection) {
    checkQueryFailures(2);
}

TEST_F(MpcommFaultsOverProvider, RefusedIssuesFailOnlyTheirTasks) {
    checkIssueRefusal();
}

TEST_F(MpcommFaultsOverProvider, ATransferErrorFailsItAndTheNextUseRecovers) {
    checkTransferError();
}

TEST_F(MpcommFaultsOverProvider, AShortTransferFailsWithOnlyItsPrefixMoved) {
    checkShortTransfer();
}

TEST_F(MpcommFaultsOverProvider, ADeadPeerFailsUntilItRestartsThenReconnects) {
    checkPeerDeathAndRestart();
}

TEST_F(MpcommFaultsOverProvider, ADeadPeersHandshakeFailsAfterAReinstall) {
    checkPeerDeathAcrossReinstall();
}

}  // namespace
}  // namespace mooncake::tent
