// tebench initiator: the (block, batch, threads) sweep and the threads that
// submit and poll batches for one case.
#pragma once

#include <cstdint>
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

// The opcode of the run's first transfer: WRITE for --op_type=write, else
// READ (which leaves the target's memory alone).
inline Request::OpCode firstTransferOpcode(const BenchOptions& options) {
    return options.op_type == OpType::kWrite ? Request::WRITE : Request::READ;
}

// The run's very first request, made before any case: one --start_block_size
// block between the start of the first local and the first remote buffer.
// Its latency is what connection setup costs when the transport connects on
// first use; checkCapacity() must have passed.
Status runFirstTransfer(TransferEngine& engine, const BenchOptions& options,
                        const std::vector<LocalBuffer>& local,
                        const RemoteTarget& remote, double& latency_us);

// Runs one case: every thread's first batch (the warm-up), then
// --duration seconds of steady state, or until a transfer fails. Every
// transfer is polled with the --transfer_timeout_s deadline, so this returns
// even when the target dies.
CaseResult runCase(TransferEngine& engine, const BenchOptions& options,
                   const std::vector<LocalBuffer>& local,
                   const RemoteTarget& remote, const CaseSpec& spec,
                   uint64_t case_index);

}  // namespace mooncake::tent::bench
