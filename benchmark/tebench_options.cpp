#include "tebench_options.h"

#include <gflags/gflags.h>

#include <algorithm>
#include <cctype>
#include <sstream>

DEFINE_string(backend, "tent",
              "Benchmark backend. Only 'tent' exists in this tree: MPComm is "
              "a TENT-only transport.");
DEFINE_string(xport_type, "tcp",
              "Transport to benchmark (tcp, shm, mpcomm, ...). Sets "
              "MemoryOptions.type for registration and enables only this "
              "transport in the engine configuration; MC_TENT_CONF replaces "
              "that configuration wholesale. Empty: all transports, no "
              "restriction.");
DEFINE_string(tent_transport_hint, "",
              "Transport name put into every Request::transport_hint; it "
              "overrides the policy rules. Empty: no hint.");
DEFINE_string(metadata_type, "p2p",
              "Segment metadata exchange: 'p2p' (host:port segment names "
              "served by the RPC server), 'etcd', 'redis' or 'http' (segment "
              "names looked up in that store; see --metadata_servers).");
DEFINE_string(metadata_servers, "",
              "With --metadata_type=etcd|redis|http: the store's servers, a "
              "comma list of host:port (http: http://host:port/path).");
DEFINE_string(
    local_segment_name, "",
    "With --metadata_type=etcd|redis|http: this process's segment name. "
    "Empty: host:port of its RPC server, as with p2p.");
DEFINE_int32(rpc_server_port, 0,
             "Port of this process's TENT RPC server; 0 lets TENT pick one "
             "from 15000-17000.");
DEFINE_string(target_seg_name, "",
              "Empty: run as target and serve until SIGINT/SIGTERM. "
              "Otherwise: run as initiator against this segment "
              "(host:port with p2p; the target's name with a store).");
DEFINE_string(seg_type, "DRAM",
              "Memory type of the buffers: DRAM, or VRAM (needs a build with "
              "-DUSE_CUDA=ON).");
DEFINE_string(seg_type_mix, "",
              "Comma list of memory types driven from one process, e.g. "
              "dram,vram; overrides --seg_type. Threads alternate between "
              "them.");
DEFINE_uint64(total_buffer_size, 1ull << 30,
              "Bytes allocated and registered per NUMA node (and per memory "
              "type). The 1 GiB default follows upstream tebench; pass a "
              "smaller value on small hosts.");
DEFINE_string(op_type, "read", "read, write or mix (alternating requests).");
DEFINE_uint64(start_block_size, 4096, "First block size in bytes.");
DEFINE_uint64(max_block_size, 1ull << 20,
              "Last block size in bytes (doubling from start).");
DEFINE_uint64(start_batch_size, 1, "First batch size (requests per batch).");
DEFINE_uint64(max_batch_size, 1, "Last batch size (doubling from start).");
DEFINE_int32(start_num_threads, 1, "First number of submitting threads.");
DEFINE_int32(max_num_threads, 1, "Last number of threads (doubling).");
DEFINE_double(duration, 5, "Seconds each (block, batch, threads) case runs.");
DEFINE_double(warmup_duration, 0,
              "Seconds each thread of a case keeps submitting, uncounted, "
              "after its first batch and before the measured window opens. "
              "0: the first batch is the whole warm-up.");
DEFINE_bool(check_consistency, false,
            "Write a pattern to the target, read every block back and compare "
            "it; a mismatch exits non-zero. Lowers the reported bandwidth.");
DEFINE_bool(notifi, false,
            "Initiator: every batch carries a notification, sent once the "
            "batch completed. Target: receives them and prints how many "
            "arrived when it shuts down.");
DEFINE_string(json_out, "",
              "Initiator only: write every row (block size, batch, threads, "
              "op, transport and all columns) and the first transfer's "
              "latency to this file as JSON. Empty: no file.");
DEFINE_uint64(poll_yields, 64,
              "While its batch is in flight, the submitting thread yields "
              "the CPU (sched_yield) after each of its first N polls, and "
              "sleeps --poll_sleep_us after each later one.");
DEFINE_uint64(poll_sleep_us, 20,
              "Microseconds the submitting thread sleeps between polls once "
              "--poll_yields polls went by; 0: it polls again at once, "
              "without a system call (with --poll_yields=0, upstream "
              "tebench's busy loop). At most 1000000.");
DEFINE_double(transfer_timeout_s, 30,
              "A batch not finished after this many seconds counts as failed "
              "and stops the run.");

