// The histogram's bit-scan bucket (power-of-two bounds) must place every
// value exactly where the plain scan of the documented bounds does, and
// recordCompleted must render exactly what its three separate calls did.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "metrics/sharded_counter.h"
#include "metrics/tent_metrics.h"

namespace mooncake {
namespace tent {
namespace metrics {
namespace {

// The reference: first bound >= value, else the +Inf bucket.
size_t scanBucket(const std::vector<double>& bounds, uint64_t value) {
    size_t i = 0;
    while (i < bounds.size() && static_cast<double>(value) > bounds[i]) ++i;
    return i;
}

// Values at, around and between every bound, and the extremes.
std::vector<uint64_t> probes(const std::vector<double>& bounds) {
    std::vector<uint64_t> v{0, 1, 2, 3, std::numeric_limits<uint64_t>::max()};
    for (double b : bounds) {
        const auto u = static_cast<uint64_t>(b);
        for (uint64_t d : {u - 1, u, u + 1, u + u / 3, u * 2 - 1})
            v.push_back(d);
    }
    return v;
}

void expectSameAsScan(const std::vector<double>& bounds) {
    for (uint64_t value : probes(bounds)) {
        ShardedHistogram h(bounds);
        h.observe(value);
        const auto counts = h.bucketCounts();
        ASSERT_EQ(counts.size(), bounds.size() + 1);
        const size_t want = scanBucket(bounds, value);
        for (size_t i = 0; i < counts.size(); ++i) {
            EXPECT_EQ(counts[i], i == want ? 1u : 0u)
                << "value " << value << " bucket " << i;
        }
        EXPECT_EQ(h.count(), 1u);
        EXPECT_EQ(h.sum(), value);
    }
}

TEST(ShardedHistogramTest, PowersOfFourSizeBucketsMatchScan) {
    expectSameAsScan({1024, 4096, 16384, 65536, 262144, 1048576, 4194304,
                      16777216, 67108864, 268435456, 1073741824});
}

TEST(ShardedHistogramTest, PowersOfTwoBucketsMatchScan) {
    expectSameAsScan({1, 2, 4, 8, 16, 32});
    expectSameAsScan({256, 512, 1024});
}

TEST(ShardedHistogramTest, OtherLayoutsKeepTheScan) {
    // Decimal latency bounds, a power-of-two run with a gap, ratio 8.
    expectSameAsScan(
        {100, 500, 1000, 5000, 10000, 50000, 100000, 500000, 1000000});
    expectSameAsScan({1024, 4096, 65536});
    expectSameAsScan({8, 64, 512});
    expectSameAsScan({1024, 4096, 16384, 20000});
}

TEST(ShardedHistogramTest, RecordCompletedEqualsItsParts) {
    TentMetrics combined, parts;
    const uint64_t sizes[] = {7, 1024, 5000, 1u << 20, (1ull << 30) + 1};
    const uint64_t lat[] = {3, 100, 101, 4999, 2000000};
    for (int k = 0; k < 5; ++k) {
        const Op op = k % 2 ? Op::kWrite : Op::kRead;
        const bool staged = k != 2;
        combined.recordCompleted(op, TCP, sizes[k], lat[k], lat[k] / 3,
                                 lat[k] - lat[k] / 3, staged);
        parts.recordAttempt(op, TCP, lat[k], true);
        if (staged) parts.recordStages(TCP, lat[k] / 3, lat[k] - lat[k] / 3);
        parts.recordRequest(op, TCP, sizes[k], lat[k], true);
    }
    const std::string text = combined.renderPrometheus();
    EXPECT_EQ(text, parts.renderPrometheus());
    EXPECT_NE(text.find("tent_stage_dispatch_us_count{transport=\"tcp\"} 4"),
              std::string::npos)
        << text;
}

// Shards outlive the threads that wrote them: totals never go down when
// a writer exits, and a later thread reusing its slot adds to them.
TEST(ShardedHistogramTest, ExitedThreadsCountsStay) {
    ShardedCounter counter;
    ShardedHistogram hist({1024, 4096});
    constexpr int kThreads = 2 * static_cast<int>(kMetricShards) + 3;
    for (int t = 0; t < kThreads; ++t) {
        std::thread([&] {
            for (int k = 0; k < 100; ++k) {
                counter.add(3);
                hist.observe(2000);
            }
        }).join();
        ASSERT_EQ(counter.value(), 300u * (t + 1));
    }
    EXPECT_EQ(hist.count(), 100u * kThreads);
    EXPECT_EQ(hist.bucketCounts()[1], 100u * kThreads);
    EXPECT_EQ(hist.sum(), 200000u * kThreads);
}

}  // namespace
}  // namespace metrics
}  // namespace tent
}  // namespace mooncake
