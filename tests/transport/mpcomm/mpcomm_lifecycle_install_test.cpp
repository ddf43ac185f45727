// The rest of the lifecycle rules through MpcommTransport over the mock
// adapter: re-install after uninstall, pre-connect on warmupSegment(), byte
// counts, the advertise address and connect_timeout_ms validation. The load
// run is in mpcomm_load_test.cpp.
#include <gtest/gtest.h>

#include <vector>

#include "kit/wait_until.h"
#include "mpcomm_lifecycle_fixture.h"
#include "tent/transport/mpcomm/mpcomm_transport.h"

namespace mooncake::tent {
namespace {

using testing::attrOf;
using testing::LogCapture;
using testing::MockMpcommAdapter;
using testing::MpcommLifecycleFixture;
using testing::ScopedEnv;
using testing::waitUntil;

using MpcommLifecycleInstall = MpcommLifecycleFixture;

constexpr char kTimeoutKey[] = "transports/mpcomm/connect_timeout_ms";
constexpr char kAdvertiseKey[] = "transports/mpcomm/advertise_address";

// A rejected advertise address and the reason the parser gives for it.
struct BadAddress {
    std::string value;
    std::string why;
};

const std::vector<BadAddress> kBadAddresses = {
    {"10.0.0.1:80", "a port is not allowed; the port is MPCOMM_TCP_PORT"},
    {"[fe80::1]", "IPv6 literals are not supported, only IPv4"},
    {"", "empty, expected an IPv4 address or host"},
    {"bad host", "bad character in host"},
};

// --- re-install ------------------------------------------------------------

TEST_F(MpcommLifecycleInstall, InstallUninstallInstallCarriesTransfersAgain) {
    ASSERT_TRUE(install().ok());
    SegmentID peer = openPeer();
    auto first = submit({request(Request::WRITE, peer, 8)});
    EXPECT_EQ(statusOf(first, 0).s, COMPLETED);
    release(first);
    ASSERT_TRUE(transport_->uninstall().ok());
    EXPECT_EQ(attrOf(*local_sm_->getLocal(), MPCOMM), "");
    ASSERT_TRUE(install().ok());
    EXPECT_EQ(attrOf(*local_sm_->getLocal(), MPCOMM), "v1:10.0.0.1:13579");
    auto second = submit({request(Request::READ, peer, 8)});
    EXPECT_EQ(statusOf(second, 0).s, COMPLETED);
    EXPECT_EQ(adapter_->init_calls, 2);
    EXPECT_EQ(adapter_->shutdown_calls, 1);
    // The fresh provider instance knows no peer: it connects again.
    EXPECT_EQ(adapter_->connectCallsTo(kPeer), 2);
    EXPECT_EQ(adapter_->misuse, 0);
    release(second);
}

TEST_F(MpcommLifecycleInstall,
       ASubBatchOfTheLastInstallationNeverReachesTheNew) {
    ASSERT_TRUE(install().ok());
    SegmentID peer = openPeer();
    adapter_->auto_complete = false;
    auto old = submit({request(Request::WRITE, peer, 8)});
    ASSERT_TRUE(transport_->uninstall().ok());
    ASSERT_TRUE(install().ok());
    Status st = transport_->submitTransferTasks(
        old, {request(Request::WRITE, peer, 8)});
    EXPECT_TRUE(st.IsInvalidArgument());
    EXPECT_EQ(st.message(),
              "MpcommTransport: sub-batch was allocated before the transport "
              "was installed; allocate a new one");
    // Its handle belongs to the shut-down instance.
    EXPECT_EQ(statusOf(old, 0).s, FAILED);
    release(old);
    EXPECT_EQ(adapter_->is_complete_calls, 0);
    EXPECT_EQ(adapter_->release_calls, 0);
    EXPECT_EQ(adapter_->misuse, 0);
}

TEST(MockMpcommAdapterLifecycle, ASecondInitWithoutShutdownIsRefused) {
    MockMpcommAdapter mock;
    ASSERT_TRUE(mock.init("10.0.0.1:12345", "mlx5_0", 13579).ok());
    Status again = mock.init("10.0.0.1:12345", "mlx5_1", 13580);
    EXPECT_TRUE(again.IsInvalidArgument());
    EXPECT_EQ(again.message(),
              "MPComm init called twice for host 10.0.0.1:12345");
    // Refused without changing anything.
    EXPECT_EQ(mock.initDevices(), "mlx5_0");
    EXPECT_EQ(mock.initPort(), 13579);
    mock.shutdown();
    EXPECT_TRUE(mock.init("10.0.0.1:12345", "mlx5_1", 13580).ok());
    EXPECT_EQ(mock.initPort(), 13580);
    EXPECT_EQ(mock.init_calls, 3);
}

TEST(MockMpcommAdapterLifecycle, HandlesFromBeforeAReinitAreMisuse) {
    MockMpcommAdapter mock;
    ASSERT_TRUE(mock.init("h", "", 13579).ok());
    MpcommTransferHandle old = mock.putAsync(0x1000, "p", 0x2000, 8);
    mock.shutdown();
    ASSERT_TRUE(mock.init("h", "", 13579).ok());
    EXPECT_EQ(mock.misuse, 0);
    EXPECT_FALSE(mock.isTransferComplete(old));
    EXPECT_EQ(mock.misuse, 1);
    mock.getTransferResult(old);
    EXPECT_EQ(mock.misuse, 2);
    mock.releaseTransfer(old);
    EXPECT_EQ(mock.misuse, 3);
    // A handle of the new instance is fine.
    MpcommTransferHandle fresh = mock.getAsync(0x1000, "p", 0x2000, 8);
    EXPECT_TRUE(mock.isTransferComplete(fresh));
    mock.releaseTransfer(fresh);
    EXPECT_EQ(mock.releasesOf(fresh), 1);
    EXPECT_EQ(mock.misuse, 3);
}

// --- pre-connect -----------------------------------------------------------

TEST_F(MpcommLifecycleInstall, WarmupStartsTheHandshakeInTheBackground) {
    ASSERT_TRUE(install().ok());
    SegmentID peer = openPeer();
    adapter_->hold(kPeer);
    // Returns while the handshake it started is still held.
    EXPECT_TRUE(returnsPromptly([&] { transport_->warmupSegment(peer); }));
    ASSERT_TRUE(
        waitUntil([&] { return adapter_->connectCallsTo(kPeer) == 1; }));
    EXPECT_TRUE(stateIs(kPeer, MpcommPeerState::CONNECTING));
    adapter_->release(kPeer);
    ASSERT_TRUE(
        waitUntil([&] { return stateIs(kPeer, MpcommPeerState::READY); }));
    EXPECT_EQ(adapter_->put_calls + adapter_->get_calls, 0);
    // Warming a ready peer again starts nothing.
    transport_->warmupSegment(peer);
    EXPECT_EQ(transport_->peers().flightsRunning(), 0u);
    auto batch = submit({request(Request::WRITE, peer, 8)});
    EXPECT_EQ(statusOf(batch, 0).s, COMPLETED);
    EXPECT_EQ(adapter_->connectCallsTo(kPeer), 1);
    EXPECT_EQ(adapter_->queryCallsTo(kPeer), 1);
    release(batch);
}

TEST_F(MpcommLifecycleInstall, PreconnectFalseLeavesTheHandshakeToATransfer) {
    conf_->set("transports/mpcomm/preconnect", false);
    ASSERT_TRUE(install().ok());
    SegmentID peer = openPeer();
    transport_->warmupSegment(peer);
    // poll() creates the registry entry synchronously: none means none.
    EXPECT_EQ(transport_->peers().size(), 0u);
    EXPECT_EQ(transport_->peers().flightsRunning(), 0u);
    EXPECT_EQ(adapter_->connect_calls, 0);
    auto batch = submit({request(Request::WRITE, peer, 8)});
    EXPECT_EQ(statusOf(batch, 0).s, COMPLETED);
    EXPECT_EQ(adapter_->connect_calls, 1);
    release(batch);
}

TEST_F(MpcommLifecycleInstall, APeerWithoutAnEndpointIsNotPreconnected) {
    publishPeer("", {mpcommBuffer(kPeerBuffer, kPeerBufferLength)});
    // Enough for a transfer to reach it, but only a guess.
    ScopedEnv remote("MPCOMM_REMOTE_TCP_PORT", "15001");
    ASSERT_TRUE(install().ok());
    SegmentID peer = openPeer();
    transport_->warmupSegment(peer);
    EXPECT_EQ(transport_->peers().size(), 0u);
    EXPECT_EQ(adapter_->connect_calls, 0);
    auto batch = submit({request(Request::WRITE, peer, 8)});
    EXPECT_EQ(statusOf(batch, 0).s, COMPLETED);
    ASSERT_EQ(adapter_->connects().size(), 1u);
    EXPECT_EQ(adapter_->connects()[0].port, 15001);
    release(batch);
}

TEST_F(MpcommLifecycleInstall, WarmupBeforeInstallTouchesNothing) {
    transport_->warmupSegment(openPeer());
    EXPECT_EQ(transport_->peers().size(), 0u);
    EXPECT_EQ(adapter_->connect_calls, 0);
}

// --- byte counts -----------------------------------------------------------

TEST_F(MpcommLifecycleInstall,
       ACountAtOrAboveTheLengthCompletesAShortOneFails) {
    LogCapture logs;
    ASSERT_TRUE(install().ok());
    adapter_->auto_complete = false;
    SegmentID peer = openPeer();
    auto batch = submit({request(Request::WRITE, peer, 100),
                         request(Request::READ, peer, 100),
                         request(Request::WRITE, peer, 100)});
    auto t = adapter_->transfers();
    ASSERT_EQ(t.size(), 3u);
    adapter_->complete(t[0].handle, true, 150);  // bytes posted, not moved
    adapter_->complete(t[1].handle, true, 100);
    adapter_->complete(t[2].handle, true, 60);
    TransferStatus over = statusOf(batch, 0);
    TransferStatus exact = statusOf(batch, 1);
    TransferStatus short_count = statusOf(batch, 2);
    EXPECT_EQ(over.s, COMPLETED);
    EXPECT_EQ(over.transferred_bytes, 100u);
    EXPECT_EQ(exact.s, COMPLETED);
    EXPECT_EQ(exact.transferred_bytes, 100u);
    EXPECT_EQ(short_count.s, FAILED);
    EXPECT_EQ(short_count.transferred_bytes, 60u);
    EXPECT_EQ(logs.count("MpcommTransport: WRITE reported success after 60 "
                         "of 100 bytes; marking it FAILED"),
              1);
    EXPECT_EQ(logs.countContaining("reported success after"), 1);
    for (const auto& transfer : t) {
        EXPECT_EQ(adapter_->releasesOf(transfer.handle), 1);
    }
    release(batch);
    EXPECT_EQ(adapter_->misuse, 0);
}

// --- advertise address -----------------------------------------------------

TEST_F(MpcommLifecycleInstall, TheAdvertiseVariableWinsOverTheConfigKey) {
    ScopedEnv advertise("MPCOMM_ADVERTISE_ADDR", "192.168.7.1");
    conf_->set(kAdvertiseKey, "192.168.7.2");
    LogCapture logs;
    ASSERT_TRUE(install().ok());
    EXPECT_EQ(attrOf(*local_sm_->getLocal(), MPCOMM), "v1:192.168.7.1:13579");
    // What a peer reads.
    SegmentID self = 0;
    ASSERT_TRUE(peer_sm_->openRemote(self, kLocal).ok());
    SegmentDescRef desc;
    ASSERT_TRUE(peer_sm_->getRemote(desc, self).ok());
    EXPECT_EQ(attrOf(*desc, MPCOMM), "v1:192.168.7.1:13579");
    // The MPComm identity stays the segment name.
    EXPECT_EQ(adapter_->initHost(), kLocal);
    EXPECT_EQ(logs.count("MpcommTransport: advertising v1:192.168.7.1:13579 "
                         "(advertise address 192.168.7.1)"),
              1);
}

TEST_F(MpcommLifecycleInstall, TheConfigKeyIsAdvertisedWithTheBoundPort) {
    conf_->set(kAdvertiseKey, "node7.cluster");
    adapter_->port_override = 14009;
    ASSERT_TRUE(install().ok());
    EXPECT_EQ(attrOf(*local_sm_->getLocal(), MPCOMM), "v1:node7.cluster:14009");
}

TEST_F(MpcommLifecycleInstall, ABadAdvertiseVariableFailsInstallNamingIt) {
    for (const auto& bad : kBadAddresses) {
        ScopedEnv advertise("MPCOMM_ADVERTISE_ADDR", bad.value);
        Status st = install();
        EXPECT_TRUE(st.IsInvalidArgument()) << bad.value;
        EXPECT_EQ(st.message(),
                  "MPCOMM_ADVERTISE_ADDR: invalid MPComm advertise address '" +
                      bad.value + "': " + bad.why);
    }
    EXPECT_EQ(adapter_->init_calls, 0);
    EXPECT_EQ(attrOf(*local_sm_->getLocal(), MPCOMM), "");
}

TEST_F(MpcommLifecycleInstall, ABadAdvertiseKeyFailsInstallNamingIt) {
    for (const auto& bad : kBadAddresses) {
        conf_->set(kAdvertiseKey, bad.value);
        Status st = install();
        EXPECT_TRUE(st.IsInvalidArgument()) << bad.value;
        EXPECT_EQ(st.message(), std::string(kAdvertiseKey) +
                                    ": invalid MPComm advertise address '" +
                                    bad.value + "': " + bad.why);
    }
    EXPECT_EQ(adapter_->init_calls, 0);
    EXPECT_EQ(attrOf(*local_sm_->getLocal(), MPCOMM), "");
}

// --- connect_timeout_ms ----------------------------------------------------

TEST_F(MpcommLifecycleInstall,
       ABadConnectTimeoutFailsInstallNamingKeyAndValue) {
    const std::string range =
        std::string(kTimeoutKey) + " must be in 1..3600000 ms, got ";
    conf_->set(kTimeoutKey, "abc");
    Status text = install();
    EXPECT_TRUE(text.IsInvalidArgument());
    EXPECT_EQ(text.message(),
              std::string(kTimeoutKey) +
                  " must be an integer number of milliseconds in 1..3600000, "
                  "got 'abc'");
    for (int64_t bad : {int64_t{0}, int64_t{-5}, int64_t{3600001}}) {
        conf_->set(kTimeoutKey, bad);
        Status st = install();
        EXPECT_TRUE(st.IsInvalidArgument()) << bad;
        EXPECT_EQ(st.message(), range + std::to_string(bad));
    }
    EXPECT_EQ(adapter_->init_calls, 0);
}

TEST_F(MpcommLifecycleInstall, TheConnectTimeoutDefaultsToTenSeconds) {
    MpcommTransportEnv env;
    MpcommTransportSettings settings;
    ASSERT_TRUE(
        MpcommTransportSettings::fromConfig(conf_.get(), env, settings).ok());
    EXPECT_EQ(settings.connect_timeout_ms, 10000);
    ASSERT_TRUE(
        MpcommTransportSettings::fromConfig(nullptr, env, settings).ok());
    EXPECT_EQ(settings.connect_timeout_ms, 10000);
    // Both ends of the range are accepted.
    for (int64_t good : {int64_t{1}, int64_t{3600000}}) {
        conf_->set(kTimeoutKey, good);
        ASSERT_TRUE(
            MpcommTransportSettings::fromConfig(conf_.get(), env, settings)
                .ok());
        EXPECT_EQ(settings.connect_timeout_ms, good);
    }
    ASSERT_TRUE(install().ok());
}

}  // namespace
}  // namespace mooncake::tent
