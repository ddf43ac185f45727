#include "tebench_report.h"

#include <json/json.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>

namespace mooncake::tent::bench {

double nearestRankPercentile(std::vector<double>& samples, double fraction) {
    if (samples.empty()) return 0;
    size_t rank = static_cast<size_t>(std::ceil(fraction * samples.size()));
    if (rank == 0) rank = 1;
    if (rank > samples.size()) rank = samples.size();
    std::nth_element(samples.begin(), samples.begin() + (rank - 1),
                     samples.end());
    return samples[rank - 1];
}

void Tally::add(const Tally& other) {
    bytes += other.bytes;
    request_latencies_us.insert(request_latencies_us.end(),
                                other.request_latencies_us.begin(),
                                other.request_latencies_us.end());
    first_batch_us = std::max(first_batch_us, other.first_batch_us);
    requests += other.requests;
    failed_requests += other.failed_requests;
    if (first_error.empty()) first_error = other.first_error;
}

CaseSummary summarizeCase(const CaseResult& result) {
    CaseSummary out;
    out.first_batch_us = result.first_batch_us;
    std::vector<double> lat = result.request_latencies_us;
    out.completed_requests = lat.size();
    if (result.elapsed_s > 0) {
        out.bw_gbps = result.bytes / result.elapsed_s / 1e9;
    }
    if (lat.empty()) return out;
    out.avg_lat_us = result.elapsed_s * 1e6 * result.num_threads /
                     static_cast<double>(lat.size());
    double sum = 0, inverse_sum = 0;
    for (double us : lat) {
        sum += us;
        // A request seen complete on the very poll that submitted it can
        // read 0 us; clamping keeps its instantaneous rate finite.
        inverse_sum += 1.0 / std::max(us, 1e-3);
    }
    out.avg_tx_us = sum / lat.size();
    // bytes per microsecond is 1e6 B/s, so / 1e3 gives GB/s.
    out.avg_inst_gbps = result.block_size * (inverse_sum / lat.size()) / 1e3;
    out.p99_tx_us = nearestRankPercentile(lat, 0.99);
    out.p999_tx_us = nearestRankPercentile(lat, 0.999);
    return out;
}

void printFirstTransfer(double latency_us, uint64_t block_size,
                        uint64_t batch_size, int threads) {
    std::printf(
        "First transfer: %.1f us (first batch of %llu x %llu bytes, %d "
        "thread(s); includes connection setup unless the transport "
        "connected at openSegment)\n",
        latency_us, static_cast<unsigned long long>(batch_size),
        static_cast<unsigned long long>(block_size), threads);
    std::fflush(stdout);
}

void printHeader() {
    std::printf("%14s %6s %8s %10s %14s %13s %12s %12s %13s %17s\n",
                "BlkSize (B)", "Batch", "Threads", "BW (GB/s)", "Avg Inst GB/s",
                "Avg Lat (us)", "Avg Tx (us)", "P99 Tx (us)", "P999 Tx (us)",
                "First Batch (us)");
    std::fflush(stdout);
}

void printFailovers(const CaseResult& result) {
    if (result.failovers == 0) return;
    std::printf(
        "Failovers in case block_size=%llu batch=%llu threads=%d: "
        "%llu\n",
        static_cast<unsigned long long>(result.block_size),
        static_cast<unsigned long long>(result.batch_size), result.num_threads,
        static_cast<unsigned long long>(result.failovers));
}

void printRow(const CaseResult& result) {
    CaseSummary s = summarizeCase(result);
    std::printf(
        "%14llu %6llu %8d %10.3f %14.3f %13.1f %12.1f %12.1f %13.1f %17.1f\n",
        static_cast<unsigned long long>(result.block_size),
        static_cast<unsigned long long>(result.batch_size), result.num_threads,
        s.bw_gbps, s.avg_inst_gbps, s.avg_lat_us, s.avg_tx_us, s.p99_tx_us,
        s.p999_tx_us, s.first_batch_us);
    printFailovers(result);
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
    printFailovers(result);
    std::fflush(stdout);
}

namespace {

Json::Value rowJson(const RunInfo& run, const CaseResult& result) {
    CaseSummary s = summarizeCase(result);
    Json::Value row;
    row["block_size"] = Json::UInt64(result.block_size);
    row["batch_size"] = Json::UInt64(result.batch_size);
    row["threads"] = result.num_threads;
    row["op"] = run.op;
    row["transport"] = run.transport;
    row["bw_gbps"] = s.bw_gbps;
    row["avg_inst_gbps"] = s.avg_inst_gbps;
    row["avg_lat_us"] = s.avg_lat_us;
    row["avg_tx_us"] = s.avg_tx_us;
    row["p99_tx_us"] = s.p99_tx_us;
    row["p999_tx_us"] = s.p999_tx_us;
    row["first_batch_us"] = s.first_batch_us;
    if (result.failovers != 0)
        row["failovers"] = Json::UInt64(result.failovers);
    row["completed_requests"] = Json::UInt64(s.completed_requests);
    row["elapsed_s"] = result.elapsed_s;
    if (!result.ok()) {
        row["failed"] = true;
        row["failed_requests"] = Json::UInt64(result.failed_requests);
        row["error"] = result.first_error;
    }
    return row;
}

}  // namespace

Status writeJsonReport(const std::string& path, const RunInfo& run,
                       const std::vector<CaseResult>& rows) {
    Json::Value root;
    Json::Value& info = root["run"];
    info["local_segment"] = run.local_segment;
    info["target_segment"] = run.target_segment;
    info["op"] = run.op;
    info["transport"] = run.transport;
    info["xport_type"] = run.xport_type;
    info["transport_hint"] = run.transport_hint;
    info["duration_s"] = run.duration_s;
    info["warmup_duration_s"] = run.warmup_duration_s;
    info["check_consistency"] = run.check_consistency;
    info["poll_yields"] = Json::UInt64(run.poll_yields);
    info["poll_sleep_us"] = Json::UInt64(run.poll_sleep_us);
    root["first_transfer_us"] = run.first_transfer_us;
    root["rows"] = Json::Value(Json::arrayValue);
    for (const CaseResult& r : rows) root["rows"].append(rowJson(run, r));
    root["ok"] = run.error.empty();
    if (!run.error.empty()) root["error"] = run.error;

    std::ofstream out(path, std::ios::trunc);
    if (!out) {
        return Status::InvalidArgument("cannot write --json_out=" + path +
                                       ": " + std::strerror(errno));
    }
    Json::StreamWriterBuilder builder;
    builder["indentation"] = "  ";
    // Six significant digits: the figures are measurements, and binary
    // noise in the last places only makes the file harder to read.
    builder["precision"] = 6;
    std::unique_ptr<Json::StreamWriter> writer(builder.newStreamWriter());
    writer->write(root, &out);
    out << "\n";
    out.flush();
    if (!out) {
        return Status::InternalError("writing --json_out=" + path + " failed");
    }
    return Status::OK();
}

}  // namespace mooncake::tent::bench
