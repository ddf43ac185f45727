// tent_provider_overhead: what MpcommTransport adds to a request when the
// provider is a real MPComm (softmpcomm here, libmpcomm on an RDMA host),
// next to the same provider calls made directly. Built only when the
// transport is (USE_MPCOMM=ON).
//
// tent_transport_overhead measures the transport against an adapter that
// costs nothing, which shows the transport's own nanoseconds; this one
// shows what those nanoseconds are worth next to what a provider costs a
// request.
//
// Everything runs in this process over loopback: a target MPComm instance
// that publishes one buffer, and two initiators connected to it: a bare
// adapter and an installed MpcommTransport over its own adapter. Both move
// the same bytes to the same target buffer and wait for them in the same
// busy loop, yielding between polls so that the provider's threads get the
// cores of a small host.
//
// BM_ProviderPaired/op:O/bytes:N/batch:B: each iteration runs one batch of
// B requests of N bytes (op 0 WRITE, 1 READ) both ways, the order
// alternating: directly (putAsync/getAsync for the batch, then
// isTransferComplete until true, getTransferResult and releaseTransfer per
// transfer) and through the transport (allocateSubBatch, one
// submitTransferTasks, getTransferStatus per task until it leaves PENDING,
// freeSubBatch). Each way is timed on the wall clock, since the provider's
// work happens on its own threads. Pairing the two in every iteration
// keeps this host's slow and fast phases out of their ratio. Counters:
// direct_ns and transport_ns per request, and transport_over_direct.
#include <benchmark/benchmark.h>
#include <gflags/gflags.h>
#include <glog/logging.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "net/socket_io.h"
#include "overhead_support.h"
#include "tent/common/config.h"
#include "tent/runtime/control_plane.h"
#include "tent/runtime/segment_manager.h"
#include "tent/runtime/topology.h"
#include "tent/runtime/transport.h"
#include "tent/transport/mpcomm/mpcomm_adapter.h"
#include "tent/transport/mpcomm/mpcomm_transport.h"

namespace mooncake::tent::bench {
namespace {

constexpr size_t kMaxBytes = 64 << 10;
constexpr size_t kMaxBatch = 16;
constexpr size_t kArea = kMaxBytes * kMaxBatch;
// Attempts at finding a free listener port (see freeLoopbackPort()).
constexpr int kPortAttempts = 5;

// A port no socket holds now: the kernel's pick for a listener on port 0
// (net::listenOn), closed again. Another process could take it before
// the provider binds it, so callers retry a failed init with a fresh one.
int freeLoopbackPort() {
    int fd = -1;
    uint16_t port = 0;
    if (!net::listenOn(0, fd, port).ok()) return 0;
    ::close(fd);
    return port;
}

// init() on a free port, under the host id "127.0.0.1:<port>" (the form
// of a segment name); the port and the host id out when OK.
Status initOnFreePort(MpcommAdapter& adapter, int& port, std::string& host_id) {
    Status s = Status::InternalError("no free loopback port found");
    for (int attempt = 0; attempt < kPortAttempts; ++attempt) {
        port = freeLoopbackPort();
        if (port == 0) continue;
        host_id = "127.0.0.1:" + std::to_string(port);
        s = adapter.init(host_id, "", port);
        if (s.ok()) return s;
        adapter.shutdown();
    }
    return s;
}

std::string describe(const char* what, const Status& s) {
    return std::string(what) + ": " + s.ToString();
}

// The target, both initiators and their memory, built once.
struct ProviderWorld {
    ProviderWorld() {
        local = static_cast<char*>(std::aligned_alloc(4096, kArea));
        remote = static_cast<char*>(std::aligned_alloc(4096, kArea));
        if (local == nullptr || remote == nullptr) {
            error = "allocating the buffers failed";
            return;
        }
        for (size_t i = 0; i < kArea; ++i) {
            local[i] = static_cast<char>(i * 7);
            remote[i] = static_cast<char>(i * 13);
        }
        if (error.empty()) error = startTarget();
        if (error.empty()) error = startDirect();
        if (error.empty()) error = startTransport();
        // The first requests of each path connect and fetch the keys; the
        // timed loops measure the steady state only.
        if (error.empty()) error = directBatch(Request::WRITE, kMaxBytes, 1);
        if (error.empty()) {
            error = transportBatch({request(Request::WRITE, kMaxBytes, 0)});
        }
    }

