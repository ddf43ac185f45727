// Sharded counters and histograms for the metrics registry. The data path
// only touches the calling thread's shard with relaxed atomics, so no lock
// and no shared cache line is contended; a scrape sums the shards.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace mooncake {
namespace tent {
namespace metrics {

// Shard count is a power of two so a thread's slot is a mask, not a modulo.
constexpr size_t kMetricShards = 16;

// Index of the calling thread's shard, fixed for the thread's lifetime.
size_t currentShard();

class ShardedCounter {
 public:
    void add(uint64_t n) { addAt(currentShard(), n); }
    // For a caller that records several series at once and looked its
    // shard up once.
    void addAt(size_t shard, uint64_t n) {
        shards_[shard].v.fetch_add(n, std::memory_order_relaxed);
    }
    uint64_t value() const;

 private:
    // One cache line per shard so two threads never share a line.
    struct alignas(64) Slot {
        std::atomic<uint64_t> v{0};
    };
    Slot shards_[kMetricShards];
};

// Prometheus histogram: cumulative buckets with "le" upper bounds, plus
// _sum and _count. Bounds are fixed at construction.
class ShardedHistogram {
 public:
    explicit ShardedHistogram(std::vector<double> bounds);
    void observe(uint64_t value) { observeAt(currentShard(), value); }
    void observeAt(size_t shard, uint64_t value);
    const std::vector<double>& bounds() const { return bounds_; }
    // Non-cumulative count per bucket; the last entry is the +Inf bucket.
    std::vector<uint64_t> bucketCounts() const;
    uint64_t sum() const { return sum_.value(); }
    // The sum of the buckets: an observation pays for no count of its own.
    uint64_t count() const;

 private:
    void detectPow2Layout();
    std::vector<double> bounds_;
    // The bounds as integers, for the data path's scan: every bound in use
    // is a whole number of microseconds or bytes.
    std::vector<uint64_t> int_bounds_;
    // Set when the bounds are 2^k, 2^(k+r), 2^(k+2r), ... with r 1 or 2
    // (the size buckets): the bucket is then a bit-scan, not a scan.
    bool pow2_layout_ = false;
    unsigned pow2_first_ = 0;              // k
    unsigned pow2_step_ = 0;               // r - 1, a shift: r is 1 or 2
    std::vector<ShardedCounter> buckets_;  // bounds_.size() + 1
    ShardedCounter sum_;
};

// Inline: a completed request observes six histograms, and the call and
// its reloads of the members cost as much as the bucket search.
inline void ShardedHistogram::observeAt(size_t shard, uint64_t value) {
    // Linear scan: at most a dozen bounds, cheaper than a binary search's
    // mispredicted branches at this size.
    const uint64_t* bound = int_bounds_.data();
    const size_t n = int_bounds_.size();
    size_t i = 0;
    if (pow2_layout_) {
        if (value > bound[0]) {
            // value > 2^k: its bucket is the first bound 2^(k+i*r) >= value,
            // i = ceil((ceil(log2(value)) - k) / r), ceil(log2(v)) being
            // the bit width of v - 1.
            const unsigned width = 64 - __builtin_clzll(value - 1);
            i = (width - pow2_first_ + pow2_step_) >> pow2_step_;
            if (i > n) i = n;
        }
    } else {
        while (i < n && value > bound[i]) ++i;
    }
    buckets_[i].addAt(shard, 1);
    sum_.addAt(shard, value);
}

}  // namespace metrics
}  // namespace tent
}  // namespace mooncake
