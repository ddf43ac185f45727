// MPComm: the public class. Wires the listener (Server), the per-peer data
// connections (DataConn), the memory and transfer tables together.
//
// Decisions where libmpcomm's contract is silent:
// - putAsync / getAsync never return INVALID_TRANSFER_HANDLE: every failure,
//   including argument errors, yields a handle that is already complete with
//   the error code, so a caller that polls can never hang.
// - isTransferComplete() on an unknown handle returns true; its
//   getTransferResult() returns MPCOMM_ERR_INVALID_HANDLE.
// - The local range of a transfer must be registered (MPCOMM_ERR_NOT_REGISTERED
//   otherwise), as an RDMA lkey would require.
// - A transfer to a host whose record holds no keys, or whose start address is
//   in no queried entry, fails with MPCOMM_ERR_REMOTE_ACCESS without touching
//   the network; a range that starts inside an entry but runs past it goes to
//   the target, which refuses the slices outside it.
// - queryRemoteBuffer() requires a prior connect() to that host id
//   (MPCOMM_ERR_UNKNOWN_HOST otherwise), since keys are useless without the
//   data connections they belong to.
// - Once any data connection of a peer record has ended (dropped, or no
//   progress within SOFTMPCOMM_PROGRESS_TIMEOUT_MS), the record is failed:
//   posts to that host id complete at once with MPCOMM_ERR_CONNECTION_LOST
//   until a new connect() replaces the record, as posting to a QP in the
//   error state fails.
// - shutdown() wakes a connect() / queryRemoteBuffer() blocked in its
//   handshake on another thread; that call returns
//   MPCOMM_ERR_NOT_INITIALIZED.
#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <random>

#include "config.h"
#include "data_conn.h"
#include "log.h"
#include "memory_table.h"
#include "mpcomm_public.h"
#include "protocol.h"
#include "server.h"
#include "socket_util.h"
#include "transfer_table.h"

namespace mpcomm {

using detail::Config;
using detail::DataConn;
using detail::Transfer;

namespace {

// The record of one connected peer; replaced wholesale by a new connect().
struct Peer {
    std::string host_id;
    std::string addr;
    int port = 0;
    std::vector<std::shared_ptr<DataConn>> conns;  // rails x QPs
    std::shared_ptr<detail::PeerLink> link;        // shared by conns
    // Guarded by MPComm::Impl::peers_mu.
    bool has_keys = false;
    std::vector<RemoteBufferEntry> entries;

    void closeAll() {
        for (auto& conn : conns) conn->close();
    }
};

bool validPort(int port) { return port >= 1 && port <= 65535; }

// Opens a control connection and checks the announced host id; on success
// *socket owns it (still woken by a shutdown()).
int controlHandshake(const std::string& my_host, const std::string& host_id,
                     const std::string& addr, int port, int timeout_ms,
                     detail::SocketSet* handshakes,
                     detail::TrackedSocket* socket, uint32_t* peer_rails_out) {
    std::string error;
    int fd = detail::connectTcp(addr, port, timeout_ms, &error, handshakes);
    if (fd < 0) {
        MPCOMM_LOG(kError) << "handshake with '" << host_id << "': " << error
                           << " (SOFTMPCOMM_HANDSHAKE_TIMEOUT_MS=" << timeout_ms
                           << ")";
        return MPCOMM_ERR_CONNECT;
    }
    detail::TrackedSocket tracked(fd, handshakes);
    std::string peer;
    uint32_t peer_rails = 0;
    if (!detail::clientHello(fd, detail::ConnKind::kControl, my_host, 0, 0,
                             detail::Deadline::in(timeout_ms), &peer,
                             &peer_rails, &error)) {
        MPCOMM_LOG(kError) << "handshake with '" << host_id << "' at " << addr
                           << ":" << port << ": " << error
                           << " (SOFTMPCOMM_HANDSHAKE_TIMEOUT_MS=" << timeout_ms
                           << ")";
        return MPCOMM_ERR_CONNECT;
    }
    if (peer != host_id) {
        MPCOMM_LOG(kError) << "handshake at " << addr << ":" << port
                           << " reached host '" << peer << "', expected '"
                           << host_id << "'";
        return MPCOMM_ERR_CONNECT;
    }
    *socket = std::move(tracked);
    *peer_rails_out = peer_rails;
    return MPCOMM_SUCCESS;
}

// One QUERY_REQ / QUERY_RESP exchange within timeout_ms. The reply buffer
// grows with the bytes that arrive, never to what the header announces.
bool queryBufferList(int fd, int timeout_ms,
                     std::vector<RemoteBufferEntry>* entries) {
    detail::Deadline deadline = detail::Deadline::in(timeout_ms);
    detail::FrameHeader request;
    request.type = detail::MsgType::kQueryReq;
    detail::FrameHeader reply;
    if (!detail::sendFrame(fd, request, deadline) ||
        !detail::recvHeader(fd, &reply, deadline) ||
        !detail::checkReply(detail::ConnStage::kControl, reply) ||
        reply.status != MPCOMM_SUCCESS)
        return false;
    std::string payload;
    while (payload.size() < reply.payload_len) {
        size_t chunk = std::min<uint64_t>(reply.payload_len - payload.size(),
                                          detail::kChunkSize);
        size_t at = payload.size();
        payload.resize(at + chunk);
        if (!detail::recvAll(fd, &payload[at], chunk, deadline)) return false;
    }
    return detail::decodeBufferList(payload, entries);
}

}  // namespace

struct MPComm::Impl {
    std::mutex state_mu;  // init / shutdown / accept thread transitions
    std::atomic<bool> initialized{false};
    std::string host_id;
    Config config;
    int tcp_port = 0;
    std::unique_ptr<detail::Server> server;
    // Sockets of handshakes in progress, woken by shutdown().
    detail::SocketSet handshakes;

