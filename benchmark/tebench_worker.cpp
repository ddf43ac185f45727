#include "tebench_worker.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>

namespace mooncake::tent::bench {

namespace {

using Clock = std::chrono::steady_clock;

// A thread's share of one buffer: `blocks` blocks of the case's block size
// starting at `base` (a local pointer value or an absolute remote address).
struct Slice {
    uint64_t base = 0;
    uint64_t blocks = 0;
};

// Threads are spread round-robin over the buffers; those sharing a buffer
// split it into equal slots.
Slice sliceFor(uint64_t buffer_base, uint64_t buffer_length, size_t buffers,
               int thread, int threads, uint64_t block_size) {
    uint64_t slots = (threads + buffers - 1) / buffers;
    uint64_t slot = thread / buffers;
    uint64_t slice_length = buffer_length / slots;
    Slice s;
    s.base = buffer_base + slot * slice_length;
    s.blocks = slice_length / block_size;
    return s;
}

uint64_t smallestSlice(const std::vector<uint64_t>& lengths, int threads) {
    uint64_t slots = (threads + lengths.size() - 1) / lengths.size();
    uint64_t smallest = *std::min_element(lengths.begin(), lengths.end());
    return smallest / slots;
}

std::string hex(uint64_t v) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "0x%" PRIx64, v);
    return buf;
}

// Distinct per case, thread, batch and request, so a block from another
// request or an earlier batch never verifies.
uint64_t blockSeed(uint64_t case_index, int thread, uint64_t iteration,
                   uint64_t request) {
    return (case_index << 48) ^ (static_cast<uint64_t>(thread) << 36) ^
           (iteration << 12) ^ request;
}

struct BatchOutcome {
    uint64_t completed = 0;
    uint64_t failed = 0;
    // Submit to the poll that saw the last request finish.
    double latency_us = 0;
    // Submit to the poll that first saw each request COMPLETED, for the
    // completed ones only.
    std::vector<double> request_latencies_us;
    std::string error;
};

// Shared by the threads of one case.
struct CaseContext {
    CaseContext(TransferEngine& engine, const BenchOptions& options,
                const std::vector<LocalBuffer>& local,
                const RemoteTarget& remote, const CaseSpec& spec,
                uint64_t case_index)
        : engine(engine),
          options(options),
          local(local),
          remote(remote),
          spec(spec),
          case_index(case_index) {}

    // Called by each thread once its first batch is done. The last one to
    // arrive opens the steady-state window, so that no thread's warm-up
    // overlaps another's measurement; returns false when the case stopped
    // (a failure) before that.
    bool arriveAfterWarmup(double first_batch_us) {
        std::unique_lock<std::mutex> lock(mu);
        slowest_first_batch_us =
            std::max(slowest_first_batch_us, first_batch_us);
        if (++arrived == spec.num_threads) {
            // Reported before the window opens, so that the report's time
            // is not counted in the steady state.
            if (on_warmup_done) on_warmup_done(slowest_first_batch_us);
            window_start = Clock::now();
            window_end = window_start +
                         std::chrono::duration_cast<Clock::duration>(
                             std::chrono::duration<double>(options.duration_s));
            window_open = true;
            cv.notify_all();
        }
        cv.wait(lock, [this] {
            return window_open || stop.load(std::memory_order_relaxed);
        });
        return window_open;
    }

    // The first thread that sees a failure stops the case; the others stop
    // at their next batch boundary or leave the warm-up wait.
    void halt() {
        std::lock_guard<std::mutex> lock(mu);
        stop.store(true, std::memory_order_relaxed);
        cv.notify_all();
    }

    TransferEngine& engine;
    const BenchOptions& options;
    const std::vector<LocalBuffer>& local;
    const RemoteTarget& remote;
    const CaseSpec& spec;
    uint64_t case_index;
    WarmupDone on_warmup_done;
    std::atomic<bool> stop{false};

    std::mutex mu;
    std::condition_variable cv;
    int arrived = 0;
    double slowest_first_batch_us = 0;
    // Written under `mu` before window_open; read after arriving (which
    // synchronises through `mu`) or after joining the threads.
    bool window_open = false;
    Clock::time_point window_start;
    Clock::time_point window_end;
};

// One thread's tally; its first_batch_us is its own first batch.
struct ThreadResult : Tally {
    uint64_t batches = 0;
};

