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
// Only public APIs are used (Transport, TransferEngine, the MpcommTransport
// adapter constructor), so the benchmark keeps compiling while the
// internals change.
#include <benchmark/benchmark.h>
#include <gflags/gflags.h>
#include <glog/logging.h>

#include <array>
#include <atomic>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "overhead_support.h"
#include "tent/common/config.h"
#include "tent/runtime/control_plane.h"
#include "tent/runtime/segment_manager.h"
#include "tent/runtime/topology.h"
#include "tent/runtime/transport.h"
#include "tent/transfer_engine.h"
#include "tent/transport/mpcomm/mpcomm_adapter.h"
#include "tent/transport/mpcomm/mpcomm_transport.h"

namespace mooncake::tent::bench {
namespace {

// Every transfer completes as it is posted, with full success. The length
// of a posted transfer is kept in a ring indexed by handle, because a
// transfer that reports fewer bytes than requested is demoted to FAILED;
// the ring is large enough for any number of transfers in flight that a
// benchmark here creates, and atomic so that posting and polling may
// happen on different threads.
class InstantMpcommAdapter final : public MpcommAdapter {
 public:
    bool available() const noexcept override { return true; }

    Status init(const std::string&, const std::string&, int tcp_port) override {
        port_.store(tcp_port, std::memory_order_relaxed);
        return Status::OK();
    }
    int tcpPort() const override {
        return port_.load(std::memory_order_relaxed);
    }
    Status startAcceptThread() override { return Status::OK(); }
    void stopAcceptThread() override {}
    void shutdown() override {}

    Status registerMemory(void*, size_t) override { return Status::OK(); }
    void unregisterMemory(void*) override {}
    Status publishBuffer(void*, size_t, int) override { return Status::OK(); }
    void unpublishBuffer(void*) override {}

    Status connect(const std::string&, const std::string&, int) override {
        return Status::OK();
    }
    Status queryRemoteBuffer(const std::string&, const std::string&,
                             int) override {
        return Status::OK();
    }

    MpcommTransferHandle putAsync(uintptr_t, const std::string&, uintptr_t,
                                  size_t length) override {
        return post(length);
    }
    MpcommTransferHandle getAsync(uintptr_t, const std::string&, uintptr_t,
                                  size_t length) override {
        return post(length);
    }
    bool isTransferComplete(MpcommTransferHandle) override { return true; }
    MpcommTransferOutcome getTransferResult(
        MpcommTransferHandle handle) override {
        size_t length =
            lengths_[handle % kSlots].load(std::memory_order_acquire);
        return {true, length, 0};
    }
    void releaseTransfer(MpcommTransferHandle) override {}

 private:
    static constexpr size_t kSlots = 4096;

    MpcommTransferHandle post(size_t length) {
        MpcommTransferHandle handle =
            next_.fetch_add(1, std::memory_order_relaxed);
        lengths_[handle % kSlots].store(length, std::memory_order_release);
        return handle;
    }

    std::atomic<int> port_{0};
    // Starts at 1: 0 is kInvalidMpcommTransferHandle.
    std::atomic<MpcommTransferHandle> next_{1};
    std::array<std::atomic<size_t>, kSlots> lengths_{};
};

constexpr uint64_t kBlock = 64 << 10;
// Where the fake peer buffers of BM_TransportWrite start; never
// dereferenced, the adapter does not move bytes.
constexpr uint64_t kPeerBase = 0x7f0000000000ull;
// The source of every WRITE; the instant adapter never reads it.
char g_local_data[kBlock];

// Request i goes to peer i % peers and, on that peer, to buffer
// (i / peers) % buffers: every published buffer is a target and no peer
// stays hot. Cut into the request lists of consecutive batches, built
// before timing so that the loop allocates nothing of its own.
std::vector<std::vector<Request>> batchesOf(
    int buffers, int peers, int batch,
    const std::function<Request(size_t peer, size_t buffer)>& make) {
    const size_t total = static_cast<size_t>(buffers) * peers;
    const size_t count =
        total < static_cast<size_t>(batch) ? 1 : (total + batch - 1) / batch;
    std::vector<std::vector<Request>> out(count);
    size_t i = 0;
    for (auto& requests : out) {
        for (int k = 0; k < batch; ++k, ++i) {
            requests.push_back(make(i % peers, (i / peers) % buffers));
        }
    }
    return out;
}

// An installed MpcommTransport over InstantMpcommAdapter, with `peers`
// opened segments that each publish `buffers` buffers of kBlock bytes.
struct World {
    struct Peer {
        SegmentID id = 0;
        std::string name;
    };

