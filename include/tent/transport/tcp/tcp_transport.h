// TcpTransport: the embedded default data path (plain POSIX sockets).
//
// Target side: a listener on 0.0.0.0 (ephemeral port) whose endpoint
// "<host>:<port>" is published under transport_attrs[TCP], served by a
// net::StreamServer (one thread per connection, one frame at a time), with
// the limits transports/tcp/idle_timeout_ms, frame_timeout_ms and
// max_connections (docs/reliability.md). A frame's remote range must lie
// wholly within ONE buffer registered here, else the request is refused
// with an error reply and no memory is touched.
//
// Initiator side: submitted tasks go to a queue drained by a small worker
// pool. The workers share persistent connections ("lanes"), at most
// `transports/tcp/lanes_per_peer` per peer endpoint (tcp_lanes.h): a worker
// borrows one for a slice and gives it back, so up to `transports/tcp/workers`
// frames are in flight, at most lanes_per_peer of them to one peer. A worker
// claims a request
// whole (in frames of up to 16 MiB); when other workers are idle and no
// other request waits, it claims only its share, in slices of at least
// `transports/tcp/min_slice_bytes`, and leaves the rest to them. A task's
// state is an atomic that getTransferStatus() polls; it completes when all
// of its slices did and fails when any failed. Each step of a slice (connect,
// header, payload, reply) is bounded by `transports/tcp/timeout_ms`; a
// dropped connection fails the task on it.
//
// Admission: every TcpTransport of the process shares two counts, tasks
// submitted and not yet final and their bytes; a submission that would take
// either past `transports/tcp/max_inflight_tasks` or
// `transports/tcp/max_inflight_bytes` is refused whole with TooManyRequests
// naming the key, the limit and the counts. A task gives its share back
// once, when it becomes final (or, freed unfinished, when it is destroyed).
//
// Device memory (where the platform has any: USE_CUDA=ON, or a test
// platform) moves through pinned host staging buffers at both ends, in
// both directions, pipelined (tcp_stager.h); the pool is bounded by
// `transports/tcp/staging_pool_bytes`, its slices are
// `transports/tcp/staging_slice_bytes`.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "tent/runtime/transport.h"

namespace mooncake::tent {

class Platform;
class TcpStager;

namespace net {
class StreamServer;
}
class TcpBufferTable;
class TcpLanePool;
struct TcpTask;

class TcpTransport : public Transport {
 public:
    TcpTransport();
    ~TcpTransport() override;

    Status install(std::string& local_segment_name,
                   std::shared_ptr<ControlService> metadata,
                   std::shared_ptr<Topology> local_topology,
                   std::shared_ptr<Config> conf = nullptr) override;
    Status uninstall() override;

    Status allocateSubBatch(SubBatchRef& batch, size_t max_size) override;
    Status freeSubBatch(SubBatchRef& batch) override;
    Status submitTransferTasks(
        SubBatchRef batch, const std::vector<Request>& request_list) override;
    bool keepsTaskRequests() const override { return true; }
    Status getTaskRequest(SubBatchRef batch, int task_id,
                          Request& request) override;
    Status getTransferStatus(SubBatchRef batch, int task_id,
                             TransferStatus& status) override;

    // A task still queued (no byte claimed) ends CANCELED at once; one in
    // flight gets no further slice and ends FAILED once the slices on the
    // wire settle.
    bool supportsCancellation() const override { return true; }
    Status cancelTransferTask(SubBatchRef batch, int task_id) override;

    Status addMemoryBuffer(BufferDesc& desc,
                           const MemoryOptions& options) override;
    Status removeMemoryBuffer(BufferDesc& desc) override;

    const char* getName() const override { return "tcp"; }

    // The endpoint published in transport_attrs[TCP]; empty before install.
    std::string endpoint() const { return endpoint_; }
    uint16_t listenPort() const { return listen_port_; }
    // The target side's server (its stats), for diagnostics and tests.
    const net::StreamServer& server() const { return *server_; }
    // Peer accesses to registered memory in flight now.
    size_t activeAccesses() const;
    // Staging of device memory since install: slices copied, how many of
    // them overlapped another slice on the wire, and staging buffers
    // allocated. All zero where the platform has no device memory.
    struct StagingStats {
        uint64_t slices = 0;
        uint64_t pipelined = 0;
        uint64_t buffers = 0;
    };
    StagingStats stagingStats() const;
    // Initiator lanes open now over all peers, and the most one peer had
    // open at once since install (never above transports/tcp/lanes_per_peer).
    struct LaneStats {
        size_t open = 0;
        int peak_per_peer = 0;
    };
    LaneStats laneStats() const;

