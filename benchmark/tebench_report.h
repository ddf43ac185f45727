// tebench: per-case results, the table printed on stdout and the
// --json_out file.
//
// Every figure is per request (one Request in a batch), not per batch, in
// upstream TENT tebench's columns. Each thread's first batch of a case is a
// warm-up: it is reported apart (first_batch_us) and kept out of the
// steady-state columns, so a connection set up inline on the first request
// shows there instead of inflating the averages.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "tent/common/status.h"

namespace mooncake::tent::bench {

// What a worker thread counts, and what a case sums over its threads.
struct Tally {
    // Payload bytes of the requests completed in the steady-state window (a
    // consistency round trip counts its write and its read).
    uint64_t bytes = 0;
    // Submit-to-completion time of every steady-state request that
    // completed, microseconds. A request's completion is when a poll first
    // saw it COMPLETED.
    std::vector<double> request_latencies_us;
    // The slowest first batch, submit to last completion.
    double first_batch_us = 0;
    // Every request issued, first batches included; failures are counted
    // whenever they happen.
    uint64_t requests = 0;
    uint64_t failed_requests = 0;
    // The first failure or consistency mismatch, naming the block.
    std::string first_error;

    // Sums `other` into this one: counts and latencies add up, the slowest
    // first batch wins, the first error recorded is kept.
    void add(const Tally& other);
};

struct CaseResult : Tally {
    uint64_t block_size = 0;
    uint64_t batch_size = 0;
    int num_threads = 0;
    // The steady-state window: from the moment every thread finished its
    // first batch to the moment the last one finished its last batch.
    double elapsed_s = 0;
    // Tasks the engine failed over to another transport during the case
    // (docs/failover.md); printed, and in the JSON row, only when not 0.
    uint64_t failovers = 0;

    bool ok() const { return failed_requests == 0 && first_error.empty(); }
};

// The columns of one row.
struct CaseSummary {
    // Steady-state payload bytes / window, GB = 1e9 bytes.
    double bw_gbps = 0;
    // Mean over requests of block_size / that request's latency.
    double avg_inst_gbps = 0;
    // Window x threads / completed requests: the wall-clock time a thread
    // spends per request, gaps between batches included.
    double avg_lat_us = 0;
    // Mean, p99 and p99.9 (nearest rank) of the request latencies.
    double avg_tx_us = 0;
    double p99_tx_us = 0;
    double p999_tx_us = 0;
    double first_batch_us = 0;
    uint64_t completed_requests = 0;
};
CaseSummary summarizeCase(const CaseResult& result);

// Nearest rank: the smallest sample with at least `fraction` of the samples
// at or below it; 0 for an empty sample. Reorders `samples`.
double nearestRankPercentile(std::vector<double>& samples, double fraction);

// "First transfer: ..." line, printed before the table: the slowest
// thread's first batch of the first case, the run's first transfers, which
// pay for connection setup unless the transport connected when the segment
// was opened.
void printFirstTransfer(double latency_us, uint64_t block_size,
                        uint64_t batch_size, int threads);
void printHeader();
void printRow(const CaseResult& result);
// "Failovers in case ...: N", after the row, when the case had any.
void printFailovers(const CaseResult& result);
// The failure report: count, total and the first error.
void printFailure(const CaseResult& result);

// What --json_out records besides the rows.
struct RunInfo {
    std::string local_segment;
    std::string target_segment;
    std::string op;
    // The transport the requests ask for: the hint if one is given, else
    // --xport_type; "unspec" when neither narrows it.
    std::string transport;
    std::string xport_type;
    std::string transport_hint;
    double duration_s = 0;
    double warmup_duration_s = 0;
    bool check_consistency = false;
    uint64_t poll_yields = 0;
    uint64_t poll_sleep_us = 0;
    // The first case's first_batch_us: the run's first transfers.
    double first_transfer_us = 0;
    // Empty when every case passed.
    std::string error;
};

// Writes {"run": {...}, "rows": [...], "ok": bool} to `path` (replacing
// it). Failed cases are written too, with "failed": true.
Status writeJsonReport(const std::string& path, const RunInfo& run,
                       const std::vector<CaseResult>& rows);

}  // namespace mooncake::tent::bench