    World(int buffers, int peers) {
        fetcher = std::make_shared<InProcessFetcher>();
        std::string local_name = "127.0.0.1:15999";
        local_sm = std::make_shared<SegmentManager>(local_name, fetcher);
        fetcher->add(local_name, local_sm);
        for (int p = 0; p < peers; ++p) {
            std::string ip = "10.1." + std::to_string(p / 250) + "." +
                             std::to_string(p % 250 + 1);
            auto sm = std::make_shared<SegmentManager>(ip + ":16000", fetcher);
            fetcher->add(ip + ":16000", sm);
            Status s = sm->updateLocal([&](SegmentDesc& desc) {
                MemorySegmentDesc& memory = desc.getMemory();
                memory.transport_attrs[MPCOMM] = "v1:" + ip + ":14000";
                for (int b = 0; b < buffers; ++b) {
                    BufferDesc buffer;
                    buffer.addr = kPeerBase + b * kBlock;
                    buffer.length = kBlock;
                    buffer.transports = {MPCOMM};
                    memory.buffers.push_back(buffer);
                }
                return Status::OK();
            });
            if (s.ok()) s = sm->synchronizeLocal();
            if (!s.ok()) {
                error = "publishing peer " + ip + ": " + s.ToString();
                return;
            }
            peer_managers.push_back(sm);
            this->peers.push_back({0, ip + ":16000"});
        }
        transport = std::make_unique<MpcommTransport>(
            std::make_shared<InstantMpcommAdapter>());
        Status s = transport->install(
            local_name, std::make_shared<ControlService>(local_sm),
            std::make_shared<Topology>(), std::make_shared<Config>());
        if (!s.ok()) {
            error = "MpcommTransport::install: " + s.ToString();
            return;
        }
        for (Peer& peer : this->peers) {
            s = local_sm->openRemote(peer.id, peer.name);
            if (!s.ok()) {
                error = "openRemote(" + peer.name + "): " + s.ToString();
                return;
            }
        }
        // Connects to every peer and fetches its keys, so that the timed
        // loop measures the steady state only.
        for (size_t p = 0; p < this->peers.size() && error.empty(); ++p) {
            error = runBatch({request(p, 0)});
        }
    }

    ~World() {
        if (transport) transport->uninstall();
    }

    Request request(size_t peer, size_t buffer) const {
        Request r;
        r.opcode = Request::WRITE;
        r.source = g_local_data;
        r.target_id = peers[peer].id;
        r.target_offset = kPeerBase + buffer * kBlock;
        r.length = kBlock;
        r.transport_hint = MPCOMM;
        return r;
    }

    // One batch through the Transport API; "" on success.
    std::string runBatch(const std::vector<Request>& requests) {
        return runTransportBatch(*transport, requests);
    }

