// tent_cost_count: one case of tent_transport_overhead, run for callgrind
// so that benchmark/tools/cost_count.py can count the instructions each request
// costs. Instruction counts do not move with the host's load as times do,
// so they can be held to a budget (tent_cost_budget_test).
//
// The case is built as the benchmark builds it (overhead_worlds.h), then
// every batch of its rotation runs once so that each peer and buffer has
// been looked up before counting starts. Only then does the program ask
// callgrind to count, around `--requests` requests (rounded up to whole
// batches) and nothing else: the world's setup, the warm-up and the
// teardown are outside. Collection is toggled per thread, so threads the
// runtime keeps (RPC servers, the engine's workers) are not counted either.
// Run it under
//   valgrind --tool=callgrind --instr-atstart=no --collect-atstart=no
// and divide the collected Ir by the `requests` it prints. Without
// valgrind the client requests do nothing and the program only runs the
// case.
#include <gflags/gflags.h>
#include <glog/logging.h>
#include <valgrind/callgrind.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "overhead_worlds.h"

DEFINE_string(path, "transport",
              "what the requests go through: adapter (the adapter calls "
              "alone), transport (MpcommTransport via the Transport API) or "
              "engine (TransferEngine)");
DEFINE_int32(buffers, 1, "buffers each peer publishes (transport, engine)");
DEFINE_int32(peers, 1, "peers the requests rotate over");
DEFINE_int32(batch, 1, "requests per batch");
DEFINE_int32(requests, 4096,
             "requests counted, rounded up to a whole number of batches");

namespace mooncake::tent::bench {
namespace {

// Starts counting on the calling thread (and instrumenting, which the
// valgrind command line leaves off during setup so that it runs faster).
void startCounting() {
    CALLGRIND_START_INSTRUMENTATION;
    CALLGRIND_TOGGLE_COLLECT;
}

void stopCounting() {
    CALLGRIND_TOGGLE_COLLECT;
    CALLGRIND_STOP_INSTRUMENTATION;
}

// Runs `warmup` batches of the rotation uncounted, then `measured`
// batches counted. "" on success.
template <typename WorldT>
std::string countBatches(WorldT& world, int buffers, int peers, int batch,
                         long measured) {
    if (!world.error.empty()) return world.error;
    auto batches = batchesOf(buffers, peers, batch, [&](size_t p, size_t b) {
        return world.request(p, b);
    });
    for (const auto& requests : batches) {
        std::string error = world.runBatch(requests);
        if (!error.empty()) return "warm-up: " + error;
    }
    std::string error;
    // Read once, outside the counted loop: the loop's own instructions are
    // counted with the transport's, so they are kept to the minimum.
    const size_t rotation = batches.size();
    size_t i = 0;
    startCounting();
    for (long n = 0; n < measured && error.empty(); ++n) {
        error = world.runBatch(batches[i]);
        if (++i == rotation) i = 0;
    }
    stopCounting();
    return error;
}

std::string countAdapter(int peers, int batch, long measured) {
    AdapterWorld world(peers, batch);
    size_t i = 0;
    bool ok = world.runBatch(i);
    startCounting();
    for (long n = 0; n < measured; ++n) {
        ok = world.runBatch(i) && ok;
    }
    stopCounting();
    return ok ? "" : "the instant adapter reported a failure";
}

// Longer than any run: a fetched peer descriptor expires after the
// cache's TTL (10 s by default) and the next request fetches it again.
// Under callgrind the setup and warm-up alone can take that long on a
// loaded host, so with the default TTL whether a re-fetch lands among the
// counted requests would depend on the host's speed.
constexpr std::chrono::hours kCacheTtl{24};

std::string countCase(const std::string& path, int buffers, int peers,
                      int batch, long measured) {
    if (path == "adapter") return countAdapter(peers, batch, measured);
    if (path == "transport") {
        World world(buffers, peers, kCacheTtl);
        return countBatches(world, buffers, peers, batch, measured);
    }
    if (path == "engine") {
        EngineWorld world(buffers, peers, kCacheTtl);
        return countBatches(world, buffers, peers, batch, measured);
    }
    return "--path must be adapter, transport or engine, got '" + path + "'";
}

bool inRange(const char* name, int value, int low, int high) {
    if (value >= low && value <= high) return true;
    std::fprintf(stderr, "tent_cost_count: --%s must be in [%d, %d], got %d\n",
                 name, low, high, value);
    return false;
}

}  // namespace
}  // namespace mooncake::tent::bench

int main(int argc, char** argv) {
    using namespace mooncake::tent::bench;
    FLAGS_logtostderr = true;
    FLAGS_minloglevel = google::GLOG_WARNING;
    gflags::SetUsageMessage(
        "one overhead case, counted under callgrind; see "
        "benchmark/tools/cost_count.py");
    gflags::ParseCommandLineFlags(&argc, &argv, true);
    google::InitGoogleLogging(argv[0]);
    if (!inRange("buffers", FLAGS_buffers, 1, 4096) ||
        !inRange("peers", FLAGS_peers, 1, 250) ||
        !inRange("batch", FLAGS_batch, 1, 4096) ||
        !inRange("requests", FLAGS_requests, 1, 1 << 24)) {
        return 2;
    }
    const long measured = (FLAGS_requests + FLAGS_batch - 1) / FLAGS_batch;
    std::string error = countCase(FLAGS_path, FLAGS_buffers, FLAGS_peers,
                                  FLAGS_batch, measured);
    if (!error.empty()) {
        std::fprintf(stderr, "tent_cost_count: %s\n", error.c_str());
        return 1;
    }
    // What the script divides the collected count by.
    std::printf("requests %ld\n", measured * FLAGS_batch);
    return 0;
}
