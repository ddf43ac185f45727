// tent_mpcomm_env_test (USE_MPCOMM=ON): the environment and configuration
// docs/mpcomm_transport.md documents, read by MpcommTransport::install()
// over the provider-backed adapter: MPCOMM_NIC_FILTER="" counts as unset,
// MPCOMM_TCP_PORT defaults to 13579, and a bad connect_timeout_ms fails
// install() naming the key and the value. Only public entry points
// (install() with a Config, the environment, the install log line).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <memory>
#include <string>

#include "kit/free_tcp_port.h"
#include "kit/log_capture.h"
#include "kit/scoped_env.h"
#include "net/socket_io.h"
#include "tent/runtime/control_plane.h"
#include "tent/runtime/topology.h"
#include "tent/transport/mpcomm/mpcomm_transport.h"

namespace mooncake::tent {
namespace {

using testing::freeTcpPort;
using testing::ScopedEnv;

class MpcommEnvTest : public ::testing::Test {
 protected:
    void SetUp() override {
        ASSERT_TRUE(control_->start(0).ok());
        name_ = "127.0.0.1:" + std::to_string(control_->port());
        ASSERT_TRUE(segments_
                        ->updateLocal([&](SegmentDesc& desc) {
                            desc.name = name_;
                            return Status::OK();
                        })
                        .ok());
        // Two RDMA NICs in the topology: what the transport passes to
        // MPComm unless MPCOMM_NIC_FILTER names others.
        topology_->nic_list_ = {{"rail_a", Topology::NIC_RDMA, 0},
                                {"eth0", Topology::NIC_TCP, 0},
                                {"rail_b", Topology::NIC_RDMA, 0}};
    }
    void TearDown() override { control_->stop(); }

    Status install(MpcommTransport& transport, std::shared_ptr<Config> conf) {
        std::string as = name_;
        return transport.install(as, control_, topology_, std::move(conf));
    }
    std::string installedLine(int port, const std::string& devices) {
        return "MpcommTransport: Installed successfully, host_id=" + name_ +
               ", tcp_port=" + std::to_string(port) + ", devices=" + devices;
    }

    std::shared_ptr<SegmentManager> segments_ =
        std::make_shared<SegmentManager>("", nullptr);
    std::shared_ptr<ControlService> control_ =
        std::make_shared<ControlService>(segments_);
    std::shared_ptr<Topology> topology_ = std::make_shared<Topology>();
    std::string name_;
};

TEST_F(MpcommEnvTest, AnEmptyNicFilterCountsAsUnset) {
    const int port = freeTcpPort();
    ASSERT_GT(port, 0);
    ScopedEnv tcp_port("MPCOMM_TCP_PORT", std::to_string(port).c_str());
    for (const char* filter : {"", "rail_b"}) {
        ScopedEnv nic_filter("MPCOMM_NIC_FILTER", filter);
        testing::LogCapture log;
        MpcommTransport transport;
        Status st = install(transport, std::make_shared<Config>());
        ASSERT_TRUE(st.ok()) << "MPCOMM_NIC_FILTER='" << filter << "': " << st;
        // "" leaves the topology's RDMA NICs; a name replaces them.
        const std::string devices = *filter ? filter : "rail_a,rail_b";
        EXPECT_EQ(log.count(installedLine(port, devices)), 1)
            << "MPCOMM_NIC_FILTER='" << filter << "'";
        EXPECT_TRUE(transport.uninstall().ok());
    }
}

TEST_F(MpcommEnvTest, TheHandshakePortDefaultsTo13579) {
    ScopedEnv tcp_port("MPCOMM_TCP_PORT", nullptr);
    testing::LogCapture log;
    MpcommTransport transport;
    Status st = install(transport, std::make_shared<Config>());
    ASSERT_TRUE(st.ok()) << st << " (is port 13579 taken?)";
    EXPECT_EQ(log.count(installedLine(13579, "rail_a,rail_b")), 1);
    EXPECT_TRUE(transport.uninstall().ok());
}

TEST_F(MpcommEnvTest, ABadConnectTimeoutFailsInstallNamingKeyAndValue) {
    const int port = freeTcpPort();
    ASSERT_GT(port, 0);
    ScopedEnv tcp_port("MPCOMM_TCP_PORT", std::to_string(port).c_str());
    for (int64_t bad : {int64_t{0}, int64_t{-1}, int64_t{3600001}}) {
        auto conf = std::make_shared<Config>();
        conf->set("transports/mpcomm/connect_timeout_ms", bad);
        MpcommTransport transport;
        Status st = install(transport, conf);
        EXPECT_FALSE(st.ok()) << bad;
        EXPECT_NE(std::string(st.message())
                      .find("transports/mpcomm/connect_timeout_ms"),
                  std::string::npos)
            << st;
        EXPECT_NE(std::string(st.message()).find(std::to_string(bad)),
                  std::string::npos)
            << st;
    }
}

}  // namespace
}  // namespace mooncake::tent
