// The TENT metric set with upstream's names and label sets. Every series
// is pre-created per transport (labels come from the TransportType enum
// only) as a slot of the recording thread's block (thread_slots.h), so
// recording is an index and a load and store of the thread's own slot.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "metrics/metric_buckets.h"
#include "metrics/thread_slots.h"
#include "tent/common/types.h"

namespace mooncake {
namespace tent {
namespace metrics {

enum class Op { kRead = 0, kWrite = 1 };

// Lower-case label value for a transport ("tcp", "shm", "mpcomm", ...).
const char* transportLabel(TransportType t);

class TentMetrics {
 public:
    TentMetrics();
    ~TentMetrics();
    // One set per engine (TransferEngineImpl owns it); its /metrics
    // endpoint renders it. There is no process-wide set.

    // Request metrics: one per request, under its final transport.
    void recordRequest(Op op, TransportType t, uint64_t bytes,
                       uint64_t latency_us, bool ok);
    // Attempt metrics: one per physical transport attempt.
    void recordAttempt(Op op, TransportType t, uint64_t latency_us, bool ok);
    // Per-stage latency of a completed request, under its final transport:
    // submit to its transport accepting it, and from then to its final
    // status.
    void recordStages(TransportType t, uint64_t dispatch_us,
                      uint64_t transport_us);
    // A completed request: its COMPLETED attempt, its request metrics and,
    // when `staged`, its stages, with one shard lookup for all of them.
    // Records what recordAttempt(ok) + recordStages + recordRequest(ok)
    // would.
    void recordCompleted(Op op, TransportType t, uint64_t bytes,
                         uint64_t latency_us, uint64_t dispatch_us,
                         uint64_t transport_us, bool staged);
    // Fed by the failover path when a request moves to another transport.
    void recordFailover(TransportType from, TransportType to);

    // Request counters of one op and transport, for /metrics/json and the
    // summary line.
    enum class Total { kBytes, kRequests, kFailures };
    uint64_t total(Total kind, Op op, TransportType t) const;

    // Prometheus text exposition format 0.0.4.
    std::string renderPrometheus() const;

 private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace metrics
}  // namespace tent
}  // namespace mooncake
