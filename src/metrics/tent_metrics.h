// The TENT metric set with upstream's names and label sets. Every series
// is pre-created per transport (labels come from the TransportType enum
// only) as a slot of the recording thread's block (thread_slots.h), so
// recording is an index and a load and store of the thread's own slot.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "metrics/metric_layout.h"
#include "metrics/thread_slots.h"
#include "tent/common/types.h"

namespace mooncake {
namespace tent {
namespace metrics {

enum class Op { kRead = 0, kWrite = 1 };

inline Op opOf(Request::OpCode opcode) {
    return opcode == Request::WRITE ? Op::kWrite : Op::kRead;
}
inline Op opOf(const Request& request) { return opOf(request.opcode); }

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
    // when its transport accepted it (accepted_us not 0), its stages, from
    // the steady-clock stamps of its submission, its acceptance and its
    // final status. Records what recordAttempt(ok) + recordStages +
    // recordRequest(ok) would, with the spans taken between the stamps
    // (0 where a stamp precedes the one before it). Inline, and only an
    // event pushed on the thread's ring: it is every request's cost, and
    // the spans, buckets and counts are worked out when a scrape (or the
    // drain thread) folds the event.
    __attribute__((always_inline)) inline void recordCompleted(
        Op op, TransportType t, uint64_t bytes, uint64_t start_us,
        uint64_t accepted_us, uint64_t end_us);
    // Fed by the failover path when a request moves to another transport.
    void recordFailover(TransportType from, TransportType to);

    // Request counters of one op and transport, for /metrics/json and the
    // summary line.
    enum class Total { kBytes, kRequests, kFailures };
    uint64_t total(Total kind, Op op, TransportType t) const;

    // Prometheus text exposition format 0.0.4.
    std::string renderPrometheus() const;

 private:
    // One observation: its bucket and the histogram's sum.
    static void observe(ThreadSlots::Writer b, size_t hist, size_t bucket,
                        size_t buckets, uint64_t value) {
        b.add(hist + bucket, 1);
        b.add(hist + buckets, value);
    }
    // Folds one recordCompleted event into the set's counts.
    static void foldCompleted(const ThreadSlots::Event& e, uint64_t* slots);
    ThreadSlots slots_;
};

inline void TentMetrics::recordCompleted(Op op, TransportType t, uint64_t bytes,
                                         uint64_t start_us,
                                         uint64_t accepted_us,
                                         uint64_t end_us) {
    // The op and the transport as given: the fold maps the transport to
    // its slot (out of range: "unspec").
    slots_.local().push(
        ThreadSlots::Event{{bytes, start_us, accepted_us, end_us},
                           static_cast<uint32_t>(op),
                           static_cast<uint32_t>(t)});
}

}  // namespace metrics
}  // namespace tent
}  // namespace mooncake
