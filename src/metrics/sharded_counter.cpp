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
}

void ShardedHistogram::observeAt(size_t shard, uint64_t value) {
    // Linear scan: at most a dozen bounds, cheaper than a binary search's
    // mispredicted branches at this size.
    const uint64_t* bound = int_bounds_.data();
    const size_t n = int_bounds_.size();
    size_t i = 0;
    while (i < n && value > bound[i]) ++i;
    buckets_[i].addAt(shard, 1);
    sum_.addAt(shard, value);
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
