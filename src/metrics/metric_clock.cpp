#include "metrics/metric_clock.h"

#include <chrono>
#include <fstream>
#include <mutex>
#include <string>

namespace mooncake {
namespace tent {
namespace metrics {

std::atomic<uint64_t> MetricClock::tsc_mult_{0};

namespace {

std::once_flag calibrated;

uint64_t steadyNs() {
    return static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(
            std::chrono::steady_clock::now().time_since_epoch())
            .count());
}

// The kernel keeps time by the counter only when it found it invariant
// and synchronised across CPUs (it falls back to another clocksource
// otherwise), so its choice is the test.
bool kernelClockIsTsc() {
    std::ifstream in(
        "/sys/devices/system/clocksource/clocksource0/"
        "current_clocksource");
    std::string name;
    return static_cast<bool>(in >> name) && name == "tsc";
}

#if defined(__x86_64__)
// The counter's rate against the steady clock over a millisecond, as
// 2^32 * microseconds per tick (0 if it did not advance).
uint64_t measureMult() {
    const uint64_t ns0 = steadyNs();
    const uint64_t tsc0 = __rdtsc();
    uint64_t ns1 = ns0;
    while (ns1 - ns0 < 1000000) ns1 = steadyNs();
    const uint64_t tsc1 = __rdtsc();
    if (tsc1 <= tsc0) return 0;
    const long double us_per_tick =
        static_cast<long double>(ns1 - ns0) / 1000.0L / (tsc1 - tsc0);
    return static_cast<uint64_t>(us_per_tick * 4294967296.0L);
}
#endif

}  // namespace

void MetricClock::calibrate() {
    std::call_once(calibrated, [] {
#if defined(__x86_64__)
        if (kernelClockIsTsc())
            tsc_mult_.store(measureMult(), std::memory_order_relaxed);
#endif
    });
}

bool MetricClock::usesTsc() {
    calibrate();
    return tsc_mult_.load(std::memory_order_relaxed) != 0;
}

uint64_t MetricClock::slowNowUs() {
    calibrate();
#if defined(__x86_64__)
    // Calibrated by this call: from now on every stamp is the counter's,
    // this one included, so stamps never mix the two sources.
    const uint64_t mult = tsc_mult_.load(std::memory_order_relaxed);
    if (mult != 0) return scale(__rdtsc(), mult);
#endif
    return steadyNs() / 1000;
}

}  // namespace metrics
}  // namespace tent
}  // namespace mooncake