    ~ProviderWorld() {
        // Initiators before the target, so that no request is left in
        // flight towards a closed listener.
        if (transport) transport->uninstall();
        if (direct) direct->shutdown();
        if (target) target->shutdown();
        std::free(local);
        std::free(remote);
    }

    std::string startTarget() {
        target = createDefaultMpcommAdapter();
        if (!target->available()) return target->unavailableReason();
        Status s = initOnFreePort(*target, target_port, target_host);
        if (s.ok()) s = target->registerMemory(remote, kArea);
        if (s.ok()) s = target->publishBuffer(remote, kArea, -1);
        if (s.ok()) s = target->startAcceptThread();
        return s.ok() ? "" : describe("target", s);
    }

    std::string startDirect() {
        direct = createDefaultMpcommAdapter();
        int port = 0;
        std::string host_id;
        Status s = initOnFreePort(*direct, port, host_id);
        if (s.ok()) s = direct->registerMemory(local, kArea);
        if (s.ok()) s = direct->connect(target_host, "127.0.0.1", target_port);
        if (s.ok()) {
            s = direct->queryRemoteBuffer(target_host, "127.0.0.1",
                                          target_port);
        }
        return s.ok() ? "" : describe("direct initiator", s);
    }

    std::string startTransport() {
        fetcher = std::make_shared<InProcessFetcher>();
        peer_sm = std::make_shared<SegmentManager>(target_host, fetcher);
        fetcher->add(target_host, peer_sm);
        Status s = peer_sm->updateLocal([&](SegmentDesc& desc) {
            MemorySegmentDesc& memory = desc.getMemory();
            memory.transport_attrs[MPCOMM] =
                "v1:127.0.0.1:" + std::to_string(target_port);
            BufferDesc buffer;
            buffer.addr = reinterpret_cast<uint64_t>(remote);
            buffer.length = kArea;
            buffer.transports = {MPCOMM};
            memory.buffers.push_back(buffer);
            return Status::OK();
        });
        if (s.ok()) s = peer_sm->synchronizeLocal();
        if (!s.ok()) return describe("publishing the target", s);
        std::string local_name = "127.0.0.1:transport";
        local_sm = std::make_shared<SegmentManager>(local_name, fetcher);
        fetcher->add(local_name, local_sm);
        for (int attempt = 0; attempt < kPortAttempts; ++attempt) {
            // The transport takes its listener port from MPCOMM_TCP_PORT.
            setenv("MPCOMM_TCP_PORT",
                   std::to_string(freeLoopbackPort()).c_str(), 1);
            transport = std::make_unique<MpcommTransport>();
            s = transport->install(
                local_name, std::make_shared<ControlService>(local_sm),
                std::make_shared<Topology>(), std::make_shared<Config>());
            if (s.ok()) break;
            transport.reset();
        }
        if (!s.ok()) return describe("MpcommTransport::install", s);
        BufferDesc source;
        source.addr = reinterpret_cast<uint64_t>(local);
        source.length = kArea;
        s = transport->addMemoryBuffer(source, MemoryOptions());
        if (s.ok()) s = local_sm->openRemote(peer_id, target_host);
        return s.ok() ? "" : describe("transport initiator", s);
    }

    Request request(Request::OpCode op, size_t bytes, size_t k) const {
        Request r;
        r.opcode = op;
        r.source = local + k * bytes;
        r.target_id = peer_id;
        r.target_offset = reinterpret_cast<uint64_t>(remote) + k * bytes;
        r.length = bytes;
        r.transport_hint = MPCOMM;
        return r;
    }

