// tent_transport_overhead: the CPU time MpcommTransport, and the engine in
// front of it, add to each request on top of the provider, measured
// against a provider that costs nothing.
//
// One iteration is one batch of `batch` WRITEs of 64 KiB: allocate a
// (sub-)batch of that capacity, submit every request in one call, poll
// each task until COMPLETED, free the (sub-)batch. The per_request counter
// is the CPU time of an iteration divided by `batch`, so the allocation and
// the free are counted, once per batch: whole at batch 1, a 64th at batch
// 64. BM_TransportSubBatch times that allocate + free alone.
//
// BM_TransportWrite drives an installed MpcommTransport through the public
// Transport API; its adapter completes every transfer the moment it is
// posted. The peers are SegmentManagers in this process, so descriptor
// look-ups, the peer cache and the task mapping all run as in production
// while nothing touches a socket. Arguments: how many buffers each peer
// publishes, how many peers the requests rotate over, the batch size.
//
// BM_EngineWrite does the same through TransferEngine (allocateBatch,
// submitTransfer, getTransferStatus per task, freeBatch), with the same
// instant adapter injected by setTransportFactoryOverride(). The peers are
// TransferEngines in this process, opened over the loopback metadata RPC
// before timing; the requests carry transport_hint=MPCOMM, as in
// BM_TransportWrite.
//
// BM_TransportWriteOneTarget sends BM_TransportWrite's requests to the first
// of its peers only, so a world of 64 peers shows what knowing many peers
// costs a batch that names one.
//
// BM_AdapterDirect makes the adapter calls of the same requests (putAsync,
// then isTransferComplete, getTransferResult, releaseTransfer per
// transfer) directly, so the difference is the transport's own share.
//
// The worlds, the instant adapter and the direct adapter calls live in
// overhead_worlds.h, shared with tent_cost_count (instructions per request
// of the same cases under callgrind).
//
// Only public APIs are used (Transport, TransferEngine, the MpcommTransport
// adapter constructor), so the benchmark keeps compiling while the
// internals change.
#include <benchmark/benchmark.h>

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "overhead_support.h"
#include "overhead_worlds.h"

