// tent_mpcomm_transport_test: the MPComm data path over the real provider.
//
// Forks a target engine, then drives WRITE and READ over MPComm with
// transport_hint = MPCOMM and every other transport disabled, checking the
// payload byte for byte (see two_process_fixture.h for ports and skips).
#include "kit/two_process_fixture.h"

namespace mooncake::tent::testing {
namespace {

class MpcommTransportTest : public TwoProcessTest {
 protected:
    void SetUp() override { startPair(MPCOMM); }
};

TEST_F(MpcommTransportTest, WriteThenReadBackIsByteExact) {
    expectTargetsInitialPattern();
    expectRoundTrip(42, kBufferSize);
}

TEST_F(MpcommTransportTest, ManyRequestsInFlightAndABadRangeFailsAlone) {
    constexpr size_t kChunk = 256u << 10;
    constexpr size_t kChunks = kBufferSize / kChunk;
    std::vector<Request> writes;
    for (size_t c = 0; c < kChunks; ++c) {
        writes.push_back(request(Request::WRITE, c * kChunk, kChunk));
    }
    // Past the end of the target's only buffer: must fail on its own.
    Request bad = request(Request::WRITE, 0, kChunk);
    bad.target_offset = target_base_ + kBufferSize - kChunk / 2;
    writes.push_back(bad);
    auto states = run(writes);
    for (size_t c = 0; c < kChunks; ++c) {
        EXPECT_EQ(states[c].s, COMPLETED) << "chunk " << c;
    }
    EXPECT_EQ(states[kChunks].s, FAILED);
    expectRoundTrip(99, kChunk);
}

}  // namespace
}  // namespace mooncake::tent::testing