    // The transports/tcp/* keys install() read (defaults where unset).
    struct Settings {
        int timeout_ms = 5000;
        int workers = 4;
        // Persistent connections per peer endpoint, shared by the workers.
        // As many as the default workers: every frame to one peer waits a
        // round trip on its lane, so fewer lanes than busy workers cut one
        // peer's bandwidth (docs/performance.md, "Lanes per peer").
        int lanes_per_peer = 4;
        // An initiator lane idle this long is closed (the target's
        // transports/tcp/idle_timeout_ms, read by the same key).
        int lane_idle_ms = 60000;
        // Admission (process-wide counts, every TcpTransport's tasks):
        // a submission that would put more tasks, or more bytes, in flight
        // than these is refused whole with TooManyRequests. The byte
        // default leaves room for 16 requests of 64 MiB on each of 4
        // threads.
        int64_t max_inflight_tasks = 65536;
        int64_t max_inflight_bytes = 4ll << 30;
        // How long removeMemoryBuffer() waits for peer accesses in flight
        // on that buffer before it closes their connections.
        int unregister_wait_ms = 1000;
        // How long it then waits for the serving threads of those closed
        // connections to leave before it reports the buffer still in use.
        int unregister_timeout_ms = 10000;
        // SO_SNDBUF of every socket this transport dials or accepts; 0
        // leaves the kernel's autotuning. The default keeps a request's
        // bytes in the cache between the sender's copy and the reader's
        // (docs/performance.md, "Socket send buffers").
        int send_buffer_bytes = 512 * 1024;
        // While workers are idle and no other request waits, a request is
        // shared among them in slices of at least this many bytes
        // (docs/performance.md, "Slices across the TCP workers").
        int min_slice_bytes = 2 * 1024 * 1024;
        // Device memory staging (docs/gpu.md): at most this many bytes of
        // pinned host buffers, in slices of staging_slice_bytes.
        int64_t staging_pool_bytes = 64ll * 1024 * 1024;
        int staging_slice_bytes = 1024 * 1024;
        // The cluster token (rpc/auth_token or MC_TENT_AUTH_TOKEN): proven
        // on every connection dialled or accepted; empty: none.
        std::string auth_token;
    };
    // What the last install() read, for diagnostics and tests.
    const Settings& settings() const { return settings_; }

 private:
    // tcp_server.cpp: serves one request frame; false closes the connection.
    bool serveFrame(int fd, const std::string& peer,
                    std::chrono::steady_clock::time_point deadline);
    void workerLoop();
    // Moves [offset, offset + length) of the task's request and settles
    // that slice.
    // Per worker: the lane it used last to each peer endpoint.
    using LaneHints = std::unordered_map<const std::string*, int>;
    void runSlice(TcpTask& task, uint64_t offset, uint64_t length,
                  LaneHints& hints);
    // False once uninstall() began: the caller closes the socket itself.
    bool trackSocket(int fd);
    void untrackSocket(int fd);
    void failQueued();

    Settings settings_;
    std::shared_ptr<ControlService> metadata_;
    std::string endpoint_;
    uint16_t listen_port_ = 0;
    std::atomic<bool> running_{false};

    // Registered ranges and the peer accesses in flight on each; no lock
    // of it is held across network I/O (tcp_buffers.h). Declared before
    // server_, whose connection threads pin it, so it outlives them.
    std::unique_ptr<TcpBufferTable> buffers_;
    // The platform in force at install, and the stager for its device
    // memory (null where it has none). Declared before server_ and the
    // workers, which use it, so it outlives them.
    std::shared_ptr<Platform> platform_;
    std::unique_ptr<TcpStager> stager_;
    std::unique_ptr<net::StreamServer> server_;
    // The workers' lanes; made by install(), emptied by uninstall() once
    // the workers left.
    std::unique_ptr<TcpLanePool> lanes_;

    std::mutex conn_mu_;
    // Every socket the workers dialled, so uninstall() can shut them down
    // and unblock the threads waiting on them (served ones belong to
    // server_).
    std::set<int> sockets_;

    std::mutex queue_mu_;
    std::condition_variable queue_cv_;
    std::deque<std::shared_ptr<TcpTask>> queue_;
    int busy_workers_ = 0;  // moving a slice; guarded by queue_mu_
    std::vector<std::thread> workers_;
};

}  // namespace mooncake::tent