    detail::MemoryTable memory;
    detail::TransferTable transfers;

    std::mutex peers_mu;
    std::map<std::string, std::shared_ptr<Peer>> peers;

    std::mutex rng_mu;
    std::mt19937 rng{std::random_device{}()};

    std::vector<uint32_t> newKeys() {
        std::lock_guard<std::mutex> lock(rng_mu);
        std::vector<uint32_t> keys;
        for (size_t i = 0; i < config.rails.size(); ++i) {
            uint32_t key;
            do {
                key = static_cast<uint32_t>(rng());
            } while (key == 0);
            keys.push_back(key);
        }
        return keys;
    }

    std::shared_ptr<Peer> findPeer(const std::string& host) {
        std::lock_guard<std::mutex> lock(peers_mu);
        auto it = peers.find(host);
        return it == peers.end() ? nullptr : it->second;
    }

    // A handshake that failed because shutdown() cancelled it reports that.
    int handshakeFailure(int rc) const {
        return initialized.load() ? rc : MPCOMM_ERR_NOT_INITIALIZED;
    }

    TransferHandle submit(bool is_get, uintptr_t local, const std::string& host,
                          uintptr_t remote, size_t length);
};

MPComm::MPComm() : impl_(new Impl) {}

MPComm::~MPComm() { shutdown(); }

int MPComm::init(const std::string& host_id, const std::string& device_names,
                 int tcp_port) {
    std::lock_guard<std::mutex> lock(impl_->state_mu);
    if (impl_->initialized.load()) {
        MPCOMM_LOG(kError) << "init: already initialised as host '"
                           << impl_->host_id << "'";
        return MPCOMM_ERR_INVALID_ARG;
    }
    if (host_id.empty() || host_id.size() > detail::kMaxHostIdLength) {
        MPCOMM_LOG(kError) << "init: invalid host id '" << host_id << "'";
        return MPCOMM_ERR_INVALID_ARG;
    }
    if (!validPort(tcp_port)) {
        MPCOMM_LOG(kError) << "init: invalid tcp_port " << tcp_port
                           << " (expected 1-65535; 0 does not pick one)";
        return MPCOMM_ERR_INVALID_ARG;
    }
    Config config;
    std::string error;
    if (!detail::loadConfig(device_names, &config, &error)) {
        MPCOMM_LOG(kError) << "init: " << error;
        return MPCOMM_ERR_INVALID_ARG;
    }
    if (config.rails.size() > detail::kMaxRails) {
        MPCOMM_LOG(kError) << "init: " << config.rails.size()
                           << " rails exceed the limit of "
                           << detail::kMaxRails;
        return MPCOMM_ERR_INVALID_ARG;
    }
    detail::ServerOptions options;
    options.rails = static_cast<uint32_t>(config.rails.size());
    options.max_slice = config.max_transfer_size;
    options.idle_timeout_ms = config.idle_timeout_ms;
    options.max_connections = config.max_connections;
    options.send_buffer_bytes = config.send_buffer_bytes;
    auto server =
        std::make_unique<detail::Server>(host_id, options, &impl_->memory);
    if (server->listen(tcp_port, &error) != MPCOMM_SUCCESS) {
        MPCOMM_LOG(kError) << "init: " << error;
        return MPCOMM_ERR_BIND;
    }
    impl_->host_id = host_id;
    impl_->config = config;
    impl_->tcp_port = tcp_port;
    impl_->server = std::move(server);
    impl_->handshakes.reopen();
    impl_->initialized.store(true);
    std::string rails;
    for (const auto& rail : config.rails)
        rails += (rails.empty() ? "" : ",") + rail;
    MPCOMM_LOG(kInfo) << "softmpcomm 1.4.0 initialised: host '" << host_id
                      << "', port " << tcp_port << ", rails [" << rails << "], "
                      << config.qps_per_connection << " QP(s) per connection, "
                      << config.max_outstanding_per_qp
                      << " slice(s) outstanding per QP, max transfer "
                      << config.max_transfer_size
                      << " bytes, timeouts: progress "
                      << config.progress_timeout_ms << " ms, handshake "
                      << config.handshake_timeout_ms << " ms, idle "
                      << config.idle_timeout_ms << " ms, max connections "
                      << config.max_connections << ", send buffer "
                      << config.send_buffer_bytes << " bytes";
    return MPCOMM_SUCCESS;
}

int MPComm::getTcpPort() const {
    return impl_->initialized.load() ? impl_->tcp_port : 0;
}

int MPComm::startAcceptThread() {
    std::lock_guard<std::mutex> lock(impl_->state_mu);
    if (!impl_->initialized.load()) return MPCOMM_ERR_NOT_INITIALIZED;
    return impl_->server->startAccepting();
}

void MPComm::stopAcceptThread() {
    std::lock_guard<std::mutex> lock(impl_->state_mu);
    if (impl_->server) impl_->server->stopAccepting();
}

void MPComm::shutdown() {
    std::lock_guard<std::mutex> lock(impl_->state_mu);
    bool was_initialized = impl_->initialized.exchange(false);
    // Handshakes on other threads give up now instead of at their timeout.
    impl_->handshakes.cancelAll();
    if (impl_->server) {
        impl_->server->shutdown();
        impl_->server.reset();
    }
    std::map<std::string, std::shared_ptr<Peer>> peers;
    {
        std::lock_guard<std::mutex> peers_lock(impl_->peers_mu);
        peers.swap(impl_->peers);
    }
    // Closing joins each reader, which fails every slice still in flight.
    for (auto& peer : peers) peer.second->closeAll();
    if (was_initialized)
        MPCOMM_LOG(kInfo) << "host '" << impl_->host_id << "' shut down";
}

int MPComm::registerMemory(void* addr, size_t length) {
    if (!impl_->initialized.load()) return MPCOMM_ERR_NOT_INITIALIZED;
    return impl_->memory.registerMemory(reinterpret_cast<uint64_t>(addr),
                                        length);
}

void MPComm::unregisterMemory(void* addr) {
    impl_->memory.unregisterMemory(reinterpret_cast<uint64_t>(addr));
}

int MPComm::publishBuffer(void* addr, size_t length, int numa_node) {
    if (!impl_->initialized.load()) return MPCOMM_ERR_NOT_INITIALIZED;
    return impl_->memory.publish(reinterpret_cast<uint64_t>(addr), length,
                                 numa_node, impl_->newKeys());
}

void MPComm::unpublishBuffer(void* addr) {
    impl_->memory.unpublish(reinterpret_cast<uint64_t>(addr));
}

int MPComm::connect(const std::string& host_id, const std::string& addr,
                    int port) {
    if (!impl_->initialized.load()) return MPCOMM_ERR_NOT_INITIALIZED;
    if (host_id.empty()) {
        MPCOMM_LOG(kError) << "connect: empty host id";
        return MPCOMM_ERR_INVALID_ARG;
    }
    if (!validPort(port)) {
        MPCOMM_LOG(kError) << "connect to '" << host_id << "': invalid port "
                           << port << " (expected 1-65535)";
        return MPCOMM_ERR_INVALID_ARG;
    }
    const Config& config = impl_->config;
    detail::TrackedSocket control;
    uint32_t peer_rails = 1;
    int rc = controlHandshake(impl_->host_id, host_id, addr, port,
                              config.handshake_timeout_ms, &impl_->handshakes,
                              &control, &peer_rails);
    if (rc != MPCOMM_SUCCESS) return impl_->handshakeFailure(rc);
    control.close();

    auto peer = std::make_shared<Peer>();
    peer->host_id = host_id;
    peer->addr = addr;
    peer->port = port;
    size_t rails = config.rails.size();
    size_t total = rails * static_cast<size_t>(config.qps_per_connection);
    peer->link = std::make_shared<detail::PeerLink>(
        total, static_cast<uint32_t>(config.max_outstanding_per_qp),
        config.send_buffer_bytes);
    for (size_t c = 0; c < total; ++c) {
        // Connection c leaves on local rail c % rails and lands on the
        // target rail of the same index, wrapping when the target has fewer
        // rails; its slices carry that target rail's key.
        detail::DataConnParams params;
        params.addr = addr;
        params.port = port;
        params.my_host = impl_->host_id;
        params.expected_host = host_id;
        params.rail = static_cast<uint32_t>((c % rails) % peer_rails);
        params.qp = static_cast<uint32_t>(c / rails);
        params.index = c;
        params.handshake_timeout_ms = config.handshake_timeout_ms;
        params.progress_timeout_ms = config.progress_timeout_ms;
        params.send_buffer_bytes = config.send_buffer_bytes;
        params.handshakes = &impl_->handshakes;
        params.link = peer->link;
        std::string error;
        auto conn = DataConn::open(params, &error);
        if (!conn) {
            MPCOMM_LOG(kError)
                << "connect to '" << host_id << "' at " << addr << ":" << port
                << ": data connection " << c << ": " << error;
            peer->closeAll();
            return impl_->handshakeFailure(MPCOMM_ERR_CONNECT);
        }
        peer->conns.push_back(std::move(conn));
    }
    std::shared_ptr<Peer> old;
    {
        std::lock_guard<std::mutex> lock(impl_->peers_mu);
        if (!impl_->initialized.load()) {
            peer->closeAll();
            return MPCOMM_ERR_NOT_INITIALIZED;
        }
        old = impl_->peers[host_id];
        impl_->peers[host_id] = peer;
    }
    if (old) old->closeAll();
    MPCOMM_LOG(kInfo) << "connected to host '" << host_id << "' at " << addr
                      << ":" << port << " (" << total << " data connections"
                      << (old ? ", replacing the previous record" : "") << ")";
    return MPCOMM_SUCCESS;
}

int MPComm::queryRemoteBuffer(const std::string& host_id,
                              const std::string& addr, int port,
                              RemoteBufferInfo& info) {
    if (!impl_->initialized.load()) return MPCOMM_ERR_NOT_INITIALIZED;
    if (!validPort(port)) {
        MPCOMM_LOG(kError) << "queryRemoteBuffer of '" << host_id
                           << "': invalid port " << port;
        return MPCOMM_ERR_INVALID_ARG;
    }
    std::shared_ptr<Peer> peer = impl_->findPeer(host_id);
    if (!peer) {
        MPCOMM_LOG(kError) << "queryRemoteBuffer: host '" << host_id
                           << "' is not connected";
        return MPCOMM_ERR_UNKNOWN_HOST;
    }
    const int timeout_ms = impl_->config.handshake_timeout_ms;
    detail::TrackedSocket control;
    uint32_t peer_rails = 0;
    int rc = controlHandshake(impl_->host_id, host_id, addr, port, timeout_ms,
                              &impl_->handshakes, &control, &peer_rails);
    if (rc != MPCOMM_SUCCESS) return impl_->handshakeFailure(rc);
    std::vector<RemoteBufferEntry> entries;
    bool ok = queryBufferList(control.fd(), timeout_ms, &entries);
    control.close();
    if (!ok && !impl_->initialized.load()) return MPCOMM_ERR_NOT_INITIALIZED;
    if (!ok) {
        MPCOMM_LOG(kError) << "queryRemoteBuffer: bad or missing reply from '"
                           << host_id << "' at " << addr << ":" << port;
        return MPCOMM_ERR_PROTOCOL;
    }
    {
        std::lock_guard<std::mutex> lock(impl_->peers_mu);
        auto it = impl_->peers.find(host_id);
        if (it == impl_->peers.end() || it->second != peer) {
            MPCOMM_LOG(kError) << "queryRemoteBuffer: record of '" << host_id
                               << "' was replaced during the query";
            return MPCOMM_ERR_CONNECT;
        }
        peer->entries = entries;
        peer->has_keys = true;
    }
    info.host_id = host_id;
    info.entries = std::move(entries);
    MPCOMM_LOG(kDebug) << "queried " << info.entries.size() << " buffer(s) of '"
                       << host_id << "'";
    return MPCOMM_SUCCESS;
}

TransferHandle MPComm::Impl::submit(bool is_get, uintptr_t local,
                                    const std::string& host, uintptr_t remote,
                                    size_t length) {
    if (!initialized.load())
        return transfers.createFailed(MPCOMM_ERR_NOT_INITIALIZED);
    if (length == 0 || local == 0 || local + length < local ||
        remote + length < remote)
        return transfers.createFailed(MPCOMM_ERR_INVALID_ARG);
    if (!memory.isRegistered(local, length))
        return transfers.createFailed(MPCOMM_ERR_NOT_REGISTERED);
    std::shared_ptr<Peer> peer;
    std::vector<uint32_t> rkeys;
    {
        std::lock_guard<std::mutex> lock(peers_mu);
        auto it = peers.find(host);
        if (it == peers.end())
            return transfers.createFailed(MPCOMM_ERR_UNKNOWN_HOST);
        peer = it->second;
        for (const auto& entry : peer->entries) {
            if (remote >= entry.addr && remote - entry.addr < entry.length) {
                rkeys = entry.rkeys;
                break;
            }
        }
    }
    if (peer->link->failed())
        return transfers.createFailed(MPCOMM_ERR_CONNECTION_LOST);
    if (rkeys.empty() || peer->conns.empty())
        return transfers.createFailed(MPCOMM_ERR_REMOTE_ACCESS);

    std::shared_ptr<Transfer> transfer;
    TransferHandle handle = transfers.create(&transfer);
    // Striped as MPComm stripes over its QPs: one slice per data connection
    // (each at least kMinStripeSize), more when the slice limit demands.
    const uint64_t conns = peer->conns.size();
    uint64_t count =
        (length + config.max_transfer_size - 1) / config.max_transfer_size;
    count = std::max<uint64_t>(
        count, std::min<uint64_t>(conns, length / detail::kMinStripeSize));
    const uint64_t slice = (length + count - 1) / count;
    count = (length + slice - 1) / slice;
    transfer->addSlices(count);
    auto keys = std::make_shared<const std::vector<uint32_t>>(std::move(rkeys));
    for (uint64_t i = 0; i < count; ++i) {
        detail::WaitingSlice piece;
        piece.transfer = transfer;
        piece.is_get = is_get;
        piece.local = local + i * slice;
        piece.remote = remote + i * slice;
        piece.length = std::min<uint64_t>(slice, length - i * slice);
        piece.rkeys = keys;
        // A connection with room takes it now; otherwise it waits for the
        // first connection to finish a slice (peer_link.h).
        int index = peer->link->place(&piece);
        if (index >= 0) peer->conns[index]->start(std::move(piece));
    }
    transfer->finishPosting(MPCOMM_SUCCESS);
    return handle;
}

TransferHandle MPComm::putAsync(uintptr_t local_addr,
                                const std::string& host_id,
                                uintptr_t remote_addr, size_t length) {
    return impl_->submit(false, local_addr, host_id, remote_addr, length);
}

TransferHandle MPComm::getAsync(uintptr_t local_addr,
                                const std::string& host_id,
                                uintptr_t remote_addr, size_t length) {
    return impl_->submit(true, local_addr, host_id, remote_addr, length);
}

bool MPComm::isTransferComplete(TransferHandle handle) {
    auto transfer = impl_->transfers.find(handle);
    return !transfer || transfer->isComplete();
}

TransferResult MPComm::getTransferResult(TransferHandle handle) {
    auto transfer = impl_->transfers.find(handle);
    if (!transfer) {
        TransferResult result;
        result.error_code = MPCOMM_ERR_INVALID_HANDLE;
        return result;
    }
    return transfer->result();
}

void MPComm::releaseTransfer(TransferHandle handle) {
    impl_->transfers.release(handle);
}

}  // namespace mpcomm
