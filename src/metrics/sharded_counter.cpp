#include "metrics/sharded_counter.h"

#include <thread>

namespace mooncake {
namespace tent {
namespace metrics {

size_t currentShard() {
    // Assigned round-robin on a thread's first use: hashing thread ids can
    // pile several busy threads onto one shard.
    static std::atomic<size_t> next{0};
    thread_local size_t shard =
        next.fetch_add(1, std::memory_order_relaxed) & (kMetricShards - 1);
    return shard;
}

uint64_t ShardedCounter::value() const {
    uint64_t total = 0;
    for (const auto& s : shards_) total += s.v.load(std::memory_order_relaxed);
    return total;
}

ShardedHistogram::ShardedHistogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), buckets_(bounds_.size() + 1) {}

void ShardedHistogram::observe(uint64_t value) {
    // Linear scan: at most a dozen bounds, cheaper than a binary search's
    // mispredicted branches at this size.
    size_t i = 0;
    while (i < bounds_.size() && static_cast<double>(value) > bounds_[i]) ++i;
    buckets_[i].add(1);
    sum_.add(value);
    count_.add(1);
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
