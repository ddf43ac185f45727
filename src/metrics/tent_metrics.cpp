#include "metrics/tent_metrics.h"

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
    // [op][transport]
    ShardedCounter bytes[2][kTransports];
    ShardedCounter requests[2][kTransports];
    ShardedCounter failures[2][kTransports];
    ShardedCounter attempts[2][kTransports];
    ShardedCounter attempt_failures[2][kTransports];
    ShardedCounter failover[kTransports][kTransports];
    std::vector<std::unique_ptr<ShardedHistogram>> latency[2];
    std::vector<std::unique_ptr<ShardedHistogram>> size[2];
    std::vector<std::unique_ptr<ShardedHistogram>> attempt_latency[2];
    std::vector<std::unique_ptr<ShardedHistogram>> stage_dispatch;
    std::vector<std::unique_ptr<ShardedHistogram>> stage_transport;

    Impl() {
        for (int op = 0; op < 2; ++op) {
            latency[op] = makeHistograms(kTransports, kLatencyBuckets);
            size[op] = makeHistograms(kTransports, kSizeBuckets);
            attempt_latency[op] = makeHistograms(kTransports, kLatencyBuckets);
        }
        stage_dispatch = makeHistograms(kTransports, kStageBuckets);
        stage_transport = makeHistograms(kTransports, kStageBuckets);
    }
};

namespace {
// Out-of-range enum values land under "unspec" instead of indexing out of
// bounds.
int slot(TransportType t) {
    int i = static_cast<int>(t);
    return (i >= 0 && i < kTransports) ? i : 0;
}

void writeHistogram(std::ostringstream& os, const std::string& name,
                    const std::string& labels, const ShardedHistogram& h) {
    auto counts = h.bucketCounts();
    uint64_t cumulative = 0;
    for (size_t i = 0; i < h.bounds().size(); ++i) {
        cumulative += counts[i];
        os << name << "_bucket{" << labels << ",le=\""
           << fmtBound(h.bounds()[i]) << "\"} " << cumulative << "\n";
    }
    cumulative += counts.back();
    os << name << "_bucket{" << labels << ",le=\"+Inf\"} " << cumulative
       << "\n";
    os << name << "_sum{" << labels << "} " << h.sum() << "\n";
    os << name << "_count{" << labels << "} " << cumulative << "\n";
}
}  // namespace

TentMetrics::TentMetrics() : impl_(std::make_unique<Impl>()) {}
TentMetrics::~TentMetrics() = default;

void TentMetrics::recordRequest(Op op, TransportType t, uint64_t bytes,
                                uint64_t latency_us, bool ok) {
    int o = static_cast<int>(op), s = slot(t);
    const size_t shard = currentShard();
    impl_->requests[o][s].addAt(shard, 1);
    if (!ok) {
        impl_->failures[o][s].addAt(shard, 1);
        return;
    }
    impl_->bytes[o][s].addAt(shard, bytes);
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
    m.attempts[o][s].addAt(shard, 1);
    m.attempt_latency[o][s]->observeAt(shard, latency_us);
    if (staged) {
        m.stage_dispatch[s]->observeAt(shard, dispatch_us);
        m.stage_transport[s]->observeAt(shard, transport_us);
    }
    m.requests[o][s].addAt(shard, 1);
    m.bytes[o][s].addAt(shard, bytes);
    m.latency[o][s]->observeAt(shard, latency_us);
    m.size[o][s]->observeAt(shard, bytes);
}

void TentMetrics::recordFailover(TransportType from, TransportType to) {
    impl_->failover[slot(from)][slot(to)].add(1);
}

uint64_t TentMetrics::total(Total kind, Op op, TransportType t) const {
    int o = static_cast<int>(op), s = slot(t);
    if (static_cast<int>(t) != s) return 0;
    switch (kind) {
        case Total::kBytes:
            return impl_->bytes[o][s].value();
        case Total::kRequests:
            return impl_->requests[o][s].value();
        default:
            return impl_->failures[o][s].value();
    }
}

std::string TentMetrics::renderPrometheus() const {
    std::ostringstream os;
    // Per-op counters with a transport label; only series that have seen
    // traffic are written, so a scrape stays short.
    auto counter = [&](const char* name, const char* help,
                       const ShardedCounter(*arr)[kTransports], int op) {
        os << "# HELP " << name << " " << help << "\n";
        os << "# TYPE " << name << " counter\n";
        for (int t = 0; t < kTransports; ++t) {
            uint64_t v = arr[op][t].value();
            if (v == 0) continue;
            os << name << "{transport=\""
               << transportLabel(static_cast<TransportType>(t)) << "\"} " << v
               << "\n";
        }
    };
    const auto& m = *impl_;
    for (int op = 0; op < 2; ++op) {
        std::string p = std::string("tent_") + opLabel(op);
        counter((p + "_bytes_total").c_str(), "Total bytes moved via TENT",
                m.bytes, op);
        counter((p + "_requests_total").c_str(), "Total requests via TENT",
                m.requests, op);
        counter((p + "_failures_total").c_str(), "Total failures via TENT",
                m.failures, op);
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
                              const ShardedCounter(*arr)[kTransports]) {
        os << "# HELP " << name << " " << help << "\n# TYPE " << name
           << " counter\n";
        for (int op = 0; op < 2; ++op)
            for (int t = 0; t < kTransports; ++t) {
                uint64_t v = arr[op][t].value();
                if (v == 0) continue;
                os << name << "{transport=\""
                   << transportLabel(static_cast<TransportType>(t))
                   << "\",operation=\"" << opLabel(op) << "\"} " << v << "\n";
            }
    };
    attemptCounter("tent_transport_attempts_total",
                   "Total physical transport attempts submitted for execution",
                   m.attempts);
    attemptCounter("tent_transport_attempt_failures_total",
                   "Physical transport attempts that terminated with FAILED",
                   m.attempt_failures);
    auto histograms =
        [&](const std::string& name, const char* help,
            const std::vector<std::unique_ptr<ShardedHistogram>>* arr,
            bool with_op) {
            os << "# HELP " << name << " " << help << "\n# TYPE " << name
               << " histogram\n";
            for (int op = 0; op < 2; ++op)
                for (int t = 0; t < kTransports; ++t) {
                    const auto& h = *arr[op][t];
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
            const auto& h = *m.latency[op][t];
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
            const auto& h = *m.size[op][t];
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
            if (v[t]->count() == 0) continue;
            writeHistogram(os, name,
                           std::string("transport=\"") +
                               transportLabel(static_cast<TransportType>(t)) +
                               "\"",
                           *v[t]);
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
               m.attempt_latency, true);
    return os.str();
}

}  // namespace metrics
}  // namespace tent
}  // namespace mooncake
