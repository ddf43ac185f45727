// tent_mpcomm_recovery_test, peers that come back: a peer killed and
// restarted under the same name is usable again, memory registered again
// is served with fresh keys, and install -> uninstall -> install of the
// real adapter works in one process.
#include <algorithm>

#include "kit/wait_until.h"
#include "mpcomm_recovery_fixture.h"
#include "tent/runtime/control_plane.h"
#include "tent/transport/mpcomm/mpcomm_adapter.h"
#include "tent/transport/mpcomm/mpcomm_transport.h"

namespace mooncake::tent::testing {

void MpcommRecoveryTest::expectRecoveryFromRestart(int restart_port_offset) {
    TargetProcess target;
    SegmentID id = 0;
    ASSERT_NO_FATAL_FAILURE(startOpenedPair(target, id, true, kCacheTtlMs));
    const std::string name = target.name();
    ASSERT_TRUE(roundTrip(id, target.base(), 3));

    target.kill();
    if (restart_port_offset == 1) {
        std::string why;
        ASSERT_EQ(target.restart(why), TargetProcess::Started::kReady) << why;
    } else {
        ASSERT_NO_FATAL_FAILURE(
            startTarget(target, basePort(), basePort() + restart_port_offset));
    }
    ASSERT_EQ(target.name(), name);
    auto took = recover(id, target.base(), 4);
    EXPECT_LT(took, kRecoveryBound);
    EXPECT_TRUE(roundTrip(id, target.base(), 5));
}

namespace {

TEST_F(MpcommRecoveryTest, AKilledPeerRestartedOnTheSamePortsIsUsedAgain) {
    expectRecoveryFromRestart(1);
}

TEST_F(MpcommRecoveryTest, AKilledPeerRestartedOnAnotherMpcommPortIsUsedAgain) {
    expectRecoveryFromRestart(2);
}

TEST_F(MpcommRecoveryTest, MemoryRegisteredAgainIsServedWithFreshKeys) {
    TargetProcess target;
    SegmentID id = 0;
    // A zero TTL reads the descriptor per submission: the new epoch is seen
    // by the very next transfer.
    ASSERT_NO_FATAL_FAILURE(startOpenedPair(target, id, /*preconnect=*/true,
                                            /*cache_ttl_ms=*/0));
    const std::string name = target.name();
    const uint64_t base = target.base();
    ASSERT_TRUE(roundTrip(id, base, 9));
    // The keys themselves stay inside the provider; a probe (a second
    // MPComm instance in this process, through the public adapter) holds
    // the keys of before each re-registration, so "fresh" is seen as: the
    // old keys are refused, the engine's next transfer works at once, and
    // keys queried again work.
    auto probe = createDefaultMpcommAdapter();
    ASSERT_TRUE(probe->init("recovery-probe", "", basePort() + 2).ok());
    std::vector<uint8_t> probe_mem(4096, 0x5a);
    ASSERT_TRUE(probe->registerMemory(probe_mem.data(), probe_mem.size()).ok());
    const int target_port = basePort() + 1;
    ASSERT_TRUE(probe->connect(name, "127.0.0.1", target_port).ok());
    auto probe_put = [&] {
        MpcommTransferHandle h =
            probe->putAsync(reinterpret_cast<uintptr_t>(probe_mem.data()), name,
                            base, probe_mem.size());
        if (h == kInvalidMpcommTransferHandle) return false;
        EXPECT_TRUE(waitUntil([&] { return probe->isTransferComplete(h); }));
        MpcommTransferOutcome out = probe->getTransferResult(h);
        probe->releaseTransfer(h);
        return out.ok;
    };
    auto epoch = [&] {
        SegmentDesc desc;
        EXPECT_TRUE(P2PSegmentFetcher().fetch(name, desc).ok());
        return desc.registration_epoch;
    };
    for (uint8_t seed : {10, 11}) {
        ASSERT_TRUE(
            probe->queryRemoteBuffer(name, "127.0.0.1", target_port).ok());
        EXPECT_TRUE(probe_put()) << "the keys just queried work";
        const uint64_t before = epoch();
        ASSERT_EQ(target.ask("rereg"), "ok");
        EXPECT_GT(epoch(), before) << "the descriptor shows the new keys";
        EXPECT_FALSE(probe_put()) << "the keys of before still work";
        EXPECT_TRUE(roundTrip(id, base, seed))
            << "the first transfer after re-registration failed";
    }
    probe->shutdown();
}

TEST_F(MpcommRecoveryTest, MemoryRegisteredAgainRecoversWithACachedDescriptor) {
    TargetProcess target;
    SegmentID id = 0;
    ASSERT_NO_FATAL_FAILURE(startOpenedPair(target, id, /*preconnect=*/true,
                                            /*cache_ttl_ms=*/60000));
    ASSERT_TRUE(roundTrip(id, target.base(), 12));
    ASSERT_EQ(target.ask("rereg"), "ok");
    // The cached descriptor still shows the old epoch: the first transfer
    // uses the old keys and fails, which makes the next one read afresh.
    auto took = recover(id, target.base(), 13);
    EXPECT_LT(took, kRecoveryBound);
    EXPECT_TRUE(roundTrip(id, target.base(), 14));
}

// Waits (bounded by `deadline`) for task `task` of `batch` to leave
// PENDING; its final state.
TransferStatus settle(MpcommTransport& transport, Transport::SubBatchRef batch,
                      int task, Clock::time_point deadline) {
    TransferStatus st;
    do {
        Status s = transport.getTransferStatus(batch, task, st);
        if (!s.ok()) {
            ADD_FAILURE() << "task " << task << ": " << s;
            break;
        }
    } while (st.s == PENDING && Clock::now() < deadline);
    return st;
}

// install -> uninstall -> install of the real adapter in one process, each
// installation moving bytes to a live target.
TEST_F(MpcommRecoveryTest, InstallUninstallInstallWithTheRealProvider) {
    TargetProcess target;
    ASSERT_NO_FATAL_FAILURE(startTarget(target, basePort(), basePort() + 1));

    auto segments = std::make_shared<SegmentManager>(
        "", std::make_shared<P2PSegmentFetcher>());
    auto control = std::make_shared<ControlService>(segments);
    ASSERT_TRUE(control->start(0).ok());
    std::string local_name = "127.0.0.1:" + std::to_string(control->port());
    ASSERT_TRUE(segments
                    ->updateLocal([&](SegmentDesc& desc) {
                        desc.name = local_name;
                        return Status::OK();
                    })
                    .ok());
    auto conf = std::make_shared<Config>();
    conf->set("transports/mpcomm/connect_timeout_ms", kConnectTimeoutMs);
    setenv("MPCOMM_TCP_PORT", std::to_string(basePort() + 3).c_str(), 1);
    std::vector<uint8_t> buffer(1u << 20);
    MpcommTransport transport;
    for (int round = 0; round < 3; ++round) {
        std::string as = local_name;
        Status st =
            transport.install(as, control, std::make_shared<Topology>(), conf);
        ASSERT_TRUE(st.ok()) << "round " << round << ": " << st;
        BufferDesc desc;
        desc.addr = reinterpret_cast<uint64_t>(buffer.data());
        desc.length = buffer.size();
        ASSERT_TRUE(transport.addMemoryBuffer(desc, MemoryOptions()).ok());
        SegmentID id = 0;
        ASSERT_TRUE(segments->openRemote(id, target.name()).ok());
        for (size_t i = 0; i < buffer.size(); ++i) {
            buffer[i] = patternByte(i, 20 + round);
        }
        Request r;
        r.opcode = Request::WRITE;
        r.source = buffer.data();
        r.target_id = id;
        r.target_offset = target.base();
        r.length = buffer.size();
        Transport::SubBatchRef batch = nullptr;
        ASSERT_TRUE(transport.allocateSubBatch(batch, 2).ok());
        ASSERT_TRUE(transport.submitTransferTasks(batch, {r}).ok());
        r.opcode = Request::READ;
        std::vector<uint8_t> expected = buffer;
        auto deadline = Clock::now() + kDeadline;
        ASSERT_EQ(settle(transport, batch, 0, deadline).s, COMPLETED)
            << "round " << round;
        std::fill(buffer.begin(), buffer.end(), 0);
        ASSERT_TRUE(transport.submitTransferTasks(batch, {r}).ok());
        ASSERT_EQ(settle(transport, batch, 1, deadline).s, COMPLETED)
            << "round " << round;
        EXPECT_EQ(buffer, expected) << "round " << round;
        ASSERT_TRUE(transport.freeSubBatch(batch).ok());
        ASSERT_TRUE(segments->closeRemote(id).ok());
        ASSERT_TRUE(transport.removeMemoryBuffer(desc).ok());
        ASSERT_TRUE(transport.uninstall().ok());
    }
}

}  // namespace
}  // namespace mooncake::tent::testing
