#include "metrics/tent_metrics.h"

#include <functional>
#include <sstream>
#include <vector>

namespace mooncake {
namespace tent {
namespace metrics {
namespace {

constexpr int kTransports = kSupportedTransportTypes;

// Upstream's bucket boundaries (microseconds and bytes).
const std::vector<double> kLatencyBuckets{100,   500,    1000,   5000,   10000,
                                          50000, 100000, 500000, 1000000};
const std::vector<double> kSizeBuckets{1024,     4096,      16384,     65536,
                                       262144,   1048576,   4194304,   16777216,
                                       67108864, 268435456, 1073741824};

// Upstream's stage buckets (microseconds): 10 µs to 500 ms.
const std::vector<double> kStageBuckets{10,   50,    100,   500,    1000,
                                        5000, 10000, 50000, 100000, 500000};

const char* opLabel(int op) { return op == 0 ? "read" : "write"; }

// One histogram per transport (and per op where the metric has one).
std::vector<std::unique_ptr<ShardedHistogram>> makeHistograms(
    size_t n, const std::vector<double>& bounds) {
    std::vector<std::unique_ptr<ShardedHistogram>> v;
    for (size_t i = 0; i < n; ++i)
        v.push_back(std::make_unique<ShardedHistogram>(bounds));
    return v;
}

std::string fmtBound(double b) {
    std::ostringstream os;
    os << static_cast<uint64_t>(b);
    return os.str();
}

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

struct TentMetrics::Impl {
    // Series that another series already determines are not stored: a
    // completed request writes four histograms and no counter, and the
    // scrape derives the rest (see the accessors below).
    // [op][transport]
    ShardedCounter failures[2][kTransports];
    // Attempts other than a completed request's own (failed, refused, or
    // recorded alone through recordAttempt).
    ShardedCounter attempts[2][kTransports];
    ShardedCounter attempt_failures[2][kTransports];
    ShardedCounter failover[kTransports][kTransports];
    // Successful requests recorded through recordRequest.
    std::vector<std::unique_ptr<ShardedHistogram>> latency[2];
    // recordCompleted's requests: its latency is both the request's and
    // its completed attempt's, so it is observed once and counted in both
    // families at render time.
    std::vector<std::unique_ptr<ShardedHistogram>> completed_latency[2];
    // Every successful request; its sum is the bytes counter.
    std::vector<std::unique_ptr<ShardedHistogram>> size[2];
    std::vector<std::unique_ptr<ShardedHistogram>> attempt_latency[2];
    std::vector<std::unique_ptr<ShardedHistogram>> stage_dispatch;
    std::vector<std::unique_ptr<ShardedHistogram>> stage_transport;

    Impl() {
        for (int op = 0; op < 2; ++op) {
            latency[op] = makeHistograms(kTransports, kLatencyBuckets);
            completed_latency[op] =
                makeHistograms(kTransports, kLatencyBuckets);
            size[op] = makeHistograms(kTransports, kSizeBuckets);
            attempt_latency[op] = makeHistograms(kTransports, kLatencyBuckets);
        }
        stage_dispatch = makeHistograms(kTransports, kStageBuckets);
        stage_transport = makeHistograms(kTransports, kStageBuckets);
    }

