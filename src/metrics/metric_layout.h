// Where each series of the TENT metric set lives in a thread's block
// (thread_slots.h). Shared by the registry's scrape and its inline record
// path.
#pragma once

#include <cstddef>
#include <cstdint>

#include "metrics/metric_buckets.h"
#include "tent/common/types.h"

namespace mooncake {
namespace tent {
namespace metrics {
namespace layout {

constexpr int kTransports = kSupportedTransportTypes;

// The set's slots in each thread's block. A histogram is its buckets
// (non-cumulative, +Inf last) followed by its sum; its count is the sum of
// its buckets, so an observation writes two slots.
constexpr size_t kLatencySlots = kLatencyBucketCount + 1;
constexpr size_t kSizeSlots = kSizeBucketCount + 1;
constexpr size_t kStageSlots = kStageBucketCount + 1;

// Series that another series already determines are not stored: a
// completed request writes four histograms and no counter, and the scrape
// derives the rest (see Snapshot below). Per (op, transport):
enum : size_t {
    kFailures = 0,
    // Attempts other than a completed request's own (failed, refused, or
    // recorded alone through recordAttempt).
    kAttempts = 1,
    kAttemptFailures = 2,
    // Successful requests recorded through recordRequest.
    kLatency = 3,
    // recordCompleted's requests: its latency is both the request's and
    // its completed attempt's, so its bucket is found once and counted in
    // both families at render time.
    kCompletedLatency = kLatency + kLatencySlots,
    kAttemptLatency = kCompletedLatency + kLatencySlots,
    // Every successful request; its sum is the bytes counter.
    kSize = kAttemptLatency + kLatencySlots,
    kOpSeries = kSize + kSizeSlots,
};
// Per transport:
enum : size_t {
    kStageDispatch = 0,
    kStageTransport = kStageSlots,
    kStageSeries = 2 * kStageSlots,
};
constexpr size_t kStageBase = 2 * kTransports * kOpSeries;
constexpr size_t kFailoverBase = kStageBase + kTransports * kStageSeries;
constexpr size_t kSlotCount = kFailoverBase + kTransports * kTransports;

constexpr size_t opBase(int op, int t) {
    return (static_cast<size_t>(op) * kTransports + t) * kOpSeries;
}
constexpr size_t stageBase(int t) { return kStageBase + t * kStageSeries; }

// Out-of-range enum values land under "unspec" instead of indexing out of
// bounds.
inline int slotOf(TransportType t) {
    const int i = static_cast<int>(t);
    return (i >= 0 && i < kTransports) ? i : 0;
}

}  // namespace layout
}  // namespace metrics
}  // namespace tent
}  // namespace mooncake
