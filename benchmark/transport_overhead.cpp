// tent_transport_overhead: the CPU time MpcommTransport adds to each request
// on top of the provider, measured against a provider that costs nothing.
//
// BM_TransportWrite drives one WRITE per iteration through the public
// Transport API (allocateSubBatch, submitTransferTasks, getTransferStatus
// until COMPLETED, freeSubBatch) of an installed MpcommTransport whose
// adapter completes every transfer the moment it is posted. The peers are
// SegmentManagers in this process, so descriptor look-ups, the peer cache
// and the task mapping all run as in production while nothing touches a
// socket. Arguments: how many buffers each peer publishes (the transport
// looks at them on every request) and how many peers the requests rotate
// over.
//
// BM_AdapterDirect makes the adapter calls a request needs (putAsync,
// isTransferComplete, getTransferResult, releaseTransfer) directly, so the
// difference between the two is the transport's own share.
//
// TransferEngine::submitTransfer is not measured here: the engine builds
// its transports from a static table with the default (libmpcomm or stub)
// adapter, so it cannot run over an injected one without real networking.
//
// Only the Transport API and MpcommTransport's adapter constructor are
// used, so the benchmark keeps compiling while the transport's internals
// change.
#include <benchmark/benchmark.h>
#include <gflags/gflags.h>
#include <glog/logging.h>

#include <array>
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "tent/common/config.h"
#include "tent/runtime/control_plane.h"
#include "tent/runtime/segment_manager.h"
#include "tent/runtime/topology.h"
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

// Answers a descriptor request with another in-process SegmentManager's
// published snapshot, as the p2p metadata RPC would with a real peer.
class InProcessFetcher : public SegmentFetcher {
 public:
    void add(const std::string& name, std::shared_ptr<SegmentManager> sm) {
        std::lock_guard<std::mutex> lock(mu_);
        peers_[name] = sm;
    }
    Status fetch(const std::string& name, SegmentDesc& out) override {
        std::lock_guard<std::mutex> lock(mu_);
        auto it = peers_.find(name);
        std::shared_ptr<SegmentManager> peer =
            it == peers_.end() ? nullptr : it->second.lock();
        if (!peer) return Status::MetadataError("no segment named " + name);
        out = *peer->getLocal();
        return Status::OK();
    }

 private:
    std::mutex mu_;
    // Weak: every manager holds this fetcher, so strong references back
    // would form a cycle.
    std::map<std::string, std::weak_ptr<SegmentManager>> peers_;
};

constexpr uint64_t kBlock = 64 << 10;
// Where the fake peer buffers start; never dereferenced, the adapter does
// not move bytes.
constexpr uint64_t kPeerBase = 0x7f0000000000ull;

// An installed MpcommTransport over InstantMpcommAdapter, with `peers`
// opened segments that each publish `buffers` buffers of kBlock bytes.
struct World {
    struct Peer {
        SegmentID id = 0;
        std::string name;
    };

    World(int buffers, int peers) : buffers(buffers) {
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
        adapter = std::make_shared<InstantMpcommAdapter>();
        transport = std::make_unique<MpcommTransport>(adapter);
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
            error = writeOnce(p, 0);
        }
    }

    ~World() {
        if (transport) transport->uninstall();
    }

    Request request(size_t peer, size_t buffer) {
        Request r;
        r.opcode = Request::WRITE;
        r.source = local_data;
        r.target_id = peers[peer].id;
        r.target_offset = kPeerBase + buffer * kBlock;
        r.length = kBlock;
        r.transport_hint = MPCOMM;
        return r;
    }

    // One request through the Transport API; "" on success.
    std::string writeOnce(size_t peer, size_t buffer) {
        std::vector<Request> requests{request(peer, buffer)};
        Transport::SubBatchRef batch = nullptr;
        Status s = transport->allocateSubBatch(batch, 1);
        if (s.ok()) s = transport->submitTransferTasks(batch, requests);
        TransferStatus status;
        status.s = PENDING;
        while (s.ok() && status.s == PENDING) {
            s = transport->getTransferStatus(batch, 0, status);
        }
        if (batch != nullptr) transport->freeSubBatch(batch);
        if (!s.ok()) return s.ToString();
        if (status.s != COMPLETED) {
            return std::string("transfer ended ") +
                   transferStatusName(status.s);
        }
        return "";
    }

    int buffers;
    std::string error;
    std::shared_ptr<InProcessFetcher> fetcher;
    std::shared_ptr<SegmentManager> local_sm;
    std::vector<std::shared_ptr<SegmentManager>> peer_managers;
    std::vector<Peer> peers;
    std::shared_ptr<InstantMpcommAdapter> adapter;
    std::unique_ptr<MpcommTransport> transport;
    // The source of every WRITE; the instant adapter never reads it.
    char local_data[kBlock] = {};
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