namespace mooncake::tent::bench {
namespace {

// Google Benchmark calls a benchmark function several times while it sizes
// the iteration count; a world with 64 peers x 1024 buffers is built once
// per argument pair, not once per call.
std::map<std::pair<int, int>, std::unique_ptr<World>>& worlds() {
    static std::map<std::pair<int, int>, std::unique_ptr<World>> cache;
    return cache;
}

World& worldFor(int buffers, int peers) {
    auto& slot = worlds()[{buffers, peers}];
    if (!slot) slot = std::make_unique<World>(buffers, peers);
    return *slot;
}

// A case's arguments, in the order ArgNames lists them.
struct Shape {
    int buffers;
    int peers;
    int batch;
};

Shape shapeOf(const benchmark::State& state) {
    return Shape{static_cast<int>(state.range(0)),
                 static_cast<int>(state.range(1)),
                 static_cast<int>(state.range(2))};
}

// The timed loop of the transport and engine cases: rotates over batches
// built before timing, and stops at the first failure.
// With `one_target`, every request goes to the first peer instead.
template <typename WorldT>
void timeBatches(benchmark::State& state, WorldT& world, const Shape& shape,
                 bool one_target = false) {
    if (!world.error.empty()) {
        state.SkipWithError(world.error.c_str());
        return;
    }
    auto batches = batchesOf(shape.buffers, shape.peers, shape.batch,
                             [&](size_t p, size_t b) {
                                 return world.request(one_target ? 0 : p, b);
                             });
    size_t i = 0;
    std::string error;
    for (auto _ : state) {
        error = world.runBatch(batches[i]);
        if (!error.empty()) break;
        if (++i == batches.size()) i = 0;
    }
    if (!error.empty()) state.SkipWithError(error.c_str());
    reportPerRequest(state, shape.batch);
}

void BM_TransportWrite(benchmark::State& state) {
    const Shape shape = shapeOf(state);
    timeBatches(state, worldFor(shape.buffers, shape.peers), shape);
}
BENCHMARK(BM_TransportWrite)
    ->ArgNames({"buffers", "peers", "batch"})
    ->ArgsProduct({{1, 64, 1024}, {1, 64}, {1, 64}})
    ->Unit(benchmark::kNanosecond);

// BM_TransportWrite's requests over its 1-buffer worlds, all to the first
// peer: with 64 peers connected and a batch to one of them, the cost of
// the transport knowing many peers, apart from that of a batch naming
// many targets (which BM_TransportWrite/peers:64 measures).
void BM_TransportWriteOneTarget(benchmark::State& state) {
    const Shape shape = shapeOf(state);
    timeBatches(state, worldFor(shape.buffers, shape.peers), shape, true);
}
BENCHMARK(BM_TransportWriteOneTarget)
    ->ArgNames({"buffers", "peers", "batch"})
    ->ArgsProduct({{1}, {1, 64}, {1, 64}})
    ->Unit(benchmark::kNanosecond);

// allocateSubBatch + freeSubBatch alone, the part of BM_TransportWrite
// that is per batch rather than per request.
void BM_TransportSubBatch(benchmark::State& state) {
    const size_t batch = static_cast<size_t>(state.range(0));
    World& world = worldFor(1, 1);
    if (!world.error.empty()) {
        state.SkipWithError(world.error.c_str());
        return;
    }
    for (auto _ : state) {
        Transport::SubBatchRef sub = nullptr;
        world.transport->allocateSubBatch(sub, batch);
        benchmark::DoNotOptimize(sub);
        world.transport->freeSubBatch(sub);
    }
}
BENCHMARK(BM_TransportSubBatch)
    ->ArgName("batch")
    ->Arg(1)
    ->Arg(64)
    ->Unit(benchmark::kNanosecond);

// One engine world at a time: each peer engine runs an RPC server, and
// the cases of one world run one after the other.
std::unique_ptr<EngineWorld>& engineWorld() {
    static std::unique_ptr<EngineWorld> world;
    return world;
}
std::pair<int, int>& engineWorldKey() {
    static std::pair<int, int> key{0, 0};
    return key;
}

void BM_EngineWrite(benchmark::State& state) {
    const Shape shape = shapeOf(state);
    const std::pair<int, int> key{shape.buffers, shape.peers};
    if (!engineWorld() || engineWorldKey() != key) {
        engineWorld().reset();
        engineWorld() =
            std::make_unique<EngineWorld>(shape.buffers, shape.peers);
        engineWorldKey() = key;
    }
    timeBatches(state, *engineWorld(), shape);
}
BENCHMARK(BM_EngineWrite)
    ->ArgNames({"buffers", "peers", "batch"})
    ->ArgsProduct({{1, 64, 1024}, {1, 64}, {1, 64}})
    ->Unit(benchmark::kNanosecond);

void BM_AdapterDirect(benchmark::State& state) {
    const int peers = static_cast<int>(state.range(0));
    const int batch = static_cast<int>(state.range(1));
    AdapterWorld world(peers, batch);
    size_t i = 0;
    bool ok = true;
    for (auto _ : state) {
        ok = world.runBatch(i) && ok;
    }
    if (!ok) state.SkipWithError("the instant adapter reported a failure");
    reportPerRequest(state, batch);
}
BENCHMARK(BM_AdapterDirect)
    ->ArgNames({"peers", "batch"})
    ->ArgsProduct({{1, 64}, {1, 64}})
    ->Unit(benchmark::kNanosecond);

}  // namespace
}  // namespace mooncake::tent::bench

int main(int argc, char** argv) {
    return mooncake::tent::bench::runBenchmarks(argc, argv, [] {
        mooncake::tent::bench::worlds().clear();
        mooncake::tent::bench::engineWorld().reset();
    });
}
