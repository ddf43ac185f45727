// tebench: per-case results and the table printed on stdout.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace mooncake::tent::bench {

struct CaseResult {
    uint64_t block_size = 0;
    uint64_t batch_size = 0;
    int num_threads = 0;
    // Payload bytes of completed requests (a consistency round trip counts
    // its write and its read).
    uint64_t bytes = 0;
    double elapsed_s = 0;
    // Submit-to-completion time of every batch, microseconds.
    std::vector<double> batch_latencies_us;
    uint64_t requests = 0;
    uint64_t failed_requests = 0;
    // The first failure or consistency mismatch, naming the block.
    std::string first_error;

    bool ok() const { return failed_requests == 0 && first_error.empty(); }
};

struct LatencySummary {
    double average_us = 0;
    double p99_us = 0;
};
// Nearest-rank p99; zeros for an empty sample.
LatencySummary summarizeLatency(std::vector<double> samples_us);

// GB/s with GB = 1e9 bytes.
double bandwidthGBps(const CaseResult& result);

void printHeader();
void printRow(const CaseResult& result);
// The failure report: count, total and the first error.
void printFailure(const CaseResult& result);

}  // namespace mooncake::tent::bench
