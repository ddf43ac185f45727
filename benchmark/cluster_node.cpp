// tent_cluster_node: one engine process of scripts/cluster_check.sh.
//
// Node i publishes segment "node-<i>" in a metadata store (redis or etcd)
// with one buffer of --nodes slots of --slot_bytes, slot s being where node
// s writes. It waits (bounded) until every other node's name resolves, then
// for each other node d writes a pattern unique to (i, d) into d's slot i
// and reads it back byte-exact. A pair whose transfer fails is retried until
// --pair_timeout_ms; one read back as d's untouched fill means d restarted
// between the write and the read (its buffer is new), and is retried too.
// Any other difference is a mismatch, never retried.
//
// Output on stdout: "PROGRESS <done>/<pairs>" after each pair, "RECOVERED
// node-<i> -> node-<d> failed_attempts=<n> ms=<t>" for a pair that passed
// after failing, then one "CLUSTER_NODE key=value ..." line. The script drives
// two points through files in --control_dir: with --hold_at_pair=K the node
// prints "HOLD" after K pairs and waits for <control_dir>/go (so that every
// node is midway when one is killed); after its summary it keeps serving until
// <control_dir>/release exists, so no peer loses its target before it is
// done. Both waits are bounded by --hold_timeout_ms. Exit status: 0 when
// every pair was moved byte-exact, 1 otherwise, 2 for bad flags or an
// engine that did not start.
#include <dirent.h>
#include <gflags/gflags.h>
#include <glog/logging.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tent/common/config.h"
#include "tent/transfer_engine.h"

DEFINE_string(metadata_type, "redis", "redis or etcd");
DEFINE_string(metadata_servers, "", "the store's host:port[,...]");
DEFINE_int32(index, -1, "this node's index, 0 <= index < nodes");
DEFINE_int32(nodes, 0, "number of nodes in the cluster");
DEFINE_string(transport, "tcp", "tcp or mpcomm: the only transport enabled");
DEFINE_uint64(slot_bytes, 64 << 10,
              "bytes of one transfer; this node's buffer holds one slot per "
              "node (a multiple of 8)");
DEFINE_int32(ttl_ms, 3000,
             "metadata/ttl_ms: how long a killed node's key "
             "outlives it; -1 leaves the engine's default");
DEFINE_int32(cache_ttl_ms, 1000,
             "metadata/cache_ttl_ms: how soon a restarted peer's new "
             "descriptor is read; -1 leaves the engine's default (300 s "
             "with a live store watch, else 10 s)");
DEFINE_int32(resolve_timeout_ms, 180000,
             "how long to wait until every node's name resolves");
DEFINE_int32(transfer_timeout_ms, 20000,
             "how long one transfer may stay pending before it counts as "
             "failed");
DEFINE_int32(pair_timeout_ms, 60000,
             "how long a pair may keep failing before it counts as "
             "unrecovered");
DEFINE_string(control_dir, "",
              "where the script creates \"go\" and \"release\" (required)");
DEFINE_int32(steady_s, 0,
             "after the pairs, keep writing to every peer from "
             "--steady_threads threads, segments held open, until "
             "<control_dir>/steady_end appears (the script measures the "
             "store's reads meanwhile); 0: no steady phase");
DEFINE_int32(steady_threads, 4, "submitting threads of the steady phase");
DEFINE_int32(hold_at_pair, 0,
             "after this many pairs, wait for <control_dir>/go (0: never)");
DEFINE_int32(hold_timeout_ms, 600000,
             "how long the node waits for go or release");

using namespace mooncake::tent;
using Clock = std::chrono::steady_clock;

