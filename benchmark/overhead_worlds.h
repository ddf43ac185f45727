// The in-process worlds tent_transport_overhead times and tent_cost_count
// counts instructions in, kept in one place so that both measure the same
// requests: an MPComm adapter that completes every transfer at once, an
// installed MpcommTransport whose peers are SegmentManagers in this
// process (World), a TransferEngine whose peers are engines in this
// process (EngineWorld), and the adapter calls of one batch made directly
// (runAdapterBatch). See transport_overhead.cpp for what each case means.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kit/instant_mpcomm_adapter.h"
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

// Every transfer completes as it is posted, with full success; no lock,
// no bookkeeping (tests/kit/instant_mpcomm_adapter.h).
using InstantMpcommAdapter = testing::InstantMpcommAdapter;

constexpr uint64_t kBlock = 64 << 10;
// Where the fake peer buffers of BM_TransportWrite start; never
// dereferenced, the adapter does not move bytes.
constexpr uint64_t kPeerBase = 0x7f0000000000ull;
// The source of every WRITE; the instant adapter never reads it.
inline char g_local_data[kBlock];

// Request i goes to peer i % peers and, on that peer, to buffer
// (i / peers) % buffers: every published buffer is a target and no peer
// stays hot. Cut into the request lists of consecutive batches, built
// before timing so that the loop allocates nothing of its own.
inline std::vector<std::vector<Request>> batchesOf(
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
// `cache_ttl`, when given, replaces the local SegmentManager's default
// lifetime of a fetched peer descriptor.
struct World {
    struct Peer {
        SegmentID id = 0;
        std::string name;
    };

    World(int buffers, int peers,
          std::optional<std::chrono::milliseconds> cache_ttl = std::nullopt) {
        fetcher = std::make_shared<InProcessFetcher>();
        std::string local_name = "127.0.0.1:15999";
        local_sm = cache_ttl
                       ? std::make_shared<SegmentManager>(local_name, fetcher,
                                                          *cache_ttl)
                       : std::make_shared<SegmentManager>(local_name, fetcher);
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

// A TransferEngine whose MPComm transport runs over InstantMpcommAdapter,
// and `peers` more in this process, each registering the same `buffers`
// blocks of kBlock bytes (one untouched allocation: nothing is copied).
// `cache_ttl`, when given, replaces the local engine's
// metadata/cache_ttl_ms.
struct EngineWorld {
    EngineWorld(
        int buffers, int peers,
        std::optional<std::chrono::milliseconds> cache_ttl = std::nullopt) {
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
            std::shared_ptr<Config> conf = config();
            if (cache_ttl) {
                conf->set("metadata/cache_ttl_ms",
                          static_cast<Json::Int64>(cache_ttl->count()));
            }
            local = std::make_unique<TransferEngine>(conf);
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

// The adapter calls of one batch of `handles.size()` WRITEs of kBlock,
// made directly: putAsync for each, then isTransferComplete,
// getTransferResult and releaseTransfer for each. Request i (counted on
// across batches in `i`) goes to hosts[i % hosts.size()]. False when a
// transfer reports a failure or a short length.
inline bool runAdapterBatch(MpcommAdapter* adapter,
                            const std::vector<std::string>& hosts,
                            std::vector<MpcommTransferHandle>& handles,
                            size_t& i) {
    bool ok = true;
    for (size_t k = 0; k < handles.size(); ++k, ++i) {
        handles[k] =
            adapter->putAsync(reinterpret_cast<uintptr_t>(g_local_data),
                              hosts[i % hosts.size()], kPeerBase, kBlock);
    }
    for (MpcommTransferHandle handle : handles) {
        while (!adapter->isTransferComplete(handle)) {
        }
        MpcommTransferOutcome outcome = adapter->getTransferResult(handle);
        adapter->releaseTransfer(handle);
        ok = ok && outcome.ok && outcome.bytes_transferred == kBlock;
    }
    return ok;
}

// What runAdapterBatch runs over: an InstantMpcommAdapter reached through
// the base class, as the transport calls it, `peers` host ids and room for
// `batch` handles.
struct AdapterWorld {
    AdapterWorld(int peers, int batch) : handles(batch) {
        // Hiding the pointer keeps the compiler from devirtualising and
        // inlining the calls. (Not benchmark::DoNotOptimize: with GCC 12
        // under ASan+UBSan its two-alternative "+m,r" operand left the
        // pointer reading 0x1.)
        MpcommAdapter* hidden = owned.get();
        asm volatile("" : "+r"(hidden));
        adapter = hidden;
        for (int p = 0; p < peers; ++p) {
            hosts.push_back("10.1.0." + std::to_string(p + 1) + ":16000");
        }
    }
    bool runBatch(size_t& i) {
        return runAdapterBatch(adapter, hosts, handles, i);
    }

    std::shared_ptr<InstantMpcommAdapter> owned =
        std::make_shared<InstantMpcommAdapter>();
    MpcommAdapter* adapter = nullptr;
    std::vector<std::string> hosts;
    std::vector<MpcommTransferHandle> handles;
};

}  // namespace mooncake::tent::bench
