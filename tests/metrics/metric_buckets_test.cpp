// Every bucket function must place a value exactly where the plain scan of
// the documented bounds does (the size buckets use a bit scan instead),
// and recordCompleted must render exactly what its three separate calls
// did.
#include "metrics/metric_buckets.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

#include "metrics/tent_metrics.h"

namespace mooncake {
namespace tent {
namespace metrics {
namespace {

// The reference: first bound >= value, else the +Inf bucket.
template <size_t N>
size_t referenceBucket(const uint64_t (&bounds)[N], uint64_t value) {
    size_t i = 0;
    while (i<N&& static_cast<double>(value)> bounds[i]) ++i;
    return i;
}

// Values at, around and between every bound, and the extremes.
template <size_t N>
std::vector<uint64_t> probes(const uint64_t (&bounds)[N]) {
    std::vector<uint64_t> v{0, 1, 2, 3, std::numeric_limits<uint64_t>::max()};
    for (uint64_t u : bounds)
        for (uint64_t d : {u - 1, u, u + 1, u + u / 3, u * 2 - 1})
            v.push_back(d);
    return v;
}

TEST(MetricBucketsTest, SizeBucketsMatchTheScan) {
    for (uint64_t value : probes(kSizeBounds))
        EXPECT_EQ(sizeBucket(value), referenceBucket(kSizeBounds, value))
            << "value " << value;
    EXPECT_EQ(sizeBucket(1024), 0u);
    EXPECT_EQ(sizeBucket(1025), 1u);
    EXPECT_EQ(sizeBucket(uint64_t{1} << 30), 10u);
    EXPECT_EQ(sizeBucket((uint64_t{1} << 30) + 1), 11u);
}

TEST(MetricBucketsTest, LatencyAndStageBucketsMatchTheScan) {
    for (uint64_t value : probes(kLatencyBounds))
        EXPECT_EQ(latencyBucket(value), referenceBucket(kLatencyBounds, value))
            << "value " << value;
    for (uint64_t value : probes(kStageBounds))
        EXPECT_EQ(stageBucket(value), referenceBucket(kStageBounds, value))
            << "value " << value;
    EXPECT_EQ(latencyBucket(100), 0u);
    EXPECT_EQ(latencyBucket(101), 1u);
    EXPECT_EQ(latencyBucket(1000001), std::size(kLatencyBounds));
}

TEST(MetricBucketsTest, RecordCompletedEqualsItsParts) {
    TentMetrics combined, parts;
    const uint64_t sizes[] = {7, 1024, 5000, 1u << 20, (1ull << 30) + 1};
    const uint64_t lat[] = {3, 100, 101, 4999, 2000000};
    for (int k = 0; k < 5; ++k) {
        const Op op = k % 2 ? Op::kWrite : Op::kRead;
        const bool staged = k != 2;
        // Stamps from an arbitrary start; accepted 0: never accepted.
        const uint64_t start = 5000 + k;
        combined.recordCompleted(op, TCP, sizes[k], start,
                                 staged ? start + lat[k] / 3 : 0,
                                 start + lat[k]);
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

}  // namespace
}  // namespace metrics
}  // namespace tent
}  // namespace mooncake