namespace mooncake::tent::bench {

namespace {

constexpr int kMaxThreads = 1024;
// A poller asleep for more than a second would measure its own sleep.
constexpr uint64_t kMaxPollSleepUs = 1000000;

std::string lower(std::string s) {
    std::transform(s.begin(), s.end(), s.begin(),
                   [](unsigned char c) { return std::tolower(c); });
    return s;
}

// "rdma, mnnvl, ..., mpcomm": the names --xport_type and
// --tent_transport_hint accept, for error messages.
std::string knownTransportNames() {
    std::string out;
    for (int i = 1; i < kSupportedTransportTypes; ++i) {
        if (!out.empty()) out += ", ";
        out += transportTypeName(static_cast<TransportType>(i));
    }
    return out;
}

Status parseTransportFlag(const std::string& flag, const std::string& value,
                          TransportType& out) {
    out = UNSPEC;
    if (value.empty()) return Status::OK();
    out = parseTransportType(value);
    if (out == UNSPEC) {
        return Status::InvalidArgument("unknown --" + flag + "=" + value +
                                       " (known: " + knownTransportNames() +
                                       ")");
    }
    return Status::OK();
}

Status parseSegType(const std::string& flag, const std::string& value,
                    SegType& out) {
    std::string v = lower(value);
    if (v == "dram") {
        out = SegType::kDram;
        return Status::OK();
    }
    if (v == "vram") {
#ifdef USE_CUDA
        out = SegType::kVram;
        return Status::OK();
#else
        return Status::InvalidArgument(
            "--" + flag + "=" + value +
            " needs GPU support: rebuild with -DUSE_CUDA=ON");
#endif
    }
    return Status::InvalidArgument("unknown --" + flag + "=" + value +
                                   " (expected DRAM or VRAM)");
}

Status parseSegTypes(BenchOptions& options) {
    options.seg_types.clear();
    if (FLAGS_seg_type_mix.empty()) {
        SegType type;
        CHECK_STATUS(parseSegType("seg_type", FLAGS_seg_type, type));
        options.seg_types.push_back(type);
        return Status::OK();
    }
    std::stringstream list(FLAGS_seg_type_mix);
    std::string item;
    while (std::getline(list, item, ',')) {
        SegType type;
        CHECK_STATUS(parseSegType("seg_type_mix", item, type));
        if (std::find(options.seg_types.begin(), options.seg_types.end(),
                      type) == options.seg_types.end()) {
            options.seg_types.push_back(type);
        }
    }
    if (options.seg_types.empty()) {
        return Status::InvalidArgument("--seg_type_mix=" + FLAGS_seg_type_mix +
                                       " names no memory type");
    }
    return Status::OK();
}

// InvalidArgument "--FLAG=VALUE RULE" unless `ok`: every flag error names
// the flag and the value given.
Status requireFlag(bool ok, const char* flag, const std::string& value,
                   const std::string& rule) {
    if (ok) return Status::OK();
    return Status::InvalidArgument(std::string("--") + flag + "=" + value +
                                   " " + rule);
}

// --START and --MAX into `start_out` and `max_out`: a positive start no
// larger than the max.
template <typename T>
Status takeRange(const char* start_flag, T start, const char* max_flag, T max,
                 T& start_out, T& max_out) {
    CHECK_STATUS(requireFlag(start > 0, start_flag, std::to_string(start),
                             "must be positive"));
    CHECK_STATUS(requireFlag(max >= start, max_flag, std::to_string(max),
                             std::string("is smaller than --") + start_flag +
                                 "=" + std::to_string(start)));
    start_out = start;
    max_out = max;
    return Status::OK();
}

Status checkAtMost(const char* flag, uint64_t value, uint64_t max) {
    return requireFlag(value <= max, flag, std::to_string(value),
                       "exceeds " + std::to_string(max));
}

// --FLAG=SECONDS into `out`: positive, or zero too when `zero_ok`.
Status takeSeconds(const char* flag, double value, bool zero_ok, double& out) {
    CHECK_STATUS(requireFlag(
        zero_ok ? value >= 0 : value > 0, flag, formatSeconds(value),
        zero_ok ? "must be zero or positive" : "must be positive"));
    out = value;
    return Status::OK();
}

}  // namespace

const char* opTypeName(OpType op) {
    switch (op) {
        case OpType::kRead:
            return "read";
        case OpType::kWrite:
            return "write";
        case OpType::kMix:
            return "mix";
    }
    return "unknown";
}

const char* segTypeName(SegType type) {
    return type == SegType::kDram ? "DRAM" : "VRAM";
}

Status parseOptions(BenchOptions& options) {
    if (FLAGS_backend != "tent") {
        return Status::InvalidArgument(
            "--backend=" + FLAGS_backend +
            " is not supported: only --backend=tent exists in this tree");
    }
    if (FLAGS_metadata_type != "p2p" && FLAGS_metadata_type != "etcd" &&
        FLAGS_metadata_type != "redis" && FLAGS_metadata_type != "http") {
        return Status::InvalidArgument(
            "--metadata_type=" + FLAGS_metadata_type +
            " is not supported: p2p, etcd, redis and http are");
    }
    options.notifi = FLAGS_notifi;
    if (FLAGS_metadata_type != "p2p" && FLAGS_metadata_servers.empty()) {
        return Status::InvalidArgument(
            "--metadata_type=" + FLAGS_metadata_type +
            " needs --metadata_servers (a comma list of host:port)");
    }
    if (FLAGS_metadata_type == "p2p" && !FLAGS_local_segment_name.empty()) {
        return Status::InvalidArgument(
            "--local_segment_name=" + FLAGS_local_segment_name +
            " needs --metadata_type=etcd, redis or http (p2p names a segment "
            "host:port)");
    }
    options.metadata_type = FLAGS_metadata_type;
    options.metadata_servers = FLAGS_metadata_servers;
    options.local_segment_name = FLAGS_local_segment_name;
    CHECK_STATUS(
        parseTransportFlag("xport_type", FLAGS_xport_type, options.xport_type));
    CHECK_STATUS(parseTransportFlag("tent_transport_hint",
                                    FLAGS_tent_transport_hint,
                                    options.transport_hint));
    CHECK_STATUS(requireFlag(
        FLAGS_rpc_server_port >= 0 && FLAGS_rpc_server_port <= 65535,
        "rpc_server_port", std::to_string(FLAGS_rpc_server_port),
        "is outside 0-65535"));
    options.rpc_server_port = FLAGS_rpc_server_port;
    options.target_seg_name = FLAGS_target_seg_name;
    options.is_target = FLAGS_target_seg_name.empty();
    CHECK_STATUS(parseSegTypes(options));

    CHECK_STATUS(requireFlag(FLAGS_total_buffer_size != 0, "total_buffer_size",
                             "0", "must be positive"));
    options.total_buffer_size = FLAGS_total_buffer_size;

    std::string op = lower(FLAGS_op_type);
    if (op == "read") {
        options.op_type = OpType::kRead;
    } else if (op == "write") {
        options.op_type = OpType::kWrite;
    } else if (op == "mix") {
        options.op_type = OpType::kMix;
    } else {
        return Status::InvalidArgument("unknown --op_type=" + FLAGS_op_type +
                                       " (expected read, write or mix)");
    }

    CHECK_STATUS(takeRange("start_block_size", FLAGS_start_block_size,
                           "max_block_size", FLAGS_max_block_size,
                           options.start_block_size, options.max_block_size));
    CHECK_STATUS(takeRange("start_batch_size", FLAGS_start_batch_size,
                           "max_batch_size", FLAGS_max_batch_size,
                           options.start_batch_size, options.max_batch_size));
    CHECK_STATUS(takeRange("start_num_threads", FLAGS_start_num_threads,
                           "max_num_threads", FLAGS_max_num_threads,
                           options.start_num_threads, options.max_num_threads));
    // takeRange() made it positive.
    CHECK_STATUS(
        checkAtMost("max_num_threads", FLAGS_max_num_threads, kMaxThreads));

    CHECK_STATUS(
        takeSeconds("duration", FLAGS_duration, false, options.duration_s));
    CHECK_STATUS(takeSeconds("warmup_duration", FLAGS_warmup_duration, true,
                             options.warmup_duration_s));
    CHECK_STATUS(takeSeconds("transfer_timeout_s", FLAGS_transfer_timeout_s,
                             false, options.transfer_timeout_s));
    CHECK_STATUS(
        checkAtMost("poll_sleep_us", FLAGS_poll_sleep_us, kMaxPollSleepUs));
    options.poll_sleep_us = FLAGS_poll_sleep_us;
    options.poll_yields = FLAGS_poll_yields;
    options.check_consistency = FLAGS_check_consistency;
    options.json_out = FLAGS_json_out;
    return Status::OK();
}

std::shared_ptr<Config> buildEngineConfig(const BenchOptions& options) {
    auto config = std::make_shared<Config>();
    config->set("metadata_type", options.metadata_type);
    if (!options.metadata_servers.empty()) {
        config->set("metadata_servers", options.metadata_servers);
    }
    if (!options.local_segment_name.empty()) {
        config->set("local_segment_name", options.local_segment_name);
    }
    if (options.rpc_server_port > 0) {
        config->set("rpc_server_port", options.rpc_server_port);
    }
    if (options.xport_type != UNSPEC) {
        for (int i = 1; i < kSupportedTransportTypes; ++i) {
            auto type = static_cast<TransportType>(i);
            config->set(std::string("transports/") + transportTypeName(type) +
                            "/enable",
                        type == options.xport_type);
        }
    }
    return config;
}

std::vector<uint64_t> doublingSeries(uint64_t start, uint64_t max) {
    std::vector<uint64_t> out;
    for (uint64_t v = start; v < max; v *= 2) {
        out.push_back(v);
        if (v > max / 2) break;  // the next doubling would pass max
    }
    out.push_back(max);
    return out;
}

std::string formatSeconds(double seconds) {
    std::ostringstream os;
    os << seconds;
    return os.str();
}

}  // namespace mooncake::tent::bench
