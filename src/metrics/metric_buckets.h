// The histogram bounds of the TENT metric set (upstream's, in microseconds
// and bytes) and the bucket of a value under each. The bounds are
// compile-time constants, so each has a bucket table built at compile
// time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iterator>

namespace mooncake {
namespace tent {
namespace metrics {

// Request and attempt latency (µs).
constexpr uint64_t kLatencyBounds[] = {100,   500,    1000,   5000,   10000,
                                       50000, 100000, 500000, 1000000};
// Request size (bytes): 1 KiB to 1 GiB, powers of four.
constexpr uint64_t kSizeBounds[] = {1024,     4096,      16384,     65536,
                                    262144,   1048576,   4194304,   16777216,
                                    67108864, 268435456, 1073741824};
// Stage latency (µs): 10 µs to 500 ms.
constexpr uint64_t kStageBounds[] = {10,   50,    100,   500,    1000,
                                     5000, 10000, 50000, 100000, 500000};

constexpr size_t kLatencyBucketCount = std::size(kLatencyBounds) + 1;
constexpr size_t kSizeBucketCount = std::size(kSizeBounds) + 1;
constexpr size_t kStageBucketCount = std::size(kStageBounds) + 1;

// The bucket of a value (the index of the first bound >= value, the bound
// count for +Inf) in a few instructions and no loop: consecutive bounds at
// least double, so a power-of-two interval [2^(w-1), 2^w) holds at most
// one bound. The value's bit width w then gives the bounds wholly below it
// and the one bound it must still be compared with.
template <const uint64_t* Bounds, size_t N>
class BucketTable {
 public:
    static size_t of(uint64_t value) {
        // Indexed by the leading zero count, 64 - w: one bit scan and two
        // loads. v | 1: 0 and 1 share width 1, and no bound is below 1.
        const unsigned z = __builtin_clzll(value | 1);
        return size_t{kTable.below[z]} + size_t{value > kTable.inside[z]};
    }

 private:
    // Entry z is for the values of width w = 64 - z, [2^(w-1), 2^w).
    struct Table {
        uint8_t below[64];    // bounds < 2^(w-1)
        uint64_t inside[64];  // the bound in [2^(w-1), 2^w), or none (max)
    };
    static constexpr bool valid() {
        if (N == 0 || N > 255 || Bounds[0] == 0) return false;
        for (size_t i = 1; i < N; ++i)
            if (Bounds[i] / 2 < Bounds[i - 1]) return false;
        return true;
    }
    static_assert(valid(),
                  "bounds must start at 1 or more and at least double");
    static constexpr Table build() {
        Table t{};
        for (unsigned z = 0; z < 64; ++z) {
            const unsigned w = 64 - z;
            const uint64_t low = uint64_t{1} << (w - 1);
            t.inside[z] = ~uint64_t{0};
            for (size_t i = 0; i < N; ++i) {
                if (Bounds[i] < low) ++t.below[z];
                if (Bounds[i] >= low && (w == 64 || Bounds[i] < low * 2))
                    t.inside[z] = Bounds[i];
            }
        }
        return t;
    }
    static constexpr Table kTable = build();
};

inline size_t latencyBucket(uint64_t us) {
    return BucketTable<kLatencyBounds, std::size(kLatencyBounds)>::of(us);
}
inline size_t stageBucket(uint64_t us) {
    return BucketTable<kStageBounds, std::size(kStageBounds)>::of(us);
}
inline size_t sizeBucket(uint64_t bytes) {
    return BucketTable<kSizeBounds, std::size(kSizeBounds)>::of(bytes);
}

}  // namespace metrics
}  // namespace tent
}  // namespace mooncake