namespace {

// The slot's "nobody wrote here" marker in place of a source index.
constexpr uint64_t kUnwrittenSource = 0xFFFFF;

uint64_t patternWord(uint64_t src, uint64_t dst, uint64_t word) {
    // splitmix64 of (src, dst, word): unique per pair in practice, and no
    // word repeats the neighbouring one, so a shifted copy is caught.
    uint64_t z = (src << 44) ^ (dst << 24) ^ word;
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

void fillSlot(uint64_t* slot, size_t words, uint64_t src, uint64_t dst) {
    for (size_t w = 0; w < words; ++w) slot[w] = patternWord(src, dst, w);
}

// The first word that differs from pattern (src, dst); words when none.
size_t firstMismatch(const uint64_t* slot, size_t words, uint64_t src,
                     uint64_t dst) {
    for (size_t w = 0; w < words; ++w) {
        if (slot[w] != patternWord(src, dst, w)) return w;
    }
    return words;
}

int64_t msSince(Clock::time_point start) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() -
                                                                 start)
        .count();
}

// One "Key: value" field of /proc/self/status (kB or a count); -1 if absent.
long procStatusField(const std::string& key) {
    std::ifstream in("/proc/self/status");
    std::string line;
    while (std::getline(in, line)) {
        if (line.rfind(key + ":", 0) == 0) {
            return std::strtol(line.c_str() + key.size() + 1, nullptr, 10);
        }
    }
    return -1;
}

// Open descriptors, and how many of them are sockets.
void countFds(long& fds, long& sockets) {
    fds = 0;
    sockets = 0;
    DIR* dir = opendir("/proc/self/fd");
    if (!dir) return;
    while (dirent* entry = readdir(dir)) {
        if (entry->d_name[0] == '.') continue;
        ++fds;
        char target[64] = {};
        std::string path = std::string("/proc/self/fd/") + entry->d_name;
        if (readlink(path.c_str(), target, sizeof(target) - 1) > 0 &&
            std::strncmp(target, "socket:", 7) == 0) {
            ++sockets;
        }
    }
    closedir(dir);
    --fds;  // the directory stream itself
}

