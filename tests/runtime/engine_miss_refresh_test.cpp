// A request naming memory the initiator's cached copy of the target's
// descriptor does not hold, because the target registered it after the copy
// was read: the engine re-reads the descriptor and routes the request again
// (docs/metadata.md), at most once per segment per
// metadata/miss_refresh_interval_ms, so that a wrong address still fails
// with the text it always had and cannot make every request fetch. Between
// two processes (the target in a child), over each transport of the build,
// with requests the engine routes itself (no transport_hint: a hinted
// request is not checked against the target's buffers).
#include <gtest/gtest.h>

#include <cstring>
#include <iomanip>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "kit/log_capture.h"
#include "kit/two_process_fixture.h"

namespace mooncake::tent::testing {
namespace {

class MissRefreshTest : public TwoProcessTest,
                        public ::testing::WithParamInterface<TransportType> {
 protected:
    // Long enough that no test sees the interval pass by itself.
    static constexpr int64_t kLongInterval = 600000;

    // The initiator with metadata/miss_refresh_interval_ms=`interval_ms`,
    // the target's segment opened (its descriptor read and cached now).
    void startInitiatorWith(int64_t interval_ms) {
        auto conf = onlyTransport(xport_);
        conf->set("metadata/miss_refresh_interval_ms", interval_ms);
        startInitiatorWithConfig(conf);
    }

    void startTarget() {
        TargetOptions options;
        options.xport = GetParam();
        ASSERT_NO_FATAL_FAILURE(startTargetWith(options));
    }

    // A READ of `length` bytes at the target's address `remote` into the
    // local buffer, routed by the engine.
    // A READ of `length` bytes at `remote` into the local buffer at
    // `local_offset` (requests of one batch get ranges of their own: two
    // READs into one range would race).
    Request readAt(uint64_t remote, size_t length, size_t local_offset = 0) {
        return makeRequest(Request::READ, localBytes() + local_offset, target_,
                           remote, length);
    }

    // The whole local buffer holds pattern `seed`.
    void expectPattern(uint8_t seed) {
        for (size_t i = 0; i < kBufferSize; ++i) {
            ASSERT_EQ(localBytes()[i], patternByte(i, seed)) << "byte " << i;
        }
    }

    // What routing says of a range no buffer of the target covers.
    std::string missText(uint64_t remote, size_t length) const {
        std::ostringstream os;
        os << "no transport can reach segment " << target_name_
           << ": no registered buffer contains [0x" << std::hex << remote
           << ", +0x" << length << ")";
        return os.str();
    }
};

TEST_P(MissRefreshTest, ABufferRegisteredAfterTheOpenIsReachedAfterOneReread) {
    ASSERT_NO_FATAL_FAILURE(startTarget());
    if (IsSkipped()) return;
    // The target has nothing registered when the initiator reads (and
    // caches, for metadata/cache_ttl_ms=10 s) its descriptor.
    ASSERT_EQ(target_process_.ask("unreg"), "ok");
    ASSERT_NO_FATAL_FAILURE(startInitiatorWith(kLongInterval));
    if (IsSkipped()) return;
    ASSERT_EQ(target_process_.ask("reg"), "ok");
    EXPECT_EQ(engine_->getDescriptorRereads(), 0u);

    std::memset(localBytes(), 0, kBufferSize);
    auto states = run({readAt(target_base_, kBufferSize)});
    ASSERT_EQ(states[0].s, COMPLETED);
    EXPECT_EQ(states[0].transferred_bytes, kBufferSize);
    ASSERT_NO_FATAL_FAILURE(expectPattern(7));
    EXPECT_EQ(engine_->getDescriptorRereads(), 1u);
    // The fresh copy is cached: the next request needs no re-read.
    ASSERT_EQ(run({readAt(target_base_, kBufferSize)})[0].s, COMPLETED);
    EXPECT_EQ(engine_->getDescriptorRereads(), 1u);
}

TEST_P(MissRefreshTest, ASecondBufferRegisteredLaterIsReachedAfterOneReread) {
    ASSERT_NO_FATAL_FAILURE(startTarget());
    if (IsSkipped()) return;
    ASSERT_NO_FATAL_FAILURE(startInitiatorWith(kLongInterval));
    if (IsSkipped()) return;
    ASSERT_EQ(run({readAt(target_base_, kBufferSize)})[0].s, COMPLETED);
    EXPECT_EQ(engine_->getDescriptorRereads(), 0u);

    const std::string answer = target_process_.ask("second");
    const uint64_t second = std::strtoull(answer.c_str(), nullptr, 10);
    ASSERT_NE(second, 0u) << answer;
    std::memset(localBytes(), 0, kBufferSize);
    auto states = run({readAt(second, kBufferSize)});
    ASSERT_EQ(states[0].s, COMPLETED);
    ASSERT_NO_FATAL_FAILURE(expectPattern(9));
    EXPECT_EQ(engine_->getDescriptorRereads(), 1u);
    // Both buffers are in the copy now.
    ASSERT_EQ(run({readAt(target_base_, kBufferSize / 2),
                   readAt(second, kBufferSize / 2, kBufferSize / 2)})[1]
                  .s,
              COMPLETED);
    EXPECT_EQ(engine_->getDescriptorRereads(), 1u);
}

TEST_P(MissRefreshTest, AWrongAddressFailsAsBeforeWithOneRereadPerInterval) {
    ASSERT_NO_FATAL_FAILURE(startTarget());
    if (IsSkipped()) return;
    ASSERT_NO_FATAL_FAILURE(startInitiatorWith(kLongInterval));
    if (IsSkipped()) return;
    // Past the end of the served buffer: no buffer of the target holds it,
    // however often its descriptor is read.
    const uint64_t wrong = target_base_ + kBufferSize;
    const size_t length = 4096;
    LogCapture logs;
    constexpr int kBad = 5;
    for (int i = 0; i < kBad; ++i) {
        ASSERT_EQ(run({readAt(wrong, length)})[0].s, FAILED);
    }
    // One batch of several: the same.
    auto states = run({readAt(wrong, length), readAt(wrong, length, length)});
    EXPECT_EQ(states[0].s, FAILED);
    EXPECT_EQ(states[1].s, FAILED);
    EXPECT_EQ(logs.countContaining(missText(wrong, length)), kBad + 2);
    EXPECT_EQ(engine_->getDescriptorRereads(), 1u);
    // The target's own buffer is still reached.
    ASSERT_EQ(run({readAt(target_base_, length)})[0].s, COMPLETED);
}

TEST_P(MissRefreshTest, AnIntervalOfZeroRereadsOnEveryMiss) {
    ASSERT_NO_FATAL_FAILURE(startTarget());
    if (IsSkipped()) return;
    ASSERT_NO_FATAL_FAILURE(startInitiatorWith(0));
    if (IsSkipped()) return;
    const uint64_t wrong = target_base_ + kBufferSize;
    for (int i = 0; i < 3; ++i) {
        ASSERT_EQ(run({readAt(wrong, 4096)})[0].s, FAILED);
    }
    EXPECT_EQ(engine_->getDescriptorRereads(), 3u);
}

INSTANTIATE_TEST_SUITE_P(EveryTransport, MissRefreshTest,
                         ::testing::ValuesIn(withMpcommIfBuilt({TCP})),
                         transportParamName);

}  // namespace
}  // namespace mooncake::tent::testing