    std::string error;
    std::shared_ptr<InProcessFetcher> fetcher;
    std::shared_ptr<SegmentManager> local_sm;
    std::vector<std::shared_ptr<SegmentManager>> peer_managers;
    std::vector<Peer> peers;
    std::unique_ptr<MpcommTransport> transport;
};

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

// The timed loop of the transport and engine cases: rotates over batches
// built before timing, and stops at the first failure.
// With `one_target`, every request goes to the first peer instead.
template <typename WorldT>
void timeBatches(benchmark::State& state, WorldT& world, int buffers, int peers,
                 int batch, bool one_target = false) {
    if (!world.error.empty()) {
        state.SkipWithError(world.error.c_str());
        return;
    }
    auto batches = batchesOf(buffers, peers, batch, [&](size_t p, size_t b) {
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
    reportPerRequest(state, batch);
}

void BM_TransportWrite(benchmark::State& state) {
    const int buffers = static_cast<int>(state.range(0));
    const int peers = static_cast<int>(state.range(1));
    const int batch = static_cast<int>(state.range(2));
    timeBatches(state, worldFor(buffers, peers), buffers, peers, batch);
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
    const int buffers = static_cast<int>(state.range(0));
    const int peers = static_cast<int>(state.range(1));
    const int batch = static_cast<int>(state.range(2));
    timeBatches(state, worldFor(buffers, peers), buffers, peers, batch, true);
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

// A TransferEngine whose MPComm transport runs over InstantMpcommAdapter,
// and `peers` more in this process, each registering the same `buffers`
// blocks of kBlock bytes (one untouched allocation: nothing is copied).
struct EngineWorld {
    EngineWorld(int buffers, int peers) {
        setTransportFactoryOverride(MPCOMM, [] {
            return std::make_unique<MpcommTransport>(
                std::make_shared<InstantMpcommAdapter>());
        });
        pool_size = static_cast<size_t>(buffers) * kBlock;
        pool = std::aligned_alloc(4096, pool_size);
        std::vector<void*> addrs;
        std::vector<size_t> sizes;
        for (int b = 0; b < buffers; ++b) {
            addrs.push_back(static_cast<char*>(pool) + b * kBlock);
            sizes.push_back(kBlock);
        }
        for (int p = 0; p < peers && error.empty(); ++p) {
            auto engine = std::make_unique<TransferEngine>(config());
            error = check(*engine, "peer engine");
            if (!error.empty()) break;
            Status s = engine->registerLocalMemory(addrs, sizes);
            if (!s.ok()) error = "registerLocalMemory: " + s.ToString();
            peer_engines.push_back(std::move(engine));
        }
        if (error.empty()) {
            local = std::make_unique<TransferEngine>(config());
            error = check(*local, "local engine");
        }
        for (size_t p = 0; p < peer_engines.size() && error.empty(); ++p) {
            SegmentID id = 0;
            std::string name = peer_engines[p]->getSegmentName();
            Status s = local->openSegment(id, name);
            if (!s.ok()) error = "openSegment(" + name + "): " + s.ToString();
            peer_ids.push_back(id);
        }
        for (size_t p = 0; p < peer_ids.size() && error.empty(); ++p) {
            error = runBatch({request(p, 0)});
        }
    }

    ~EngineWorld() {
        local.reset();
        peer_engines.clear();
        std::free(pool);
        setTransportFactoryOverride(MPCOMM, nullptr);
    }

    static std::shared_ptr<Config> config() {
        auto conf = std::make_shared<Config>();
        conf->set("rpc_server_hostname", "127.0.0.1");
        conf->set("transports/tcp/enable", false);
        conf->set("transports/mpcomm/enable", true);
        return conf;
    }

    static std::string check(TransferEngine& engine, const char* what) {
        if (!engine.available()) return std::string(what) + " unavailable";
        for (const std::string& name : engine.getSupportedTransports()) {
            if (name == "mpcomm") return "";
        }
        return std::string(what) + " has no mpcomm transport";
    }

    Request request(size_t peer, size_t buffer) const {
        Request r;
        r.opcode = Request::WRITE;
        r.source = g_local_data;
        r.target_id = peer_ids[peer];
        r.target_offset = reinterpret_cast<uint64_t>(pool) + buffer * kBlock;
        r.length = kBlock;
        r.transport_hint = MPCOMM;
        return r;
    }

    // One batch through the engine API; "" on success.
    std::string runBatch(const std::vector<Request>& requests) {
        BatchID id = local->allocateBatch(requests.size());
        if (id == 0) return "allocateBatch failed";
        Status s = local->submitTransfer(id, requests);
        TransferStatus status;
        status.s = COMPLETED;
        for (size_t t = 0;
             s.ok() && status.s == COMPLETED && t < requests.size(); ++t) {
            status.s = PENDING;
            while (s.ok() && status.s == PENDING) {
                s = local->getTransferStatus(id, t, status);
            }
        }
        Status freed = local->freeBatch(id);
        if (!s.ok()) return s.ToString();
        if (!freed.ok()) return freed.ToString();
        if (status.s != COMPLETED) {
            return std::string("transfer ended ") +
                   transferStatusName(status.s);
        }
        return "";
    }

    std::string error;
    void* pool = nullptr;
    size_t pool_size = 0;
    std::vector<std::unique_ptr<TransferEngine>> peer_engines;
    std::unique_ptr<TransferEngine> local;
    std::vector<SegmentID> peer_ids;
};

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
    const int buffers = static_cast<int>(state.range(0));
    const int peers = static_cast<int>(state.range(1));
    const int batch = static_cast<int>(state.range(2));
    if (!engineWorld() || engineWorldKey() != std::make_pair(buffers, peers)) {
        engineWorld().reset();
        engineWorld() = std::make_unique<EngineWorld>(buffers, peers);
        engineWorldKey() = {buffers, peers};
    }
    timeBatches(state, *engineWorld(), buffers, peers, batch);
}
BENCHMARK(BM_EngineWrite)
    ->ArgNames({"buffers", "peers", "batch"})
    ->ArgsProduct({{1, 64, 1024}, {1, 64}, {1, 64}})
    ->Unit(benchmark::kNanosecond);

void BM_AdapterDirect(benchmark::State& state) {
    const int peers = static_cast<int>(state.range(0));
    const int batch = static_cast<int>(state.range(1));
    auto owned = std::make_shared<InstantMpcommAdapter>();
    // Called through the base class, as the transport calls it; hiding the
    // pointer keeps the compiler from devirtualising and inlining the calls.
    // (Not benchmark::DoNotOptimize: with GCC 12 under ASan+UBSan its
    // two-alternative "+m,r" operand left the pointer reading 0x1.)
    MpcommAdapter* adapter = owned.get();
    asm volatile("" : "+r"(adapter));
    std::vector<std::string> hosts;
    for (int p = 0; p < peers; ++p) {
        hosts.push_back("10.1.0." + std::to_string(p + 1) + ":16000");
    }
    std::vector<MpcommTransferHandle> handles(batch);
    size_t i = 0;
    bool ok = true;
    for (auto _ : state) {
        for (int k = 0; k < batch; ++k, ++i) {
            handles[k] =
                adapter->putAsync(reinterpret_cast<uintptr_t>(g_local_data),
                                  hosts[i % peers], kPeerBase, kBlock);
        }
        for (int k = 0; k < batch; ++k) {
            while (!adapter->isTransferComplete(handles[k])) {
            }
            MpcommTransferOutcome outcome =
                adapter->getTransferResult(handles[k]);
            adapter->releaseTransfer(handles[k]);
            ok = ok && outcome.ok && outcome.bytes_transferred == kBlock;
        }
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
