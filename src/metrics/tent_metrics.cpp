#include "metrics/tent_metrics.h"

#include <functional>
#include <sstream>
#include <vector>

#include "metrics/metric_clock.h"

namespace mooncake {
namespace tent {
namespace metrics {
namespace {

using namespace layout;

const char* opLabel(int op) { return op == 0 ? "read" : "write"; }

}  // namespace

const char* transportLabel(TransportType t) {
    switch (t) {
        case RDMA:
            return "rdma";
        case MNNVL:
            return "mnnvl";
        case SHM:
            return "shm";
        case NVLINK:
            return "nvlink";
        case GDS:
            return "gds";
        case IOURING:
            return "iouring";
        case TCP:
            return "tcp";
        case AscendDirect:
            return "ascend_direct";
        case SUNRISE_LINK:
            return "sunrise_link";
        case TPU:
            return "tpu";
        case UB:
            return "ub";
        case MPCOMM:
            return "mpcomm";
        default:
            return "unspec";
    }
}

namespace {
int slot(TransportType t) { return slotOf(t); }

// A histogram as rendered: one stored histogram or two with the same
// bounds summed (a family whose completed requests live in
// kCompletedLatency).
struct HistView {
    const uint64_t* bounds;
    size_t bound_count;
    std::vector<uint64_t> counts;  // non-cumulative, +Inf last
    uint64_t sum;
    uint64_t count() const {
        uint64_t total = 0;
        for (uint64_t c : counts) total += c;
        return total;
    }
};

// One scrape's sum of every thread's block, and the exposed series derived
// from it. Each is a sum of monotone slots, so it never goes down between
// scrapes.
class Snapshot {
 public:
    explicit Snapshot(std::vector<uint64_t> v) : v_(std::move(v)) {}
    uint64_t at(size_t i) const { return v_[i]; }
    template <size_t N>
    HistView hist(size_t at, const uint64_t (&bounds)[N],
                  size_t plus = kNone) const {
        HistView h{bounds,
                   N,
                   {v_.begin() + at, v_.begin() + at + N + 1},
                   v_[at + N + 1]};
        if (plus != kNone) {
            for (size_t i = 0; i <= N; ++i) h.counts[i] += v_[plus + i];
            h.sum += v_[plus + N + 1];
        }
        return h;
    }
    uint64_t count(size_t at, size_t buckets) const {
        uint64_t total = 0;
        for (size_t i = 0; i < buckets; ++i) total += v_[at + i];
        return total;
    }
    uint64_t bytes(int o, int t) const {
        return v_[opBase(o, t) + kSize + kSizeBucketCount];
    }
    uint64_t failures(int o, int t) const {
        return v_[opBase(o, t) + kFailures];
    }
    uint64_t requests(int o, int t) const {
        const size_t b = opBase(o, t);
        return v_[b + kFailures] + count(b + kLatency, kLatencyBucketCount) +
               count(b + kCompletedLatency, kLatencyBucketCount);
    }
    uint64_t attempts(int o, int t) const {
        const size_t b = opBase(o, t);
        return v_[b + kAttempts] +
               count(b + kCompletedLatency, kLatencyBucketCount);
    }
    uint64_t attemptFailures(int o, int t) const {
        return v_[opBase(o, t) + kAttemptFailures];
    }
    static constexpr size_t kNone = ~size_t{0};

