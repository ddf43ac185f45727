#include "tebench_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>

namespace mooncake::tent::bench {

LatencySummary summarizeLatency(std::vector<double> samples_us) {
    LatencySummary out;
    if (samples_us.empty()) return out;
    double sum = std::accumulate(samples_us.begin(), samples_us.end(), 0.0);
    out.average_us = sum / samples_us.size();
    // Nearest rank: the smallest sample with at least 99% of the samples at
    // or below it.
    size_t rank = static_cast<size_t>(std::ceil(0.99 * samples_us.size()));
    if (rank == 0) rank = 1;
    std::nth_element(samples_us.begin(), samples_us.begin() + (rank - 1),
                     samples_us.end());
    out.p99_us = samples_us[rank - 1];
    return out;
}

double bandwidthGBps(const CaseResult& result) {
    if (result.elapsed_s <= 0) return 0;
    return result.bytes / result.elapsed_s / 1e9;
}

void printHeader() {
    std::printf("%14s %8s %8s %12s %14s %14s\n", "block_size(B)", "batch",
                "threads", "BW(GB/s)", "avg_lat(us)", "p99_lat(us)");
    std::fflush(stdout);
}

void printRow(const CaseResult& result) {
    LatencySummary lat = summarizeLatency(result.batch_latencies_us);
    std::printf("%14llu %8llu %8d %12.3f %14.1f %14.1f\n",
                static_cast<unsigned long long>(result.block_size),
                static_cast<unsigned long long>(result.batch_size),
                result.num_threads, bandwidthGBps(result), lat.average_us,
                lat.p99_us);
    std::fflush(stdout);
}

void printFailure(const CaseResult& result) {
    std::printf(
        "FAILED case block_size=%llu batch=%llu threads=%d: %llu of %llu "
        "transfers failed; first error: %s\n",
        static_cast<unsigned long long>(result.block_size),
        static_cast<unsigned long long>(result.batch_size), result.num_threads,
        static_cast<unsigned long long>(result.failed_requests),
        static_cast<unsigned long long>(result.requests),
        result.first_error.empty() ? "(none recorded)"
                                   : result.first_error.c_str());
    std::fflush(stdout);
}

}  // namespace mooncake::tent::bench