    // One batch of direct adapter calls; "" on success.
    std::string directBatch(Request::OpCode op, size_t bytes, size_t batch) {
        for (size_t k = 0; k < batch; ++k) {
            uintptr_t from = reinterpret_cast<uintptr_t>(local + k * bytes);
            uintptr_t to = reinterpret_cast<uintptr_t>(remote + k * bytes);
            handles[k] = op == Request::WRITE
                             ? direct->putAsync(from, target_host, to, bytes)
                             : direct->getAsync(from, target_host, to, bytes);
        }
        bool ok = true;
        for (size_t k = 0; k < batch; ++k) {
            if (handles[k] == kInvalidMpcommTransferHandle) {
                ok = false;
                continue;
            }
            while (!direct->isTransferComplete(handles[k])) {
                std::this_thread::yield();
            }
            MpcommTransferOutcome outcome =
                direct->getTransferResult(handles[k]);
            direct->releaseTransfer(handles[k]);
            ok = ok && outcome.ok && outcome.bytes_transferred == bytes;
        }
        return ok ? "" : "a direct transfer failed";
    }

    // One batch through the Transport API; "" on success.
    std::string transportBatch(const std::vector<Request>& requests) {
        return runTransportBatch(*transport, requests);
    }

    std::string error;
    char* local = nullptr;
    char* remote = nullptr;
    std::shared_ptr<MpcommAdapter> target;
    int target_port = 0;
    std::string target_host;
    std::shared_ptr<MpcommAdapter> direct;
    MpcommTransferHandle handles[kMaxBatch] = {};
    std::shared_ptr<InProcessFetcher> fetcher;
    std::shared_ptr<SegmentManager> peer_sm;
    std::shared_ptr<SegmentManager> local_sm;
    std::unique_ptr<MpcommTransport> transport;
    SegmentID peer_id = 0;
};

std::unique_ptr<ProviderWorld>& providerWorld() {
    static std::unique_ptr<ProviderWorld> world;
    return world;
}

ProviderWorld* worldOrSkip(benchmark::State& state) {
    if (!providerWorld()) providerWorld() = std::make_unique<ProviderWorld>();
    if (providerWorld()->error.empty()) return providerWorld().get();
    state.SkipWithError(providerWorld()->error.c_str());
    return nullptr;
}

// Nanoseconds since `since`, and `since` moved to now.
double lap(std::chrono::steady_clock::time_point& since) {
    auto now = std::chrono::steady_clock::now();
    double ns = std::chrono::duration<double, std::nano>(now - since).count();
    since = now;
    return ns;
}

void BM_ProviderPaired(benchmark::State& state) {
    ProviderWorld* world = worldOrSkip(state);
    if (world == nullptr) return;
    const Request::OpCode op =
        state.range(0) == 0 ? Request::WRITE : Request::READ;
    const size_t bytes = static_cast<size_t>(state.range(1));
    const size_t batch = static_cast<size_t>(state.range(2));
    std::vector<Request> requests;
    for (size_t k = 0; k < batch; ++k) {
        requests.push_back(world->request(op, bytes, k));
    }
    double direct_ns = 0, transport_ns = 0;
    bool transport_first = false;
    std::string error;
    for (auto _ : state) {
        // Which path goes first alternates, so that neither always finds
        // the provider's threads just woken by the other.
        auto since = std::chrono::steady_clock::now();
        if (transport_first) {
            error = world->transportBatch(requests);
            transport_ns += lap(since);
        }
        if (error.empty()) error = world->directBatch(op, bytes, batch);
        direct_ns += lap(since);
        if (error.empty() && !transport_first) {
            error = world->transportBatch(requests);
            transport_ns += lap(since);
        }
        if (!error.empty()) break;
        transport_first = !transport_first;
    }
    if (!error.empty()) {
        state.SkipWithError(error.c_str());
        return;
    }
    const double requests_done =
        static_cast<double>(state.iterations()) * static_cast<double>(batch);
    state.counters["direct_ns"] = direct_ns / requests_done;
    state.counters["transport_ns"] = transport_ns / requests_done;
    state.counters["transport_over_direct"] = transport_ns / direct_ns;
}
// op 0 WRITE, 1 READ; 4 KiB and 64 KiB; one request and 16 at a time.
BENCHMARK(BM_ProviderPaired)
    ->ArgNames({"op", "bytes", "batch"})
    ->ArgsProduct({{0, 1}, {4096, kMaxBytes}, {1, 16}})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace mooncake::tent::bench

int main(int argc, char** argv) {
    return mooncake::tent::bench::runBenchmarks(
        argc, argv, [] { mooncake::tent::bench::providerWorld().reset(); });
}
