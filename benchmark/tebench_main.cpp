// tebench: the TENT transfer benchmark.
//
// Empty --target_seg_name: target. Allocates and registers buffers, prints
// "Target segment: <name>" and serves until SIGINT/SIGTERM.
// Otherwise: initiator. Opens the target, sweeps (block, batch, threads)
// cases and prints one row per case. Any failed transfer or consistency
// mismatch ends the run with a non-zero exit status.
#include <gflags/gflags.h>
#include <glog/logging.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "tebench_memory.h"
#include "tebench_options.h"
#include "tebench_report.h"
#include "tebench_worker.h"
#include "tent/transfer_engine.h"

// Lets a scraper (tests/metrics/prometheus_scrape_test.sh) read the
// engine's final metrics before the initiator's engine goes away.
DEFINE_double(linger_s, 0,
              "Seconds the initiator keeps its engine up after the run, "
              "0 to 600.");

namespace mooncake::tent::bench {
namespace {

// Engine teardown after a failure runs against a dead or misbehaving peer;
// it must not turn "exits non-zero within seconds" into a hang.
constexpr int kTeardownWatchdogSeconds = 10;

void armTeardownWatchdog() {
    std::thread([] {
        std::this_thread::sleep_for(
            std::chrono::seconds(kTeardownWatchdogSeconds));
        std::fprintf(stderr,
                     "tebench: engine teardown did not finish within %d s "
                     "after the failure; exiting\n",
                     kTeardownWatchdogSeconds);
        std::fflush(stdout);
        std::_Exit(1);
    }).detach();
}

std::string describeBuffers(const std::vector<LocalBuffer>& buffers) {
    std::string out;
    for (const LocalBuffer& b : buffers) {
        if (!out.empty()) out += ", ";
        char buf[96];
        std::snprintf(buf, sizeof(buf), "%s %zu bytes at %p",
                      b.location.c_str(), b.length, b.addr);
        out += buf;
    }
    return out;
}

int runTarget(TransferEngine& engine, const BenchOptions& options,
              const sigset_t& stop_signals) {
    std::vector<LocalBuffer> buffers;
    Status s = allocateBuffers(engine, options, buffers);
    if (!s.ok()) {
        std::fprintf(stderr, "tebench: %s\n", s.ToString().c_str());
        return 1;
    }
    LOG(INFO) << "Target buffers: " << describeBuffers(buffers);
    // The initiator (and scripts) wait for this exact line.
    std::printf("Target segment: %s\n", engine.getSegmentName().c_str());
    std::fflush(stdout);

    int sig = 0;
    uint64_t notifications = 0;
    if (options.notifi) {
        // Drains the inbox every millisecond. A burst that still meets
        // notification/max_pending_per_peer in between is not lost: the
        // initiator's engine asks again until rpc/timeout_ms.
        std::vector<Notification> received;
        const timespec tick{0, 1000 * 1000};
        while ((sig = sigtimedwait(&stop_signals, nullptr, &tick)) < 0) {
            engine.receiveNotification(received);
            notifications += received.size();
        }
        engine.receiveNotification(received);
        notifications += received.size();
    } else {
        sigwait(&stop_signals, &sig);
    }
    std::printf("Received signal %d, shutting down\n", sig);
    if (options.notifi) {
        std::printf("Notifications received: %llu\n",
                    static_cast<unsigned long long>(notifications));
    }
    std::fflush(stdout);
    releaseBuffers(engine, buffers);
    return 0;
}

RunInfo describeRun(TransferEngine& engine, const BenchOptions& options) {
    RunInfo run;
    run.local_segment = engine.getSegmentName();
    run.target_segment = options.target_seg_name;
    run.op = opTypeName(options.op_type);
    run.xport_type = transportTypeName(options.xport_type);
    run.transport_hint = transportTypeName(options.transport_hint);
    run.transport =
        options.transport_hint != UNSPEC ? run.transport_hint : run.xport_type;
    run.duration_s = options.duration_s;
    run.warmup_duration_s = options.warmup_duration_s;
    run.check_consistency = options.check_consistency;
    run.poll_yields = options.poll_yields;
    run.poll_sleep_us = options.poll_sleep_us;
    return run;
}

int runInitiator(TransferEngine& engine, const BenchOptions& options) {
    RemoteTarget remote;
    Status s = engine.openSegment(remote.id, options.target_seg_name);
    if (!s.ok()) {
        std::fprintf(stderr, "tebench: cannot open target segment %s: %s\n",
                     options.target_seg_name.c_str(), s.ToString().c_str());
        return 1;
    }
    SegmentInfo info;
    s = engine.getSegmentInfo(remote.id, info);
    if (!s.ok()) {
        std::fprintf(stderr, "tebench: getSegmentInfo(%s): %s\n",
                     options.target_seg_name.c_str(), s.ToString().c_str());
        return 1;
    }
    remote.buffers = info.buffers;

    std::vector<LocalBuffer> local;
    s = allocateBuffers(engine, options, local);
    if (!s.ok()) {
        std::fprintf(stderr, "tebench: %s\n", s.ToString().c_str());
        return 1;
    }
    s = checkCapacity(options, local, remote);
    if (!s.ok()) {
        std::fprintf(stderr, "tebench: %s\n", s.ToString().c_str());
        releaseBuffers(engine, local);
        return 1;
    }
    LOG(INFO) << "Local buffers: " << describeBuffers(local);
    std::printf("tebench: %s -> %s, op_type=%s, transport_hint=%s%s\n",
                engine.getSegmentName().c_str(),
                options.target_seg_name.c_str(), opTypeName(options.op_type),
                transportTypeName(options.transport_hint),
                options.check_consistency ? ", check_consistency" : "");

    RunInfo run = describeRun(engine, options);
    std::vector<CaseResult> rows;
    // Every exit after this point leaves --json_out describing what ran.
    auto fail = [&](const std::string& error) {
        run.error = error;
        if (!options.json_out.empty()) {
            Status w = writeJsonReport(options.json_out, run, rows);
            if (!w.ok())
                std::fprintf(stderr, "tebench: %s\n", w.ToString().c_str());
        }
        armTeardownWatchdog();
        // Buffers may still be the target of in-flight requests; the
        // engine releases them when it is destroyed.
        engine.closeSegment(remote.id);
        return 1;
    };
    // Rewritten after every row, so that an interrupted sweep keeps what
    // it measured; an unwritable path fails before the first case.
    auto save = [&]() {
        if (options.json_out.empty()) return true;
        Status w = writeJsonReport(options.json_out, run, rows);
        if (w.ok()) return true;
        std::fprintf(stderr, "tebench: %s\n", w.ToString().c_str());
        releaseBuffers(engine, local);
        engine.closeSegment(remote.id);
        return false;
    };

    if (!save()) return 1;

    uint64_t case_index = 0;
    for (const CaseSpec& spec : buildCases(options)) {
        // The run's first batch pays for connection setup unless the
        // transport connected at openSegment(); it is printed as soon as the
        // first case's warm-up is over, before the table.
        WarmupDone first_case_warm;
        if (case_index == 0) {
            first_case_warm = [&](double first_batch_us) {
                run.first_transfer_us = first_batch_us;
                printFirstTransfer(first_batch_us, spec.block_size,
                                   spec.batch_size, spec.num_threads);
                printHeader();
            };
        }
        const uint64_t failovers_before = engine.getFailoverCount();
        CaseResult result = runCase(engine, options, local, remote, spec,
                                    case_index++, first_case_warm);
        result.failovers = engine.getFailoverCount() - failovers_before;
        rows.push_back(result);
        if (!result.ok()) {
            printFailure(result);
            return fail(result.first_error.empty() ? "case failed"
                                                   : result.first_error);
        }
        printRow(result);
        if (!save()) return 1;
    }
    // Every completed request, first batches and warm-up included: what the
    // engine's byte counters (docs/metrics.md) count.
    uint64_t moved = 0;
    for (const CaseResult& row : rows) {
        moved += (row.requests - row.failed_requests) * row.block_size;
    }
    std::printf("Total bytes moved: %llu\n",
                static_cast<unsigned long long>(moved));
    std::fflush(stdout);
    if (!(FLAGS_linger_s >= 0 && FLAGS_linger_s <= 600)) {
        std::fprintf(stderr, "tebench: --linger_s=%g must be in [0, 600]\n",
                     FLAGS_linger_s);
        return 1;
    }
    if (FLAGS_linger_s > 0) {
        std::this_thread::sleep_for(
            std::chrono::duration<double>(FLAGS_linger_s));
    }
    releaseBuffers(engine, local);
    engine.closeSegment(remote.id);
    if (options.notifi) {
        // Every batch of a case that passed completed whole, so each
        // carried one notification.
        uint64_t batches = 0;
        for (const CaseResult& row : rows) {
            batches += row.requests / std::max<uint64_t>(row.batch_size, 1);
        }
        std::printf("Notifications sent: %llu\n",
                    static_cast<unsigned long long>(batches));
    }
    return 0;
}

int tebenchMain(int argc, char** argv) {
    gflags::SetUsageMessage(
        "tebench --backend=tent --xport_type=<tcp|mpcomm|...> "
        "[--target_seg_name=<host:port>] ...");
    // Logs go to stderr unless the command line says otherwise: tebench is
    // run interactively and its log lines are part of the diagnosis.
    FLAGS_logtostderr = true;
    gflags::ParseCommandLineFlags(&argc, &argv, true);
    google::InitGoogleLogging(argv[0]);

    BenchOptions options;
    Status s = parseOptions(options);
    if (!s.ok()) {
        std::fprintf(stderr, "tebench: %s\n", s.ToString().c_str());
        return 1;
    }

    // Blocked before the engine starts its threads, so that every thread
    // inherits the mask and the target's sigwait() is the one receiver.
    sigset_t stop_signals;
    sigemptyset(&stop_signals);
    sigaddset(&stop_signals, SIGINT);
    sigaddset(&stop_signals, SIGTERM);
    if (options.is_target) {
        pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
    }

    TransferEngine engine(buildEngineConfig(options));
    if (!engine.available()) {
        std::fprintf(stderr,
                     "tebench: the transfer engine failed to start (see the "
                     "log above)\n");
        return 1;
    }
    std::string transports;
    for (const std::string& name : engine.getSupportedTransports()) {
        transports += (transports.empty() ? "" : ",") + name;
    }
    LOG(INFO) << "Engine segment " << engine.getSegmentName()
              << ", transports: "
              << (transports.empty() ? "(none)" : transports);
    return options.is_target ? runTarget(engine, options, stop_signals)
                             : runInitiator(engine, options);
}

}  // namespace
}  // namespace mooncake::tent::bench

int main(int argc, char** argv) {
    return mooncake::tent::bench::tebenchMain(argc, argv);
}