std::string describeRequest(const Request& r, int thread, size_t index) {
    return std::string(r.opcode == Request::WRITE ? "WRITE" : "READ") + " of " +
           std::to_string(r.length) + " bytes (thread " +
           std::to_string(thread) + ", request " + std::to_string(index) +
           ", local " + hex(reinterpret_cast<uint64_t>(r.source)) +
           ", target offset " + hex(r.target_offset) + ")";
}

bool isFailure(TransferStatusEnum s) {
    return s == FAILED || s == INVALID || s == CANCELED || s == TIMEOUT;
}

// Submits one batch and polls it to completion or to the deadline.
BatchOutcome runBatch(CaseContext& ctx, const std::vector<Request>& requests,
                      int thread) {
    BatchOutcome out;
    const size_t n = requests.size();
    BatchID batch = ctx.engine.allocateBatch(n);
    if (batch == 0) {
        out.failed = n;
        out.error = "allocateBatch(" + std::to_string(n) + ") failed";
        return out;
    }
    Clock::time_point start = Clock::now();
    // --notifi: the notification names the thread and the case; the
    // engine sends it once every request of the batch completed.
    Status s = ctx.options.notifi
                   ? ctx.engine.submitTransfer(
                         batch, requests,
                         Notification{"tebench",
                                      "case " + std::to_string(ctx.case_index) +
                                          " thread " + std::to_string(thread)})
                   : ctx.engine.submitTransfer(batch, requests);
    if (!s.ok()) {
        out.failed = n;
        out.error = "submitTransfer of " +
                    describeRequest(requests[0], thread, 0) + " and " +
                    std::to_string(n - 1) + " more: " + s.ToString();
        ctx.engine.freeBatch(batch);
        return out;
    }
    auto deadline =
        start +
        std::chrono::duration_cast<Clock::duration>(
            std::chrono::duration<double>(ctx.options.transfer_timeout_s));
    std::vector<TransferStatus> status;
    std::vector<double> done_us(n, -1.0);
    bool in_flight = true;
    for (uint64_t polls = 0;; ++polls) {
        s = ctx.engine.getTransferStatus(batch, status);
        double now_us =
            std::chrono::duration<double, std::micro>(Clock::now() - start)
                .count();
        if (!s.ok() || status.size() != n) {
            out.failed = n;
            out.error = "getTransferStatus: " +
                        (s.ok() ? "returned " + std::to_string(status.size()) +
                                      " entries for " + std::to_string(n)
                                : s.ToString());
            break;
        }
        uint64_t completed = 0, failed = 0;
        for (size_t i = 0; i < n; ++i) {
            if (status[i].s == COMPLETED) {
                ++completed;
                if (done_us[i] < 0) done_us[i] = now_us;
            } else if (isFailure(status[i].s)) {
                if (failed++ == 0 && out.error.empty()) {
                    out.error = describeRequest(requests[i], thread, i) +
                                " ended " + transferStatusName(status[i].s);
                }
            }
        }
        if (completed + failed == n) {
            out.completed = completed;
            out.failed = failed;
            in_flight = false;
            break;
        }
        if (Clock::now() >= deadline) {
            out.completed = completed;
            out.failed = n - completed;
            for (size_t i = 0; i < n && out.error.empty(); ++i) {
                if (status[i].s != COMPLETED && !isFailure(status[i].s)) {
                    out.error = describeRequest(requests[i], thread, i) +
                                " still " + transferStatusName(status[i].s) +
                                " after --transfer_timeout_s=" +
                                formatSeconds(ctx.options.transfer_timeout_s);
                }
            }
            break;
        }
        // Spin briefly for the low-latency case, then back off so that the
        // poller does not starve the transport's own threads. On a host
        // with few cores this choice moves the transports by different
        // amounts, so it is a flag (docs/performance.md, "The poll loop").
        if (polls < ctx.options.poll_yields) {
            std::this_thread::yield();
        } else if (ctx.options.poll_sleep_us > 0) {
            std::this_thread::sleep_for(
                std::chrono::microseconds(ctx.options.poll_sleep_us));
        }
    }
    out.latency_us =
        std::chrono::duration<double, std::micro>(Clock::now() - start).count();
    for (double us : done_us) {
        if (us >= 0) out.request_latencies_us.push_back(us);
    }
    // A batch with requests still in flight stays allocated: freeing it
    // would let the transport complete into a released descriptor. The
    // process is about to exit on this failure anyway.
    if (!in_flight) ctx.engine.freeBatch(batch);
    return out;
}

