// install()/uninstall(), the environment, capabilities and registration,
// through a real SegmentManager.
#include <gtest/gtest.h>

#include "mpcomm_transport_fixture.h"

namespace mooncake::tent {
namespace {

using testing::attrOf;
using testing::LogCapture;
using testing::MpcommTransportFixture;
using testing::ScopedEnv;
using testing::TempFile;

class MpcommInstall : public MpcommTransportFixture {
 protected:
    // install() returned `st` with `message` after init() was called: the
    // provider was shut down once and nothing is advertised.
    void expectUnwound(const Status& st, const std::string& message) {
        EXPECT_EQ(st.message(), message);
        EXPECT_EQ(adapter_->shutdown_calls, 1);
        EXPECT_EQ(attrOf(*local_sm_->getLocal(), MPCOMM), "");
    }
};

std::string peerViewOfAttr(SegmentManager& peer, const std::string& name) {
    SegmentID id = 0;
    EXPECT_TRUE(peer.openRemote(id, name).ok());
    SegmentDescRef desc;
    EXPECT_TRUE(peer.getRemote(desc, id).ok());
    std::string attr = desc ? attrOf(*desc, MPCOMM) : "";
    peer.closeRemote(id);
    return attr;
}

// A one-page buffer at `addr`, listing no transports yet.
BufferDesc bufferAt(uint64_t addr) {
    BufferDesc desc;
    desc.addr = addr;
    desc.length = 0x1000;
    return desc;
}

TEST_F(MpcommInstall,
       InitUsesTheSegmentNameTheTopologyRdmaNicsAndTheDefaultPort) {
    LogCapture logs;
    ASSERT_TRUE(install().ok());
    EXPECT_EQ(adapter_->initHost(), kLocal);
    EXPECT_EQ(adapter_->initDevices(), "mlx5_0,mlx5_1");
    EXPECT_EQ(adapter_->initPort(), 13579);
    auto events = adapter_->events();
    ASSERT_GE(events.size(), 2u);
    EXPECT_EQ(events[0], "init");
    EXPECT_EQ(events[1], "startAcceptThread");
    EXPECT_EQ(logs.count("MpcommTransport: Installed successfully, "
                         "host_id=10.0.0.1:12345, tcp_port=13579, "
                         "devices=mlx5_0,mlx5_1"),
              1);
}

TEST_F(MpcommInstall, TheEndpointIsPublishedAndReadableByAPeer) {
    uint64_t before = local_sm_->publishedVersion();
    adapter_->port_override = 14001;  // the port the listener really bound
    ASSERT_TRUE(install().ok());
    EXPECT_GT(local_sm_->publishedVersion(), before);
    EXPECT_EQ(attrOf(*local_sm_->getLocal(), MPCOMM), "v1:10.0.0.1:14001");
    EXPECT_EQ(peerViewOfAttr(*peer_sm_, kLocal), "v1:10.0.0.1:14001");
}

TEST_F(MpcommInstall, UninstallWithdrawsTheEndpointAndShutsTheProviderDown) {
    ASSERT_TRUE(install().ok());
    ASSERT_TRUE(transport_->uninstall().ok());
    EXPECT_EQ(peerViewOfAttr(*peer_sm_, kLocal), "");
    EXPECT_EQ(adapter_->stop_accept_calls, 1);
    EXPECT_EQ(adapter_->shutdown_calls, 1);
    EXPECT_FALSE(transport_->capabilities().dram_to_dram);
    // Idempotent, also from the destructor.
    ASSERT_TRUE(transport_->uninstall().ok());
    transport_.reset();
    EXPECT_EQ(adapter_->shutdown_calls, 1);
}

TEST_F(MpcommInstall, NicFilterOverridesTheTopologyDeviceList) {
    ScopedEnv filter("MPCOMM_NIC_FILTER", "mlx5_3,mlx5_4");
    LogCapture logs;
    ASSERT_TRUE(install().ok());
    EXPECT_EQ(adapter_->initDevices(), "mlx5_3,mlx5_4");
    EXPECT_EQ(logs.count("MpcommTransport: Installed successfully, "
                         "host_id=10.0.0.1:12345, tcp_port=13579, "
                         "devices=mlx5_3,mlx5_4"),
              1);
}

TEST_F(MpcommInstall, AHostWithoutRdmaNicsPassesAnEmptyListAndLogsNone) {
    topology_->nic_list_.clear();
    LogCapture logs;
    ASSERT_TRUE(install().ok());
    EXPECT_EQ(adapter_->initDevices(), "");
    EXPECT_EQ(logs.count("MpcommTransport: Installed successfully, "
                         "host_id=10.0.0.1:12345, tcp_port=13579, "
                         "devices=(none)"),
              1);
}

TEST_F(MpcommInstall, TcpPortComesFromMpcommTcpPort) {
    ScopedEnv port("MPCOMM_TCP_PORT", "13580");
    ASSERT_TRUE(install().ok());
    EXPECT_EQ(adapter_->initPort(), 13580);
    EXPECT_EQ(attrOf(*local_sm_->getLocal(), MPCOMM), "v1:10.0.0.1:13580");
}

TEST_F(MpcommInstall, ABadTcpPortFailsBeforeTheProviderIsTouched) {
    for (const std::string bad : {"", "abc", "13579x", "0", "-1", "65536"}) {
        ScopedEnv port("MPCOMM_TCP_PORT", bad);
        Status st = install();
        EXPECT_TRUE(st.IsInvalidArgument()) << bad;
        EXPECT_EQ(st.message(), "MPCOMM_TCP_PORT: invalid MPComm TCP port '" +
                                    bad +
                                    "': expected a decimal integer in "
                                    "1..65535");
    }
    EXPECT_EQ(adapter_->init_calls, 0);
    EXPECT_EQ(adapter_->shutdown_calls, 0);
    EXPECT_EQ(attrOf(*local_sm_->getLocal(), MPCOMM), "");
}

TEST_F(MpcommInstall, ABadRemoteTcpPortFailsInstallNamingTheVariable) {
    ScopedEnv port("MPCOMM_REMOTE_TCP_PORT", "70000");
    Status st = install();
    EXPECT_TRUE(st.IsInvalidArgument());
    EXPECT_EQ(st.message(),
              "MPCOMM_REMOTE_TCP_PORT: invalid MPComm TCP port '70000': "
              "expected a decimal integer in 1..65535");
    EXPECT_EQ(adapter_->init_calls, 0);
}

TEST_F(MpcommInstall, AnUnavailableAdapterFailsInstallWithItsReason) {
    adapter_->is_available = false;
    Status st = install();
    EXPECT_TRUE(st.IsNotImplemented());
    EXPECT_EQ(st.message(), "mock adapter set unavailable");
    EXPECT_EQ(adapter_->init_calls, 0);
    EXPECT_EQ(attrOf(*local_sm_->getLocal(), MPCOMM), "");
}

#ifndef TENT_HAVE_MPCOMM
TEST_F(MpcommInstall, WithoutUseMpcommTheDefaultTransportFailsNamingTheOption) {
    MpcommTransport transport;
    std::string name = kLocal;
    Status st = transport.install(name, local_cs_, topology_, conf_);
    EXPECT_TRUE(st.IsNotImplemented());
    EXPECT_EQ(st.message(),
              "MPComm support is not compiled in (built with USE_MPCOMM=OFF; "
              "rebuild with -DUSE_MPCOMM=ON -DMPCOMM_ROOT=<prefix>)");
    EXPECT_EQ(attrOf(*local_sm_->getLocal(), MPCOMM), "");
}
#endif

TEST_F(MpcommInstall, AnInitFailureIsReturnedAndUnwound) {
    adapter_->init_error = -3;
    expectUnwound(install(), "MPComm init failed, error=-3");
    EXPECT_EQ(adapter_->start_accept_calls, 0);
}

TEST_F(MpcommInstall, AnAcceptThreadFailureIsReturnedAndUnwound) {
    adapter_->accept_error = -3;
    expectUnwound(install(), "MPComm startAcceptThread failed, error=-3");
    EXPECT_EQ(adapter_->stop_accept_calls, 0);
}

TEST_F(MpcommInstall, AnEndpointThatCannotBeAdvertisedIsUnwound) {
    std::string name = "[fe80::1]:12345";
    Status st = transport_->install(name, local_cs_, topology_, conf_);
    EXPECT_TRUE(st.IsInvalidArgument());
    expectUnwound(st,
                  "MpcommTransport: cannot advertise local segment "
                  "[fe80::1]:12345: invalid MPComm endpoint attribute "
                  "'v1:[fe80::1]:13579': IPv6 literals are not supported, "
                  "only IPv4");
    EXPECT_EQ(adapter_->stop_accept_calls, 1);
    auto events = adapter_->events();
    ASSERT_EQ(events.size(), 4u);
    EXPECT_EQ(events[2], "stopAcceptThread");
    EXPECT_EQ(events[3], "shutdown");
}

TEST_F(MpcommInstall, WithoutNvidiaPeermemOnlyDramToDramIsAdvertised) {
    LogCapture logs;
    ASSERT_TRUE(install().ok());
    const auto& caps = transport_->capabilities();
    EXPECT_TRUE(caps.dram_to_dram);
    EXPECT_FALSE(caps.dram_to_gpu);
    EXPECT_FALSE(caps.gpu_to_dram);
    EXPECT_FALSE(caps.gpu_to_gpu);
    EXPECT_EQ(logs.count("MpcommTransport: nvidia_peermem not detected, GPU "
                         "memory support is disabled"),
              1);
}

TEST_F(MpcommInstall, WithNvidiaPeermemAllFourDirectionsAreAdvertised) {
    TempFile modules(
        "nvidia 56655872 1 nvidia_uvm, Live 0x0000000000000000 (POE)\n"
        "nvidia_peermem 16384 0 - Live 0x0000000000000000 (POE)\n");
    transport_->setModulesPath(modules.path());
    LogCapture logs;
    ASSERT_TRUE(install().ok());
    const auto& caps = transport_->capabilities();
    EXPECT_TRUE(caps.dram_to_dram);
    EXPECT_TRUE(caps.dram_to_gpu);
    EXPECT_TRUE(caps.gpu_to_dram);
    EXPECT_TRUE(caps.gpu_to_gpu);
    EXPECT_EQ(logs.countContaining("GPU memory support"), 0);
}

TEST_F(MpcommInstall, ConfigCanDisableGpuMemoryEvenWithNvidiaPeermem) {
    TempFile modules("nvidia_peermem 16384 0 - Live 0x0000000000000000\n");
    transport_->setModulesPath(modules.path());
    conf_->set("transports/mpcomm/disable_gpu_direct_rdma", true);
    LogCapture logs;
    ASSERT_TRUE(install().ok());
    const auto& caps = transport_->capabilities();
    EXPECT_TRUE(caps.dram_to_dram);
    EXPECT_FALSE(caps.dram_to_gpu);
    EXPECT_FALSE(caps.gpu_to_dram);
    EXPECT_FALSE(caps.gpu_to_gpu);
    EXPECT_EQ(logs.count("MpcommTransport: GPU memory support disabled by "
                         "transports/mpcomm/disable_gpu_direct_rdma"),
              1);
}

TEST_F(MpcommInstall, AModuleMerelyNamedLikeNvidiaPeermemDoesNotCount) {
    TempFile modules("nvidia_peermem_x 16384 0 - Live 0x0\n");
    transport_->setModulesPath(modules.path());
    ASSERT_TRUE(install().ok());
    EXPECT_FALSE(transport_->capabilities().gpu_to_gpu);
}

TEST_F(MpcommInstall, TheTransportNamesItselfAndOptsOutOfOptionalFeatures) {
    EXPECT_STREQ(transport_->getName(), "mpcomm");
    EXPECT_FALSE(transport_->supportsCancellation());
    EXPECT_FALSE(transport_->supportNotification());
}

// --- registration ----------------------------------------------------------

TEST_F(MpcommInstall, RegistrationRegistersPublishesAndListsMpcomm) {
    ASSERT_TRUE(install().ok());
    BufferDesc desc = bufferAt(0x40000);
    desc.transports = {TCP};
    ASSERT_TRUE(transport_->addMemoryBuffer(desc, MemoryOptions{}).ok());
    EXPECT_EQ(adapter_->register_calls, 1);
    EXPECT_EQ(adapter_->publish_calls, 1);
    EXPECT_EQ(desc.transports, (std::vector<TransportType>{TCP, MPCOMM}));
}

TEST_F(MpcommInstall, DeviceMemoryIsRefusedWhileGpuSupportIsOff) {
    ASSERT_TRUE(install().ok());
    BufferDesc desc = bufferAt(0x40000);
    desc.location = "cuda:2";
    EXPECT_EQ(transport_->addMemoryBuffer(desc, MemoryOptions{}),
              Status::InvalidArgument(
                  "mpcomm transport cannot register device memory at "
                  "cuda:2: GPU memory support is off (nvidia_peermem not "
                  "loaded, or transports/mpcomm/disable_gpu_direct_rdma is "
                  "true)"));
    std::vector<BufferDesc> list = {bufferAt(0x40000), desc};
    EXPECT_FALSE(transport_->addMemoryBuffer(list, MemoryOptions{}).ok());
    EXPECT_EQ(adapter_->register_calls, 0) << "the provider never saw it";
    EXPECT_TRUE(desc.transports.empty());
}

TEST_F(MpcommInstall, DeviceMemoryGoesToTheProviderWithNvidiaPeermem) {
    TempFile modules("nvidia_peermem 16384 0 - Live 0x0000000000000000\n");
    transport_->setModulesPath(modules.path());
    ASSERT_TRUE(install().ok());
    BufferDesc desc = bufferAt(0x40000);
    desc.location = "cuda:0";
    ASSERT_TRUE(transport_->addMemoryBuffer(desc, MemoryOptions{}).ok());
    EXPECT_EQ(adapter_->register_calls, 1);
    EXPECT_EQ(desc.transports, std::vector<TransportType>{MPCOMM});
}

TEST_F(MpcommInstall, APublishFailureUnregistersAndLeavesTheBufferUnlisted) {
    ASSERT_TRUE(install().ok());
    adapter_->publish_error = -6;
    BufferDesc desc = bufferAt(0x40000);
    Status st = transport_->addMemoryBuffer(desc, MemoryOptions{});
    EXPECT_EQ(st.message(), "MPComm publishBuffer failed, error=-6");
    EXPECT_EQ(adapter_->register_calls, 1);
    EXPECT_EQ(adapter_->unregister_calls, 1);
    EXPECT_TRUE(desc.transports.empty());
}

TEST_F(MpcommInstall, ARegisterFailureIsReturnedWithoutPublishing) {
    ASSERT_TRUE(install().ok());
    adapter_->register_error = -11;
    BufferDesc desc = bufferAt(0x40000);
    Status st = transport_->addMemoryBuffer(desc, MemoryOptions{});
    EXPECT_EQ(st.message(), "MPComm registerMemory failed, error=-11");
    EXPECT_EQ(adapter_->publish_calls, 0);
    EXPECT_TRUE(desc.transports.empty());
}

TEST_F(MpcommInstall, RemovalUnpublishesAndUnregistersOnce) {
    ASSERT_TRUE(install().ok());
    BufferDesc desc = bufferAt(0x40000);
    ASSERT_TRUE(transport_->addMemoryBuffer(desc, MemoryOptions{}).ok());
    ASSERT_TRUE(transport_->removeMemoryBuffer(desc).ok());
    EXPECT_EQ(adapter_->unpublish_calls, 1);
    EXPECT_EQ(adapter_->unregister_calls, 1);
    EXPECT_TRUE(desc.transports.empty());
    ASSERT_TRUE(transport_->removeMemoryBuffer(desc).ok());
    EXPECT_EQ(adapter_->unregister_calls, 1) << "a second removal is a no-op";
}

TEST_F(MpcommInstall, AFailedBufferInAListTakesBackTheOnesBeforeIt) {
    ASSERT_TRUE(install().ok());
    std::vector<BufferDesc> list = {bufferAt(0x40000), bufferAt(0x50000)};
    adapter_->publish_error = -6;
    adapter_->publish_ok_budget = 1;  // the second buffer fails
    Status st = transport_->addMemoryBuffer(list, MemoryOptions{});
    EXPECT_EQ(st.message(), "MPComm publishBuffer failed, error=-6");
    EXPECT_EQ(adapter_->register_calls, 2);
    EXPECT_EQ(adapter_->publish_calls, 2);
    EXPECT_EQ(adapter_->unpublish_calls, 1) << "the first is taken back";
    EXPECT_EQ(adapter_->unregister_calls, 2);
    EXPECT_TRUE(list[0].transports.empty());
    EXPECT_TRUE(list[1].transports.empty());
}

TEST_F(MpcommInstall, RegistrationBeforeInstallFails) {
    BufferDesc desc = bufferAt(0x40000);
    Status st = transport_->addMemoryBuffer(desc, MemoryOptions{});
    EXPECT_TRUE(st.IsInvalidArgument());
    EXPECT_EQ(st.message(),
              "MpcommTransport: not installed; cannot register buffer "
              "0x40000");
    EXPECT_EQ(adapter_->register_calls, 0);
}

TEST_F(MpcommInstall, UninstallReleasesBuffersStillRegistered) {
    ASSERT_TRUE(install().ok());
    BufferDesc desc = bufferAt(0x40000);
    ASSERT_TRUE(transport_->addMemoryBuffer(desc, MemoryOptions{}).ok());
    ASSERT_TRUE(transport_->uninstall().ok());
    EXPECT_EQ(adapter_->unpublish_calls, 1);
    EXPECT_EQ(adapter_->unregister_calls, 1);
    auto events = adapter_->events();
    ASSERT_FALSE(events.empty());
    EXPECT_EQ(events.back(), "shutdown");
    // Removing it afterwards does not reach the shut-down provider.
    ASSERT_TRUE(transport_->removeMemoryBuffer(desc).ok());
    EXPECT_EQ(adapter_->unregister_calls, 1);
}

}  // namespace
}  // namespace mooncake::tent
