// tebench initiator: the (block, batch, threads) sweep and the threads that
// submit and poll batches for one case.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "tebench_memory.h"
#include "tebench_options.h"
#include "tebench_report.h"
#include "tent/transfer_engine.h"

namespace mooncake::tent::bench {

struct RemoteTarget {
    SegmentID id = 0;
    std::vector<SegmentInfo::Buffer> buffers;
};

struct CaseSpec {
    uint64_t block_size = 0;
    uint64_t batch_size = 0;
    int num_threads = 0;
};

// Block sizes outermost, then batch sizes, then thread counts, each doubling.
std::vector<CaseSpec> buildCases(const BenchOptions& options);

// Each thread owns a slice of one local and one remote buffer that must hold
// a whole batch of distinct blocks, so that concurrent requests never
// overlap (overlap would make --check_consistency meaningless). Checks the
// largest case against both sides; the error names the flags to change.
Status checkCapacity(const BenchOptions& options,
                     const std::vector<LocalBuffer>& local,
                     const RemoteTarget& remote);

// Called once per case, by a worker thread, when every thread has finished
// its first batch and the steady-state window opens; the argument is the
// slowest of those first batches, in microseconds.
using WarmupDone = std::function<void(double first_batch_us)>;

// Runs one case: every thread's first batch (the warm-up), then
// --duration seconds of steady state, or until a transfer fails. Every
// transfer is polled with the --transfer_timeout_s deadline, so this returns
// even when the target dies. `on_warmup_done` may be empty.
CaseResult runCase(TransferEngine& engine, const BenchOptions& options,
                   const std::vector<LocalBuffer>& local,
                   const RemoteTarget& remote, const CaseSpec& spec,
                   uint64_t case_index, const WarmupDone& on_warmup_done = {});

}  // namespace mooncake::tent::bench