// Records a batch in the thread's tally; false when the case must stop.
// Warm-up batches count towards failures but not towards the steady-state
// bytes and latencies; the thread's very first batch is kept apart.
bool account(CaseContext& ctx, ThreadResult& result, const BatchOutcome& b,
             bool warmup) {
    result.requests += b.completed + b.failed;
    result.failed_requests += b.failed;
    if (result.batches++ == 0) result.first_batch_us = b.latency_us;
    if (!warmup) {
        result.bytes += b.completed * ctx.spec.block_size;
        result.request_latencies_us.insert(result.request_latencies_us.end(),
                                           b.request_latencies_us.begin(),
                                           b.request_latencies_us.end());
    }
    if (b.failed == 0 && b.error.empty()) return true;
    if (result.first_error.empty()) result.first_error = b.error;
    ctx.halt();
    return false;
}

// --check_consistency: write a fresh pattern into every block, scrub the
// local copy, read it back and compare.
bool consistencyRound(CaseContext& ctx, ThreadResult& result, int thread,
                      uint64_t iteration, bool warmup,
                      const LocalBuffer& buffer,
                      std::vector<Request>& requests) {
    for (size_t j = 0; j < requests.size(); ++j) {
        fillPattern(buffer, requests[j].source, requests[j].length,
                    blockSeed(ctx.case_index, thread, iteration, j));
        requests[j].opcode = Request::WRITE;
    }
    if (!account(ctx, result, runBatch(ctx, requests, thread), warmup)) {
        return false;
    }
    for (Request& r : requests) {
        scrubBlock(buffer, r.source, r.length);
        r.opcode = Request::READ;
    }
    if (!account(ctx, result, runBatch(ctx, requests, thread), warmup)) {
        return false;
    }
    for (size_t j = 0; j < requests.size(); ++j) {
        size_t bad = 0;
        uint8_t want = 0, got = 0;
        if (verifyPattern(buffer, requests[j].source, requests[j].length,
                          blockSeed(ctx.case_index, thread, iteration, j), bad,
                          want, got)) {
            continue;
        }
        char detail[96];
        std::snprintf(detail, sizeof(detail),
                      ": byte %zu of the block is 0x%02x, expected 0x%02x", bad,
                      got, want);
        result.first_error =
            "consistency check failed for block at target "
            "offset " +
            hex(requests[j].target_offset) + " (thread " +
            std::to_string(thread) + ", request " + std::to_string(j) + ", " +
            std::to_string(requests[j].length) + " bytes)" + detail;
        ctx.halt();
        return false;
    }
    return true;
}

void workerMain(CaseContext& ctx, int thread, ThreadResult& result) {
    const CaseSpec& spec = ctx.spec;
    const LocalBuffer& lbuf = ctx.local[thread % ctx.local.size()];
    Slice lslice =
        sliceFor(reinterpret_cast<uint64_t>(lbuf.addr), lbuf.length,
                 ctx.local.size(), thread, spec.num_threads, spec.block_size);
    const SegmentInfo::Buffer& rbuf =
        ctx.remote.buffers[thread % ctx.remote.buffers.size()];
    Slice rslice = sliceFor(rbuf.base, rbuf.length, ctx.remote.buffers.size(),
                            thread, spec.num_threads, spec.block_size);

    // As upstream tebench: every batch of a thread moves the first `batch`
    // blocks of its slice, so the working set is what is in flight, not the
    // whole buffer; only the opcodes change between batches.
    // checkCapacity() guarantees blocks >= batch on both sides.
    std::vector<Request> requests(spec.batch_size);
    for (uint64_t j = 0; j < spec.batch_size; ++j) {
        Request& r = requests[j];
        r.source = reinterpret_cast<void*>(lslice.base + j * spec.block_size);
        r.target_id = ctx.remote.id;
        r.target_offset = rslice.base + j * spec.block_size;
        r.length = spec.block_size;
        r.transport_hint = ctx.options.transport_hint;
    }
    // The warm-up is iteration 0 (the first batch, reported apart) and then
    // --warmup_duration of uncounted batches; the window opens once every
    // thread is through it, and the loop runs until the window closes.
    bool warmup = true;
    Clock::time_point warmup_end;
    for (uint64_t iteration = 0; !ctx.stop.load(std::memory_order_relaxed) &&
                                 (warmup || Clock::now() < ctx.window_end);
         ++iteration) {
        // Set afresh each batch: a consistency round rewrites them.
        for (uint64_t j = 0; j < spec.batch_size; ++j) {
            Request& r = requests[j];
            switch (ctx.options.op_type) {
                case OpType::kRead:
                    r.opcode = Request::READ;
                    break;
                case OpType::kWrite:
                    r.opcode = Request::WRITE;
                    break;
                case OpType::kMix:
                    r.opcode =
                        (iteration + j) % 2 ? Request::READ : Request::WRITE;
                    break;
            }
        }
        if (ctx.options.check_consistency) {
            if (!consistencyRound(ctx, result, thread, iteration, warmup, lbuf,
                                  requests)) {
                return;
            }
        } else if (!account(ctx, result, runBatch(ctx, requests, thread),
                            warmup)) {
            return;
        }
        if (!warmup) continue;
        const Clock::time_point now = Clock::now();
        if (iteration == 0) {
            warmup_end = now + std::chrono::duration_cast<Clock::duration>(
                                   std::chrono::duration<double>(
                                       ctx.options.warmup_duration_s));
        }
        if (now < warmup_end) continue;
        warmup = false;
        if (!ctx.arriveAfterWarmup(result.first_batch_us)) return;
    }
}