void BM_TransportWrite(benchmark::State& state) {
    const int buffers = static_cast<int>(state.range(0));
    const int peers = static_cast<int>(state.range(1));
    World& world = worldFor(buffers, peers);
    if (!world.error.empty()) {
        state.SkipWithError(world.error.c_str());
        return;
    }
    // Requests rotate over the peers and, per peer, over its buffers, so
    // every published buffer is a target and no peer stays hot.
    size_t i = 0;
    std::string error;
    for (auto _ : state) {
        error = world.writeOnce(i % peers, (i / peers) % buffers);
        if (!error.empty()) break;
        ++i;
    }
    if (!error.empty()) state.SkipWithError(error.c_str());
    state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_TransportWrite)
    ->ArgNames({"buffers", "peers"})
    ->ArgsProduct({{1, 64, 1024}, {1, 64}})
    ->Unit(benchmark::kNanosecond);

void BM_AdapterDirect(benchmark::State& state) {
    const int peers = static_cast<int>(state.range(0));
    auto owned = std::make_shared<InstantMpcommAdapter>();
    // Called through the base class, as the transport calls it; hiding the
    // pointer keeps the compiler from devirtualising and inlining the calls.
    MpcommAdapter* adapter = owned.get();
    benchmark::DoNotOptimize(adapter);
    std::vector<std::string> hosts;
    for (int p = 0; p < peers; ++p) {
        hosts.push_back("10.1.0." + std::to_string(p + 1) + ":16000");
    }
    static char local_data[kBlock];
    size_t i = 0;
    bool ok = true;
    for (auto _ : state) {
        MpcommTransferHandle handle =
            adapter->putAsync(reinterpret_cast<uintptr_t>(local_data),
                              hosts[i % peers], kPeerBase, kBlock);
        while (!adapter->isTransferComplete(handle)) {
        }
        MpcommTransferOutcome outcome = adapter->getTransferResult(handle);
        adapter->releaseTransfer(handle);
        ok = ok && outcome.ok && outcome.bytes_transferred == kBlock;
        ++i;
    }
    if (!ok) state.SkipWithError("the instant adapter reported a failure");
    state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_AdapterDirect)
    ->ArgName("peers")
    ->Arg(1)
    ->Arg(64)
    ->Unit(benchmark::kNanosecond);

}  // namespace
}  // namespace mooncake::tent::bench

int main(int argc, char** argv) {
    // The transport logs every install and connection at INFO; the
    // benchmark's own table is what matters, so only warnings show unless
    // --minloglevel says otherwise.
    FLAGS_logtostderr = true;
    FLAGS_minloglevel = google::GLOG_WARNING;
    benchmark::Initialize(&argc, argv);
    gflags::ParseCommandLineFlags(&argc, &argv, true);
    google::InitGoogleLogging(argv[0]);
    benchmark::RunSpecifiedBenchmarks();
    // Uninstalls the transports while glog and the runtime are still up.
    mooncake::tent::bench::worlds().clear();
    benchmark::Shutdown();
    return 0;
}
