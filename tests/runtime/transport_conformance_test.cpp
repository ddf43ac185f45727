// tent_transport_conformance_test: the same WRITE/READ, bad-range,
// dead-peer and teardown cases over every data transport in this build
// (tcp and shm always; mpcomm when built with USE_MPCOMM), between two
// processes.
#include <set>
#include <string>

#include "kit/two_process_fixture.h"
#include "transport/shm/shm_leftovers.h"

namespace mooncake::tent::testing {
namespace {

class TransportConformance
    : public TwoProcessTest,
      public ::testing::WithParamInterface<TransportType> {
 protected:
    void SetUp() override { startPair(GetParam()); }
    void TearDown() override {
        TwoProcessTest::TearDown();
        // A killed shm target leaves its object behind (docs/shm.md);
        // removed the way the docs say, so runs leave /dev/shm clean.
        for (const std::string& name : killed_objects_) {
            EXPECT_TRUE(removeIfCreatorDead(name)) << name;
        }
    }

    // The shm target's objects, as mapped here, before it is killed.
    std::set<std::string> killed_objects_;
};

TEST_P(TransportConformance, ReadSeesTheTargetsBytes) {
    expectTargetsInitialPattern();
}

TEST_P(TransportConformance, WriteThenReadBackInManySmallRequests) {
    expectRoundTrip(3, 64u << 10);
}

TEST_P(TransportConformance, ARangeOutsideThePeersBuffersFailsOnlyItsTask) {
    for (size_t i = 0; i < kBufferSize; ++i) {
        localBytes()[i] = patternByte(i, 41);
    }
    Request good = request(Request::WRITE, 0, 4096);
    Request straddling = request(Request::WRITE, 0, 8192);
    straddling.target_offset = target_base_ + kBufferSize - 4096;
    Request before = request(Request::WRITE, 0, 4096);
    before.target_offset = target_base_ - 4096;
    auto states = run({good, straddling, before});
    EXPECT_EQ(states[0].s, COMPLETED);
    EXPECT_EQ(states[1].s, FAILED);
    EXPECT_EQ(states[2].s, FAILED);
    // The good write is in the target's buffer, and only there.
    expectTargetHolds(0, 4096, 41);
    expectTargetHolds(4096, kBufferSize - 4096, 7);
    // The refused write touched nothing: the target's last page still
    // holds its original pattern.
    states = run({request(Request::READ, kBufferSize - 4096, 4096)});
    ASSERT_EQ(states[0].s, COMPLETED);
    for (size_t i = kBufferSize - 4096; i < kBufferSize; ++i) {
        ASSERT_EQ(localBytes()[i], patternByte(i, 7)) << "byte " << i;
    }
}

TEST_P(TransportConformance, ADeadPeerFailsTransfersWithoutHanging) {
    auto states = run({request(Request::WRITE, 0, 4096)});
    ASSERT_EQ(states[0].s, COMPLETED);
    if (GetParam() == SHM) {
        killed_objects_ = peerShmObjectsMappedHere();
        ASSERT_EQ(killed_objects_.size(), 1u);
    }
    killTarget();
    for (const std::string& name : killed_objects_) {
        // SIGKILL leaves the object: there is no reaper.
        EXPECT_TRUE(shmObjectExists(name)) << name;
    }
    states = run({request(Request::WRITE, 0, 65536),
                  request(Request::READ, 65536, 65536)});
    EXPECT_EQ(states[0].s, FAILED);
    EXPECT_EQ(states[1].s, FAILED);
}

TEST_P(TransportConformance, TeardownWithTransfersInFlightLeavesThePeerUsable) {
    constexpr size_t kChunk = 256u << 10;
    constexpr uint8_t kSeed = 11;
    // Writes abandoned in flight may still land after the engine is gone
    // (bytes already on the wire reach the target, as an RDMA write
    // posted before a crash does), so they carry the bytes the round trip
    // below writes: a late one cannot be told from the new one, and the
    // check is about the peer staying usable.
    for (size_t i = 0; i < kBufferSize; ++i) {
        localBytes()[i] = patternByte(i, kSeed);
    }
    std::vector<Request> writes;
    for (size_t off = 0; off < kBufferSize; off += kChunk) {
        writes.push_back(request(Request::WRITE, off, kChunk));
    }
    BatchID batch = engine_->allocateBatch(writes.size());
    ASSERT_NE(batch, 0u);
    ASSERT_TRUE(engine_->submitTransfer(batch, writes).ok());
    // Destroy the engine with the batch neither polled nor freed.
    abandonInitiator();
    startInitiator();
    expectRoundTrip(kSeed, kChunk);
}

INSTANTIATE_TEST_SUITE_P(EveryTransport, TransportConformance,
                         ::testing::ValuesIn(withMpcommIfBuilt({TCP, SHM})),
                         transportParamName);

}  // namespace
}  // namespace mooncake::tent::testing