// Fails unless a thread's slice of the buffers with these `lengths` holds
// `need` bytes with --max_num_threads threads; `buffers` names them.
Status checkSlice(const BenchOptions& options,
                  const std::vector<uint64_t>& lengths, uint64_t need,
                  const std::string& buffers) {
    uint64_t slice = smallestSlice(lengths, options.max_num_threads);
    if (slice >= need) return Status::OK();
    return Status::InvalidArgument(
        "--max_block_size=" + std::to_string(options.max_block_size) +
        " x --max_batch_size=" + std::to_string(options.max_batch_size) +
        " needs " + std::to_string(need) +
        " bytes per thread, but with --max_num_threads=" +
        std::to_string(options.max_num_threads) + " a thread gets " +
        std::to_string(slice) + " bytes of " + buffers);
}

}  // namespace

std::vector<CaseSpec> buildCases(const BenchOptions& options) {
    std::vector<CaseSpec> cases;
    for (uint64_t block :
         doublingSeries(options.start_block_size, options.max_block_size)) {
        for (uint64_t batch :
             doublingSeries(options.start_batch_size, options.max_batch_size)) {
            for (uint64_t threads : doublingSeries(options.start_num_threads,
                                                   options.max_num_threads)) {
                cases.push_back({block, batch, static_cast<int>(threads)});
            }
        }
    }
    return cases;
}

Status checkCapacity(const BenchOptions& options,
                     const std::vector<LocalBuffer>& local,
                     const RemoteTarget& remote) {
    if (remote.buffers.empty()) {
        return Status::InvalidArgument("target segment " +
                                       options.target_seg_name +
                                       " has no registered buffers");
    }
    // The smallest slice shrinks with the thread count, and a batch of the
    // largest blocks needs the most room: the (max, max, max) case is the
    // binding one.
    uint64_t need = options.max_block_size * options.max_batch_size;
    std::vector<uint64_t> lengths;
    for (const LocalBuffer& b : local) lengths.push_back(b.length);
    CHECK_STATUS(checkSlice(
        options, lengths, need,
        "--total_buffer_size=" + std::to_string(options.total_buffer_size)));
    lengths.clear();
    for (const auto& b : remote.buffers) lengths.push_back(b.length);
    return checkSlice(
        options, lengths, need,
        "target segment " + options.target_seg_name +
            " (its smallest buffer is " +
            std::to_string(*std::min_element(lengths.begin(), lengths.end())) +
            " bytes)");
}

CaseResult runCase(TransferEngine& engine, const BenchOptions& options,
                   const std::vector<LocalBuffer>& local,
                   const RemoteTarget& remote, const CaseSpec& spec,
                   uint64_t case_index, const WarmupDone& on_warmup_done) {
    CaseContext ctx(engine, options, local, remote, spec, case_index);
    ctx.on_warmup_done = on_warmup_done;
    std::vector<ThreadResult> results(spec.num_threads);
    std::vector<std::thread> threads;
    for (int t = 0; t < spec.num_threads; ++t) {
        threads.emplace_back(workerMain, std::ref(ctx), t,
                             std::ref(results[t]));
    }
    for (std::thread& t : threads) t.join();

    CaseResult out;
    out.block_size = spec.block_size;
    out.batch_size = spec.batch_size;
    out.num_threads = spec.num_threads;
    if (ctx.window_open) {
        out.elapsed_s =
            std::chrono::duration<double>(Clock::now() - ctx.window_start)
                .count();
    }
    for (const ThreadResult& r : results) out.add(r);
    return out;
}

}  // namespace mooncake::tent::bench