 private:
    std::vector<uint64_t> v_;
};

void writeHistogram(std::ostringstream& os, const std::string& name,
                    const std::string& labels, const HistView& h) {
    const auto& counts = h.counts;
    uint64_t cumulative = 0;
    for (size_t i = 0; i < h.bound_count; ++i) {
        cumulative += counts[i];
        os << name << "_bucket{" << labels << ",le=\"" << h.bounds[i] << "\"} "
           << cumulative << "\n";
    }
    cumulative += counts.back();
    os << name << "_bucket{" << labels << ",le=\"+Inf\"} " << cumulative
       << "\n";
    os << name << "_sum{" << labels << "} " << h.sum << "\n";
    os << name << "_count{" << labels << "} " << cumulative << "\n";
}

std::string transportLabels(int t) {
    return std::string("transport=\"") +
           transportLabel(static_cast<TransportType>(t)) + "\"";
}
}  // namespace

TentMetrics::TentMetrics() : slots_(kSlotCount, &TentMetrics::foldCompleted) {
    // The stamps' source is settled (and measured) here, once a process,
    // not on some request's stamp.
    MetricClock::calibrate();
}

namespace {
void observeInto(uint64_t* slots, size_t hist, size_t bucket, size_t buckets,
                 uint64_t value) {
    slots[hist + bucket] += 1;
    slots[hist + buckets] += value;
}
}  // namespace

void TentMetrics::foldCompleted(const ThreadSlots::Event& e, uint64_t* slots) {
    const uint64_t bytes = e.v[0], start = e.v[1], accepted = e.v[2],
                   end = e.v[3];
    const int s = slotOf(static_cast<TransportType>(e.aux));
    const size_t base = opBase(static_cast<int>(e.tag), s);
    // Request, completed attempt, bytes and both counts all follow from
    // these four.
    const uint64_t latency = spanUs(end, start);
    observeInto(slots, base + kCompletedLatency, latencyBucket(latency),
                kLatencyBucketCount, latency);
    observeInto(slots, base + kSize, sizeBucket(bytes), kSizeBucketCount,
                bytes);
    // 0 for a task its first transport refused (it completed through a
    // failover): no dispatch stage to speak of.
    if (accepted == 0) return;
    const size_t stage = stageBase(s);
    const uint64_t dispatch = spanUs(accepted, start);
    const uint64_t transport = spanUs(end, accepted);
    observeInto(slots, stage + kStageDispatch, stageBucket(dispatch),
                kStageBucketCount, dispatch);
    observeInto(slots, stage + kStageTransport, stageBucket(transport),
                kStageBucketCount, transport);
}
TentMetrics::~TentMetrics() = default;

void TentMetrics::recordRequest(Op op, TransportType t, uint64_t bytes,
                                uint64_t latency_us, bool ok) {
    const size_t base = opBase(static_cast<int>(op), slot(t));
    const ThreadSlots::Writer b = slots_.local();
    if (!ok) {
        b.add(base + kFailures, 1);
        return;
    }
    observe(b, base + kLatency, latencyBucket(latency_us), kLatencyBucketCount,
            latency_us);
    observe(b, base + kSize, sizeBucket(bytes), kSizeBucketCount, bytes);
}

void TentMetrics::recordAttempt(Op op, TransportType t, uint64_t latency_us,
                                bool ok) {
    const size_t base = opBase(static_cast<int>(op), slot(t));
    const ThreadSlots::Writer b = slots_.local();
    b.add(base + kAttempts, 1);
    if (!ok) b.add(base + kAttemptFailures, 1);
    observe(b, base + kAttemptLatency, latencyBucket(latency_us),
            kLatencyBucketCount, latency_us);
}

void TentMetrics::recordStages(TransportType t, uint64_t dispatch_us,
                               uint64_t transport_us) {
    const size_t base = stageBase(slot(t));
    const ThreadSlots::Writer b = slots_.local();
    observe(b, base + kStageDispatch, stageBucket(dispatch_us),
            kStageBucketCount, dispatch_us);
    observe(b, base + kStageTransport, stageBucket(transport_us),
            kStageBucketCount, transport_us);
}

void TentMetrics::recordFailover(TransportType from, TransportType to) {
    slots_.local().add(kFailoverBase + slot(from) * kTransports + slot(to), 1);
}

uint64_t TentMetrics::total(Total kind, Op op, TransportType t) const {
    int o = static_cast<int>(op), s = slot(t);
    if (static_cast<int>(t) != s) return 0;
    // Only this op and transport's series are summed, not the whole set.
    std::vector<uint64_t> v(kSlotCount, 0);
    const size_t base = opBase(o, s);
    slots_.sumRange(base, kOpSeries, v.data() + base);
    const Snapshot snap(std::move(v));
    switch (kind) {
        case Total::kBytes:
            return snap.bytes(o, s);
        case Total::kRequests:
            return snap.requests(o, s);
        default:
            return snap.failures(o, s);
    }
}

std::string TentMetrics::renderPrometheus() const {
    std::ostringstream os;
    // One sum of every thread's block: the whole scrape is one consistent
    // reading.
    const Snapshot m(slots_.sum());
    // Per-op counters with a transport label; only series that have seen
    // traffic are written, so a scrape stays short.
    // value(op, transport) of one counter family.
    using Value = std::function<uint64_t(int, int)>;
    auto counter = [&](const char* name, const char* help, const Value& value,
                       int op) {
        os << "# HELP " << name << " " << help << "\n";
        os << "# TYPE " << name << " counter\n";
        for (int t = 0; t < kTransports; ++t) {
            uint64_t v = value(op, t);
            if (v == 0) continue;
            os << name << "{transport=\""
               << transportLabel(static_cast<TransportType>(t)) << "\"} " << v
               << "\n";
        }
    };
    for (int op = 0; op < 2; ++op) {
        std::string p = std::string("tent_") + opLabel(op);
        counter((p + "_bytes_total").c_str(), "Total bytes moved via TENT",
                [&](int o, int t) { return m.bytes(o, t); }, op);
        counter((p + "_requests_total").c_str(), "Total requests via TENT",
                [&](int o, int t) { return m.requests(o, t); }, op);
        counter((p + "_failures_total").c_str(), "Total failures via TENT",
                [&](int o, int t) { return m.failures(o, t); }, op);
    }
    os << "# HELP tent_transport_failover_total Total cross-transport "
          "failover events\n# TYPE tent_transport_failover_total counter\n";
    for (int f = 0; f < kTransports; ++f)
        for (int t = 0; t < kTransports; ++t) {
            uint64_t v = m.at(kFailoverBase + f * kTransports + t);
            if (v == 0) continue;
            os << "tent_transport_failover_total{from=\""
               << transportLabel(static_cast<TransportType>(f)) << "\",to=\""
               << transportLabel(static_cast<TransportType>(t)) << "\"} " << v
               << "\n";
        }
    auto attemptCounter = [&](const char* name, const char* help,
                              const Value& value) {
        os << "# HELP " << name << " " << help << "\n# TYPE " << name
           << " counter\n";
        for (int op = 0; op < 2; ++op)
            for (int t = 0; t < kTransports; ++t) {
                uint64_t v = value(op, t);
                if (v == 0) continue;
                os << name << "{transport=\""
                   << transportLabel(static_cast<TransportType>(t))
                   << "\",operation=\"" << opLabel(op) << "\"} " << v << "\n";
            }
    };
    attemptCounter("tent_transport_attempts_total",
                   "Total physical transport attempts submitted for execution",
                   [&](int o, int t) { return m.attempts(o, t); });
    attemptCounter("tent_transport_attempt_failures_total",
                   "Physical transport attempts that terminated with FAILED",
                   [&](int o, int t) { return m.attemptFailures(o, t); });
    // Read and write histograms are separate metric families.
    for (int op = 0; op < 2; ++op) {
        std::string p = std::string("tent_") + opLabel(op);
        os << "# HELP " << p << "_latency_us " << opLabel(op)
           << " latency distribution in microseconds\n# TYPE " << p
           << "_latency_us histogram\n";
        for (int t = 0; t < kTransports; ++t) {
            const HistView h = m.hist(opBase(op, t) + kLatency, kLatencyBounds,
                                      opBase(op, t) + kCompletedLatency);
            if (h.count() == 0) continue;
            writeHistogram(os, p + "_latency_us", transportLabels(t), h);
        }
        os << "# HELP " << p << "_size_bytes " << opLabel(op)
           << " request size distribution in bytes\n# TYPE " << p
           << "_size_bytes histogram\n";
        for (int t = 0; t < kTransports; ++t) {
            const HistView h = m.hist(opBase(op, t) + kSize, kSizeBounds);
            if (h.count() == 0) continue;
            writeHistogram(os, p + "_size_bytes", transportLabels(t), h);
        }
    }
    auto stage = [&](const char* name, const char* help, size_t series) {
        os << "# HELP " << name << " " << help << "\n# TYPE " << name
           << " histogram\n";
        for (int t = 0; t < kTransports; ++t) {
            const HistView h = m.hist(stageBase(t) + series, kStageBounds);
            if (h.count() == 0) continue;
            writeHistogram(os, name, transportLabels(t), h);
        }
    };
    stage("tent_stage_dispatch_us",
          "Submit to the transport accepting the request, in microseconds",
          kStageDispatch);
    stage("tent_stage_transport_us",
          "Transport accepting the request to its final status, in "
          "microseconds",
          kStageTransport);
    const char* name = "tent_transport_attempt_latency_us";
    os << "# HELP " << name
       << " Observed physical transport attempt latency in microseconds\n"
          "# TYPE "
       << name << " histogram\n";
    for (int op = 0; op < 2; ++op)
        for (int t = 0; t < kTransports; ++t) {
            const HistView h =
                m.hist(opBase(op, t) + kAttemptLatency, kLatencyBounds,
                       opBase(op, t) + kCompletedLatency);
            if (h.count() == 0) continue;
            writeHistogram(
                os, name,
                transportLabels(t) + ",operation=\"" + opLabel(op) + "\"", h);
        }
    return os.str();
}

}  // namespace metrics
}  // namespace tent
}  // namespace mooncake