    // The exposed series, derived. Each is a sum of monotone counters, so
    // it never goes down between scrapes.
    uint64_t bytes(int o, int s) const { return size[o][s]->sum(); }
    uint64_t requests(int o, int s) const {
        return failures[o][s].value() + latency[o][s]->count() +
               completed_latency[o][s]->count();
    }
    uint64_t attemptCount(int o, int s) const {
        return attempts[o][s].value() + completed_latency[o][s]->count();
    }
};

namespace {
// Out-of-range enum values land under "unspec" instead of indexing out of
// bounds.
int slot(TransportType t) {
    int i = static_cast<int>(t);
    return (i >= 0 && i < kTransports) ? i : 0;
}

// A histogram as rendered: one stored histogram or two with the same
// bounds summed (a family whose completed requests live in
// completed_latency).
struct HistView {
    const std::vector<double>* bounds;
    std::vector<uint64_t> counts;  // non-cumulative, +Inf last
    uint64_t sum;
    uint64_t count() const {
        uint64_t total = 0;
        for (uint64_t c : counts) total += c;
        return total;
    }
};

HistView viewOf(const ShardedHistogram& h,
                const ShardedHistogram* plus = nullptr) {
    HistView v{&h.bounds(), h.bucketCounts(), h.sum()};
    if (plus != nullptr) {
        const auto more = plus->bucketCounts();
        for (size_t i = 0; i < v.counts.size(); ++i) v.counts[i] += more[i];
        v.sum += plus->sum();
    }
    return v;
}

void writeHistogram(std::ostringstream& os, const std::string& name,
                    const std::string& labels, const HistView& h) {
    const auto& counts = h.counts;
    uint64_t cumulative = 0;
    for (size_t i = 0; i < h.bounds->size(); ++i) {
        cumulative += counts[i];
        os << name << "_bucket{" << labels << ",le=\""
           << fmtBound((*h.bounds)[i]) << "\"} " << cumulative << "\n";
    }
    cumulative += counts.back();
    os << name << "_bucket{" << labels << ",le=\"+Inf\"} " << cumulative
       << "\n";
    os << name << "_sum{" << labels << "} " << h.sum << "\n";
    os << name << "_count{" << labels << "} " << cumulative << "\n";
}
}  // namespace

TentMetrics::TentMetrics() : impl_(std::make_unique<Impl>()) {}
TentMetrics::~TentMetrics() = default;

void TentMetrics::recordRequest(Op op, TransportType t, uint64_t bytes,
                                uint64_t latency_us, bool ok) {
    int o = static_cast<int>(op), s = slot(t);
    const size_t shard = currentShard();
    if (!ok) {
        impl_->failures[o][s].addAt(shard, 1);
        return;
    }
    impl_->latency[o][s]->observeAt(shard, latency_us);
    impl_->size[o][s]->observeAt(shard, bytes);
}

void TentMetrics::recordAttempt(Op op, TransportType t, uint64_t latency_us,
                                bool ok) {
    int o = static_cast<int>(op), s = slot(t);
    const size_t shard = currentShard();
    impl_->attempts[o][s].addAt(shard, 1);
    if (!ok) impl_->attempt_failures[o][s].addAt(shard, 1);
    impl_->attempt_latency[o][s]->observeAt(shard, latency_us);
}

void TentMetrics::recordStages(TransportType t, uint64_t dispatch_us,
                               uint64_t transport_us) {
    const int s = slot(t);
    const size_t shard = currentShard();
    impl_->stage_dispatch[s]->observeAt(shard, dispatch_us);
    impl_->stage_transport[s]->observeAt(shard, transport_us);
}

void TentMetrics::recordCompleted(Op op, TransportType t, uint64_t bytes,
                                  uint64_t latency_us, uint64_t dispatch_us,
                                  uint64_t transport_us, bool staged) {
    const int o = static_cast<int>(op), s = slot(t);
    const size_t shard = currentShard();
    Impl& m = *impl_;
    // Request, completed attempt, bytes and both counts all follow from
    // these four.
    m.completed_latency[o][s]->observeAt(shard, latency_us);
    m.size[o][s]->observeAt(shard, bytes);
    if (staged) {
        m.stage_dispatch[s]->observeAt(shard, dispatch_us);
        m.stage_transport[s]->observeAt(shard, transport_us);
    }
}

void TentMetrics::recordFailover(TransportType from, TransportType to) {
    impl_->failover[slot(from)][slot(to)].add(1);
}

uint64_t TentMetrics::total(Total kind, Op op, TransportType t) const {
    int o = static_cast<int>(op), s = slot(t);
    if (static_cast<int>(t) != s) return 0;
    switch (kind) {
        case Total::kBytes:
            return impl_->bytes(o, s);
        case Total::kRequests:
            return impl_->requests(o, s);
        default:
            return impl_->failures[o][s].value();
    }
}

std::string TentMetrics::renderPrometheus() const {
    std::ostringstream os;
    // Per-op counters with a transport label; only series that have seen
    // traffic are written, so a scrape stays short.
    const auto& m = *impl_;
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
                [&](int o, int t) { return m.failures[o][t].value(); }, op);
    }
    os << "# HELP tent_transport_failover_total Total cross-transport "
          "failover events\n# TYPE tent_transport_failover_total counter\n";
    for (int f = 0; f < kTransports; ++f)
        for (int t = 0; t < kTransports; ++t) {
            uint64_t v = m.failover[f][t].value();
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
                   [&](int o, int t) { return m.attemptCount(o, t); });
    attemptCounter(
        "tent_transport_attempt_failures_total",
        "Physical transport attempts that terminated with FAILED",
        [&](int o, int t) { return m.attempt_failures[o][t].value(); });
    auto histograms =
        [&](const std::string& name, const char* help,
            const std::vector<std::unique_ptr<ShardedHistogram>>* arr,
            const std::vector<std::unique_ptr<ShardedHistogram>>* plus,
            bool with_op) {
            os << "# HELP " << name << " " << help << "\n# TYPE " << name
               << " histogram\n";
            for (int op = 0; op < 2; ++op)
                for (int t = 0; t < kTransports; ++t) {
                    const HistView h =
                        viewOf(*arr[op][t], plus ? plus[op][t].get() : nullptr);
                    if (h.count() == 0) continue;
                    std::string labels =
                        std::string("transport=\"") +
                        transportLabel(static_cast<TransportType>(t)) + "\"";
                    if (with_op)
                        labels +=
                            std::string(",operation=\"") + opLabel(op) + "\"";
                    writeHistogram(os, name, labels, h);
                }
        };
    // Read and write histograms are separate metric families.
    for (int op = 0; op < 2; ++op) {
        std::string p = std::string("tent_") + opLabel(op);
        os << "# HELP " << p << "_latency_us " << opLabel(op)
           << " latency distribution in microseconds\n# TYPE " << p
           << "_latency_us histogram\n";
        for (int t = 0; t < kTransports; ++t) {
            const HistView h =
                viewOf(*m.latency[op][t], m.completed_latency[op][t].get());
            if (h.count() == 0) continue;
            writeHistogram(os, p + "_latency_us",
                           std::string("transport=\"") +
                               transportLabel(static_cast<TransportType>(t)) +
                               "\"",
                           h);
        }
        os << "# HELP " << p << "_size_bytes " << opLabel(op)
           << " request size distribution in bytes\n# TYPE " << p
           << "_size_bytes histogram\n";
        for (int t = 0; t < kTransports; ++t) {
            const HistView h = viewOf(*m.size[op][t]);
            if (h.count() == 0) continue;
            writeHistogram(os, p + "_size_bytes",
                           std::string("transport=\"") +
                               transportLabel(static_cast<TransportType>(t)) +
                               "\"",
                           h);
        }
    }
    auto stage = [&](const char* name, const char* help,
                     const std::vector<std::unique_ptr<ShardedHistogram>>& v) {
        os << "# HELP " << name << " " << help << "\n# TYPE " << name
           << " histogram\n";
        for (int t = 0; t < kTransports; ++t) {
            const HistView h = viewOf(*v[t]);
            if (h.count() == 0) continue;
            writeHistogram(os, name,
                           std::string("transport=\"") +
                               transportLabel(static_cast<TransportType>(t)) +
                               "\"",
                           h);
        }
    };
    stage("tent_stage_dispatch_us",
          "Submit to the transport accepting the request, in microseconds",
          m.stage_dispatch);
    stage("tent_stage_transport_us",
          "Transport accepting the request to its final status, in "
          "microseconds",
          m.stage_transport);
    histograms("tent_transport_attempt_latency_us",
               "Observed physical transport attempt latency in microseconds",
               m.attempt_latency, m.completed_latency, true);
    return os.str();
}

}  // namespace metrics
}  // namespace tent
}  // namespace mooncake
