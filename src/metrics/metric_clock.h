// The metrics' microsecond clock. Where the kernel keeps time by the CPU's
// time-stamp counter (it then holds the counter invariant and in step
// across CPUs), a stamp is that counter scaled by a factor measured once
// against the steady clock: a few instructions and no call, where
// steady_clock::now() is a library call into the vDSO (every completed
// request reads a stamp). Elsewhere it is the steady clock. Stamps are
// only compared with each other: their epoch is not the steady clock's.
#pragma once

#include <atomic>
#include <cstdint>

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

namespace mooncake {
namespace tent {
namespace metrics {

// The span from stamp `then` to stamp `now`: a stamp taken by another
// thread a moment earlier may read later, so such a span is 0, never a
// wrapped-around huge value.
inline uint64_t spanUs(uint64_t now, uint64_t then) {
    return now > then ? now - then : 0;
}

class MetricClock {
 public:
    static uint64_t nowUs() {
        uint64_t us;
        return __builtin_expect(fastNowUs(us), 1) ? us : slowNowUs();
    }

    // The counter-based stamp, without a call; false where a stamp needs
    // nowUs()'s slow path (not calibrated yet, or no counter in use).
    static bool fastNowUs(uint64_t& us) {
#if defined(__x86_64__)
        const uint64_t mult = tsc_mult_.load(std::memory_order_relaxed);
        if (__builtin_expect(mult != 0, 1)) {
            us = scale(__rdtsc(), mult);
            return true;
        }
#endif
        return false;
    }

    // Decides the source (and measures the counter's rate) now rather than
    // on the first stamp; the first call takes about a millisecond.
    static void calibrate();
    // Whether stamps come from the time-stamp counter (tests).
    static bool usesTsc();

 private:
    // Microseconds = counter * mult / 2^32.
    static uint64_t scale(uint64_t tsc, uint64_t mult) {
        return static_cast<uint64_t>(
            (static_cast<unsigned __int128>(tsc) * mult) >> 32);
    }
    // Calibrates on first use; the steady clock where the counter is not
    // used.
    static uint64_t slowNowUs();
    // 0 until calibrated, and for good where the counter is not used.
    static std::atomic<uint64_t> tsc_mult_;
};

}  // namespace metrics
}  // namespace tent
}  // namespace mooncake
