// A local and two peer SegmentManagers that read each other's published
// snapshots, a topology with two RDMA NICs, and an MpcommTransport over the
// mock adapter. The MPCOMM_* variables the transport reads are unset for
// each test; a test sets them with its own ScopedEnv.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "kit/mock_mpcomm_adapter.h"
#include "kit/mpcomm_test_support.h"
#include "kit/request_builder.h"
#include "tent/transport/mpcomm/mpcomm_transport.h"

namespace mooncake::tent::testing {

class MpcommTransportFixture : public ::testing::Test {
 protected:
    const std::string kLocal = "10.0.0.1:12345";
    const std::string kPeer = "10.0.0.2:12346";
    // A second peer, for tests in which one peer misbehaves and the other
    // must not notice.
    const std::string kPeer2 = "10.0.0.3:12347";
    static constexpr uint64_t kPeerBuffer = 0x10000;
    static constexpr uint64_t kPeerBufferLength = 0x1000;

    void SetUp() override {
        fetcher_ = std::make_shared<DescriptorFetcher>();
        local_sm_ = std::make_shared<SegmentManager>(kLocal, fetcher_);
        peer_sm_ = std::make_shared<SegmentManager>(kPeer, fetcher_);
        peer2_sm_ = std::make_shared<SegmentManager>(kPeer2, fetcher_);
        fetcher_->add(kLocal, local_sm_);
        fetcher_->add(kPeer, peer_sm_);
        fetcher_->add(kPeer2, peer2_sm_);
        local_cs_ = std::make_shared<ControlService>(local_sm_);
        topology_ = std::make_shared<Topology>();
        topology_->nic_list_ = {{"mlx5_0", Topology::NIC_RDMA, 0},
                                {"eth0", Topology::NIC_TCP, 0},
                                {"mlx5_1", Topology::NIC_RDMA, 1}};
        conf_ = std::make_shared<Config>();
        adapter_ = std::make_shared<MockMpcommAdapter>();
        transport_ = std::make_unique<MpcommTransport>(adapter_);
        transport_->setModulesPath(no_peermem_.path());
    }

    void TearDown() override { transport_.reset(); }

    Status install() {
        std::string name = kLocal;
        return transport_->install(name, local_cs_, topology_, conf_);
    }

    // What the peer advertises, as its own install() would have. Its
    // engine advances the registration epoch with every (un)registration;
    // `new_epoch` false publishes a list without that.
    void publishPeer(const std::string& attr, std::vector<BufferDesc> buffers,
                     bool new_epoch = true) {
        publishOn(*peer_sm_, attr, std::move(buffers), new_epoch);
    }
    // The same for any peer manager (peer_sm_ or peer2_sm_).
    void publishOn(SegmentManager& peer, const std::string& attr,
                   std::vector<BufferDesc> buffers, bool new_epoch = true) {
        ASSERT_TRUE(peer.updateLocal([&](SegmentDesc& desc) {
                            if (new_epoch) ++desc.registration_epoch;
                            if (attr.empty()) {
                                desc.getMemory().transport_attrs.erase(MPCOMM);
                            } else {
                                desc.getMemory().transport_attrs[MPCOMM] = attr;
                            }
                            desc.getMemory().buffers = buffers;
                            return Status::OK();
                        })
                        .ok());
        ASSERT_TRUE(peer.synchronizeLocal().ok());
    }
    // The peer process restarted under the same name: a new incarnation,
    // and the endpoint its new listener bound. The epoch starts over.
    void restartPeer(SegmentManager& peer, const std::string& attr) {
        ASSERT_TRUE(peer.updateLocal([&](SegmentDesc& desc) {
                            // Never 0: that reads as "unknown", which
                            // matches any incarnation.
                            uint64_t next = desc.incarnation + 1;
                            desc.incarnation = next != 0 ? next : 1;
                            desc.registration_epoch = 1;
                            desc.getMemory().transport_attrs[MPCOMM] = attr;
                            return Status::OK();
                        })
                        .ok());
        ASSERT_TRUE(peer.synchronizeLocal().ok());
    }

    static BufferDesc mpcommBuffer(uint64_t addr, uint64_t length) {
        BufferDesc desc;
        desc.addr = addr;
        desc.length = length;
        desc.transports = {TCP, MPCOMM};
        return desc;
    }

    void publishDefaultPeer() {
        publishPeer("v1:10.0.0.2:14000",
                    {mpcommBuffer(kPeerBuffer, kPeerBufferLength)});
    }

    SegmentID openPeer() { return openSegment(kPeer); }
    SegmentID openSegment(const std::string& name) {
        SegmentID id = 0;
        EXPECT_TRUE(local_sm_->openRemote(id, name).ok());
        return id;
    }

    Request request(Request::OpCode op, SegmentID target, size_t length,
                    uint64_t offset = kPeerBuffer) {
        return makeRequest(op, local_data_, target, offset, length);
    }

    TransferStatus statusOf(Transport::SubBatchRef batch, int task) {
        TransferStatus status;
        Status st = transport_->getTransferStatus(batch, task, status);
        EXPECT_TRUE(st.ok()) << st;
        return status;
    }

    // Unset for every test; a test overrides with its own ScopedEnv.
    ScopedEnv tcp_port_env_{"MPCOMM_TCP_PORT", std::nullopt};
    ScopedEnv remote_port_env_{"MPCOMM_REMOTE_TCP_PORT", std::nullopt};
    ScopedEnv nic_filter_env_{"MPCOMM_NIC_FILTER", std::nullopt};
    ScopedEnv advertise_env_{"MPCOMM_ADVERTISE_ADDR", std::nullopt};
    TempFile no_peermem_{
        "nvidia 56655872 1 nvidia_uvm, Live 0x0000000000000000 (POE)\n"
        "ib_core 434176 2 rdma_ucm, Live 0x0000000000000000\n"};

    std::shared_ptr<DescriptorFetcher> fetcher_;
    std::shared_ptr<SegmentManager> local_sm_;
    std::shared_ptr<SegmentManager> peer_sm_;
    std::shared_ptr<SegmentManager> peer2_sm_;
    // What install() receives; wraps local_sm_ (its RPC server never runs).
    std::shared_ptr<ControlService> local_cs_;
    std::shared_ptr<Topology> topology_;
    std::shared_ptr<Config> conf_;
    std::shared_ptr<MockMpcommAdapter> adapter_;
    std::unique_ptr<MpcommTransport> transport_;
    char local_data_[4096] = {};
};

}  // namespace mooncake::tent::testing