// Polls for `path` every 50 ms; false when --hold_timeout_ms passed first.
bool waitForFile(const std::string& path) {
    const auto start = Clock::now();
    while (access(path.c_str(), F_OK) != 0) {
        if (msSince(start) > FLAGS_hold_timeout_ms) {
            std::cerr << "node-" << FLAGS_index << ": " << path
                      << " did not appear within --hold_timeout_ms="
                      << FLAGS_hold_timeout_ms << std::endl;
            return false;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return true;
}

std::string nodeName(int i) { return "node-" + std::to_string(i); }

std::shared_ptr<Config> nodeConfig() {
    auto conf = std::make_shared<Config>();
    conf->set("metadata_type", FLAGS_metadata_type);
    conf->set("metadata_servers", FLAGS_metadata_servers);
    conf->set("local_segment_name", nodeName(FLAGS_index));
    conf->set("rpc_server_hostname", std::string("127.0.0.1"));
    if (FLAGS_ttl_ms >= 0) conf->set("metadata/ttl_ms", FLAGS_ttl_ms);
    if (FLAGS_cache_ttl_ms >= 0) {
        conf->set("metadata/cache_ttl_ms", FLAGS_cache_ttl_ms);
    }
    for (const char* name : {"tcp", "mpcomm", "shm"}) {
        conf->set(std::string("transports/") + name + "/enable",
                  FLAGS_transport == name);
    }
    return conf;
}

struct Counters {
    int pairs_ok = 0;
    int unrecovered = 0;
    int mismatches = 0;
    int failed_transfers = 0;  // attempts that did not complete
    int lost_writes = 0;       // read back as a restarted target's fill
    int recovered = 0;         // pairs that failed at least once, then passed
};

class Node {
 public:
    Node(TransferEngine& engine, uint64_t* buffer)
        : engine_(engine),
          buffer_(buffer),
          words_(FLAGS_slot_bytes / 8),
          source_(buffer + FLAGS_nodes * words_),
          scratch_(source_ + words_) {}

    // Opens node `peer` and checks it published its whole buffer; false
    // (with why) while it has not.
    bool open(int peer, SegmentID& handle, uint64_t& base, std::string& why) {
        Status s = engine_.openSegment(handle, nodeName(peer));
        if (!s.ok()) {
            why = s.ToString();
            return false;
        }
        SegmentInfo info;
        s = engine_.getSegmentInfo(handle, info);
        if (!s.ok() || info.buffers.empty() ||
            info.buffers[0].length < FLAGS_nodes * FLAGS_slot_bytes) {
            why = s.ok() ? "its buffer is not published yet" : s.ToString();
            engine_.closeSegment(handle);
            return false;
        }
        base = info.buffers[0].base;
        return true;
    }

    // Moves one pair, retrying within --pair_timeout_ms.
    void runPair(int peer, Counters& c) {
        const int self = FLAGS_index;
        const auto start = Clock::now();
        int failed_attempts = 0;
        std::string why;
        while (true) {
            SegmentID handle = 0;
            uint64_t base = 0;
            bool transferred = false;
            if (open(peer, handle, base, why)) {
                const uint64_t remote = base + self * FLAGS_slot_bytes;
                fillSlot(source_, words_, self, peer);
                std::memset(scratch_, 0, FLAGS_slot_bytes);
                transferred =
                    transfer(Request::WRITE, source_, handle, remote, why) &&
                    transfer(Request::READ, scratch_, handle, remote, why);
                engine_.closeSegment(handle);
                if (!transferred) ++c.failed_transfers;
            }
            if (transferred) {
                size_t bad = firstMismatch(scratch_, words_, self, peer);
                if (bad == words_) {
                    ++c.pairs_ok;
                    if (failed_attempts > 0) {
                        // The script requires one of these towards the
                        // node it killed: the proof it was reached again.
                        ++c.recovered;
                        std::cout << "RECOVERED " << nodeName(self) << " -> "
                                  << nodeName(peer)
                                  << " failed_attempts=" << failed_attempts
                                  << " ms=" << msSince(start) << std::endl;
                    }
                    return;
                }
                if (firstMismatch(scratch_, words_, kUnwrittenSource, peer) !=
                    words_) {
                    ++c.mismatches;
                    LOG(ERROR) << nodeName(self) << " -> " << nodeName(peer)
                               << ": byte mismatch at offset " << bad * 8
                               << " of the slot read back";
                    return;
                }
                ++c.lost_writes;
                why = nodeName(peer) +
                      " read back as its untouched fill (it restarted)";
            }
            ++failed_attempts;
            if (msSince(start) > FLAGS_pair_timeout_ms) {
                ++c.unrecovered;
                LOG(ERROR) << nodeName(self) << " -> " << nodeName(peer)
                           << " not recovered within --pair_timeout_ms="
                           << FLAGS_pair_timeout_ms << ": " << why;
                return;
            }
            // Retry pacing, so 31 peers of a dead node do not spin on it.
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
        }
    }

    // The slot this node writes (a fill no peer checks in the steady
    // phase), shared read-only by the steady threads.
    void* source() { return source_; }

    // One request, waited for within --transfer_timeout_ms.

    bool transfer(Request::OpCode op, void* local, SegmentID handle,
                  uint64_t remote, std::string& why) {
        BatchID batch = engine_.allocateBatch(1);
        if (batch == 0) {
            why = "allocateBatch failed";
            return false;
        }
        Request r;
        r.opcode = op;
        r.source = local;
        r.target_id = handle;
        r.target_offset = remote;
        r.length = FLAGS_slot_bytes;
        Status s = engine_.submitTransfer(batch, {r});
        TransferStatus status;
        status.s = FAILED;
        const auto start = Clock::now();
        auto pause = std::chrono::microseconds(50);
        while (s.ok()) {
            s = engine_.getTransferStatus(batch, 0, status);
            if (!s.ok() || (status.s != PENDING && status.s != INITIAL)) break;
            if (msSince(start) > FLAGS_transfer_timeout_ms) {
                s = Status::InternalError(
                    "pending past --transfer_timeout_ms=" +
                    std::to_string(FLAGS_transfer_timeout_ms));
                break;
            }
            // Polling cadence: many processes share few cores here.
            std::this_thread::sleep_for(pause);
            pause = std::min(pause * 2, std::chrono::microseconds(2000));
        }
        engine_.freeBatch(batch);
        if (!s.ok()) {
            why = s.ToString();
            return false;
        }
        if (status.s != COMPLETED) {
            why = std::string(op == Request::WRITE ? "write" : "read") +
                  " ended in state " + std::to_string(int(status.s));
            return false;
        }
        return true;
    }

 private:
    TransferEngine& engine_;
    uint64_t* buffer_;
    const size_t words_;
    uint64_t* source_;
    uint64_t* scratch_;
};

bool validFlags() {
    std::string bad;
    if (FLAGS_metadata_type != "redis" && FLAGS_metadata_type != "etcd") {
        bad = "--metadata_type=" + FLAGS_metadata_type + " (redis or etcd)";
    } else if (FLAGS_metadata_servers.empty()) {
        bad = "--metadata_servers is empty";
    } else if (FLAGS_nodes < 2) {
        bad = "--nodes=" + std::to_string(FLAGS_nodes) + " (at least 2)";
    } else if (FLAGS_index < 0 || FLAGS_index >= FLAGS_nodes) {
        bad = "--index=" + std::to_string(FLAGS_index) + " (0 to --nodes-1)";
    } else if (FLAGS_transport != "tcp" && FLAGS_transport != "mpcomm") {
        bad = "--transport=" + FLAGS_transport + " (tcp or mpcomm)";
    } else if (FLAGS_slot_bytes == 0 || FLAGS_slot_bytes % 8 != 0) {
        bad = "--slot_bytes=" + std::to_string(FLAGS_slot_bytes) +
              " (a positive multiple of 8)";
    } else if (FLAGS_control_dir.empty()) {
        bad = "--control_dir is empty";
    } else if (FLAGS_hold_at_pair < 0 || FLAGS_hold_at_pair >= FLAGS_nodes) {
        bad = "--hold_at_pair=" + std::to_string(FLAGS_hold_at_pair) +
              " (0 to --nodes-1)";
    }
    if (!bad.empty()) std::cerr << "bad flag: " << bad << std::endl;
    return bad.empty();
}

}  // namespace

// The steady phase: nothing changes in the cluster while
// --steady_threads threads write to every peer in turn over segments held
// open, so that only the engine's descriptor cache decides how often the
// store is read. "STEADY" tells the script the phase began; it ends when
// <control_dir>/steady_end appears (bounded by --hold_timeout_ms).
bool runSteady(TransferEngine& engine, Node& node, uint64_t& transfers,
               uint64_t& failed) {
    const int self = FLAGS_index;
    std::vector<SegmentID> handles;
    std::vector<uint64_t> remotes;
    for (int k = 1; k < FLAGS_nodes; ++k) {
        SegmentID handle = 0;
        uint64_t base = 0;
        std::string why;
        if (!node.open((self + k) % FLAGS_nodes, handle, base, why)) {
            std::cerr << nodeName(self) << ": steady phase: " << why
                      << std::endl;
            return false;
        }
        handles.push_back(handle);
        remotes.push_back(base + self * FLAGS_slot_bytes);
    }
    std::atomic<bool> stop{false};
    std::atomic<uint64_t> ok{0}, bad{0};
    std::vector<std::thread> threads;
    std::cout << "STEADY" << std::endl;
    for (int t = 0; t < FLAGS_steady_threads; ++t) {
        threads.emplace_back([&, t] {
            for (size_t i = t; !stop.load(); ++i) {
                const size_t p = i % handles.size();
                std::string why;
                if (node.transfer(Request::WRITE, node.source(), handles[p],
                                  remotes[p], why)) {
                    ++ok;
                } else {
                    ++bad;
                }
            }
        });
    }
    const bool ended = waitForFile(FLAGS_control_dir + "/steady_end");
    stop = true;
    for (auto& t : threads) t.join();
    for (SegmentID handle : handles) engine.closeSegment(handle);
    transfers = ok.load();
    failed = bad.load();
    return ended;
}

int main(int argc, char** argv) {
    gflags::SetUsageMessage("one engine of scripts/cluster_check.sh");
    gflags::ParseCommandLineFlags(&argc, &argv, true);
    FLAGS_logtostderr = true;
    google::InitGoogleLogging(argv[0]);
    if (!validFlags()) return 2;
    const auto started = Clock::now();
    const int self = FLAGS_index;

    TransferEngine engine(nodeConfig());
    if (!engine.available()) {
        std::cerr << nodeName(self) << ": the engine did not start (see the "
                  << "log above)" << std::endl;
        return 2;
    }
    // Slots for every node's writes, then the local source and scratch.
    const size_t bytes = (FLAGS_nodes + 2) * FLAGS_slot_bytes;
    void* mem = nullptr;
    Status s = engine.allocateLocalMemory(&mem, bytes);
    auto* buffer = static_cast<uint64_t*>(mem);
    if (s.ok()) {
        const size_t words = FLAGS_slot_bytes / 8;
        for (int slot = 0; slot < FLAGS_nodes; ++slot) {
            fillSlot(buffer + slot * words, words, kUnwrittenSource, self);
        }
        s = engine.registerLocalMemory(mem, bytes);
    }
    if (!s.ok()) {
        std::cerr << nodeName(self) << ": " << s.ToString() << std::endl;
        return 2;
    }

    Node node(engine, buffer);
    const auto resolve_start = Clock::now();
    for (int k = 1; k < FLAGS_nodes; ++k) {
        const int peer = (self + k) % FLAGS_nodes;
        std::string why;
        SegmentID handle = 0;
        uint64_t base = 0;
        while (!node.open(peer, handle, base, why)) {
            if (msSince(resolve_start) > FLAGS_resolve_timeout_ms) {
                std::cerr << nodeName(self) << ": " << nodeName(peer)
                          << " did not resolve within --resolve_timeout_ms="
                          << FLAGS_resolve_timeout_ms << ": " << why
                          << std::endl;
                return 1;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
        engine.closeSegment(handle);
    }
    const int64_t resolve_ms = msSince(resolve_start);

    Counters c;
    const auto pairs_start = Clock::now();
    int64_t held_ms = 0;  // time at the hold point, not spent on pairs
    for (int k = 1; k < FLAGS_nodes; ++k) {
        node.runPair((self + k) % FLAGS_nodes, c);
        std::cout << "PROGRESS " << k << "/" << FLAGS_nodes - 1 << std::endl;
        if (k == FLAGS_hold_at_pair) {
            std::cout << "HOLD" << std::endl;
            const auto hold_start = Clock::now();
            if (!waitForFile(FLAGS_control_dir + "/go")) return 1;
            held_ms = msSince(hold_start);
        }
    }
    const int64_t pairs_ms = msSince(pairs_start) - held_ms;

    uint64_t steady_transfers = 0, steady_failed = 0;
    if (FLAGS_steady_s > 0 &&
        !runSteady(engine, node, steady_transfers, steady_failed)) {
        return 1;
    }

    long fds = 0, sockets = 0;
    countFds(fds, sockets);
    std::cout << "CLUSTER_NODE node=" << nodeName(self) << " pid=" << getpid()
              << " transport=" << FLAGS_transport
              << " store=" << FLAGS_metadata_type << " pairs_ok=" << c.pairs_ok
              << " unrecovered=" << c.unrecovered
              << " mismatches=" << c.mismatches
              << " failed_transfers=" << c.failed_transfers
              << " lost_writes=" << c.lost_writes
              << " recovered=" << c.recovered << " resolve_ms=" << resolve_ms
              << " pairs_ms=" << pairs_ms << " buffer_kb=" << bytes / 1024
              << " vmhwm_kb=" << procStatusField("VmHWM")
              << " vmrss_kb=" << procStatusField("VmRSS") << " fds=" << fds
              << " sockets=" << sockets
              << " threads=" << procStatusField("Threads")
              << " steady_transfers=" << steady_transfers
              << " steady_failed=" << steady_failed << std::endl;

    // Keep serving until the script says every node is done with us.
    const bool released = waitForFile(FLAGS_control_dir + "/release");
    engine.unregisterLocalMemory(mem, bytes);
    engine.freeLocalMemory(mem);
    LOG(INFO) << nodeName(self) << " exits after " << msSince(started) << " ms";
    const bool all_ok =
        released && c.pairs_ok == FLAGS_nodes - 1 && c.mismatches == 0;
    return all_ok ? 0 : 1;
}
