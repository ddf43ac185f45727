#include "metrics/sharded_counter.h"

#include <thread>

namespace mooncake {
namespace tent {
namespace metrics {

namespace {
// The default TLS model: libtent is loaded by dlopen() from Python, where
// an initial-exec block does not fit ("cannot allocate memory in static
// TLS block"). Constant initialised, so no guard; kMetricShards means "not
// yet assigned".
thread_local size_t tls_shard = kMetricShards;
std::atomic<size_t> next_shard{0};
}  // namespace

size_t currentShard() {
    size_t shard = tls_shard;
    if (__builtin_expect(shard == kMetricShards, 0)) {
        // Assigned round-robin on a thread's first use: hashing thread ids
        // can pile several busy threads onto one shard.
        shard = next_shard.fetch_add(1, std::memory_order_relaxed) &
                (kMetricShards - 1);
        tls_shard = shard;
    }
    return shard;
}

uint64_t ShardedCounter::value() const {
    uint64_t total = 0;
    for (const auto& s : shards_) total += s.v.load(std::memory_order_relaxed);
    return total;
}

ShardedHistogram::ShardedHistogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), buckets_(bounds_.size() + 1) {
    for (double b : bounds_) int_bounds_.push_back(static_cast<uint64_t>(b));
    detectPow2Layout();
}

void ShardedHistogram::detectPow2Layout() {
    const size_t n = int_bounds_.size();
    if (n < 2) return;
    auto isPow2 = [](uint64_t v) { return v != 0 && (v & (v - 1)) == 0; };
    for (uint64_t b : int_bounds_)
        if (!isPow2(b)) return;
    const unsigned first = __builtin_ctzll(int_bounds_[0]);
    const unsigned step = __builtin_ctzll(int_bounds_[1]) - first;
    if (step != 1 && step != 2) return;
    for (size_t i = 0; i < n; ++i) {
        const size_t exp = first + i * step;
        if (exp > 63 || int_bounds_[i] != (uint64_t{1} << exp) ||
            bounds_[i] != static_cast<double>(int_bounds_[i]))
            return;
    }
    pow2_first_ = first;
    pow2_step_ = step - 1;
    pow2_layout_ = true;
}

uint64_t ShardedHistogram::count() const {
    uint64_t total = 0;
    for (const auto& b : buckets_) total += b.value();
    return total;
}

std::vector<uint64_t> ShardedHistogram::bucketCounts() const {
    std::vector<uint64_t> out;
    out.reserve(buckets_.size());
    for (const auto& b : buckets_) out.push_back(b.value());
    return out;
}

}  // namespace metrics
}  // namespace tent
}  // namespace mooncake
