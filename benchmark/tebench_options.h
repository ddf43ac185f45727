// tebench: command-line flags, their validation, and the engine Config the
// flags imply.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tent/common/config.h"
#include "tent/common/status.h"
#include "tent/common/types.h"

namespace mooncake::tent::bench {

enum class OpType { kRead, kWrite, kMix };
const char* opTypeName(OpType op);

enum class SegType { kDram, kVram };
const char* segTypeName(SegType type);

// Everything tebench needs from its flags, validated once by
// parseOptions() so that the rest of the program never re-checks a flag.
struct BenchOptions {
    bool is_target = true;
    std::string target_seg_name;
    // UNSPEC: --xport_type empty, every loaded transport is eligible.
    TransportType xport_type = UNSPEC;
    TransportType transport_hint = UNSPEC;
    int rpc_server_port = 0;
    // --metadata_type (p2p, etcd, redis), --metadata_servers and
    // --local_segment_name (stores only; "" = host:port).
    std::string metadata_type = "p2p";
    std::string metadata_servers;
    std::string local_segment_name;
    // The memory types this process drives; a thread uses
    // seg_types[thread % seg_types.size()].
    std::vector<SegType> seg_types;
    uint64_t total_buffer_size = 0;
    OpType op_type = OpType::kRead;
    uint64_t start_block_size = 0;
    uint64_t max_block_size = 0;
    uint64_t start_batch_size = 0;
    uint64_t max_batch_size = 0;
    int start_num_threads = 0;
    int max_num_threads = 0;
    double duration_s = 0;
    // Uncounted submitting after the first batch, before the window opens.
    double warmup_duration_s = 0;
    double transfer_timeout_s = 0;
    // How a submitting thread waits for its batch: it yields after each of
    // the first poll_yields polls, then sleeps poll_sleep_us between polls
    // (0: polls again at once).
    uint64_t poll_yields = 64;
    uint64_t poll_sleep_us = 20;
    bool check_consistency = false;
    // --notifi: each batch is submitted with a notification (initiator),
    // which the target counts.
    bool notifi = false;
    // --json_out: where the initiator writes every row as JSON; empty: no
    // file.
    std::string json_out;
};

// Validates the gflags values. The error names the flag and its bad value.
Status parseOptions(BenchOptions& options);

// The Config handed to the engine: the metadata flags, the RPC port and, when
// --xport_type names a transport, its gate on and every other known gate
// off. The engine applies MC_TENT_CONF on top of this, which replaces the
// gates wholesale (the guide documents that).
std::shared_ptr<Config> buildEngineConfig(const BenchOptions& options);

// The block sizes (doubling), batch sizes (doubling) and thread counts
// (doubling) of the case sweep, each from start to max inclusive. The max is
// always included even when it is not start * 2^k.
std::vector<uint64_t> doublingSeries(uint64_t start, uint64_t max);

// "2", "0.5": a flag's double as a user would type it (std::to_string
// prints "2.000000").
std::string formatSeconds(double seconds);

}  // namespace mooncake::tent::bench
