// TcpTransport lifecycle, buffers and batches. The target side lives in
// tcp_server.cpp, the initiator workers in tcp_worker.cpp.
#include "tent/transport/tcp/tcp_transport.h"

#include <glog/logging.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>

#include "common/range_check.h"
#include "net/auth_handshake.h"
#include "net/socket_io.h"
#include "net/stream_server.h"
#include "tent/runtime/memory_location.h"
#include "tent/runtime/platform.h"
#include "transport/sub_batch_ops.h"
#include "transport/tcp/tcp_admission.h"
#include "transport/tcp/tcp_buffers.h"
#include "transport/tcp/tcp_lanes.h"
#include "transport/tcp/tcp_stager.h"
#include "transport/tcp/tcp_task.h"
#include "transport/tcp/tcp_wire.h"

namespace mooncake::tent {

namespace {

// "host:port" -> "host"; a name without a port is already a host.
std::string hostOf(const std::string& segment_name) {
    size_t colon = segment_name.rfind(':');
    return colon == std::string::npos ? segment_name
                                      : segment_name.substr(0, colon);
}

// The target side's limits: transports/tcp/idle_timeout_ms (60 s; the
// initiator redials a pooled connection the target closed),
// frame_timeout_ms (30 s for one request of up to 16 MiB and its reply)
// max_connections (256) and linger_us (1000: an initiator's lane streams
// slices back to back, its next request a round trip after the reply).
Status readLimits(const std::shared_ptr<Config>& conf, net::ServerLimits& out) {
    out.idle_timeout_ms = 60000;
    out.frame_timeout_ms = 30000;
    out.max_connections = 256;
    out.linger_us = 1000;
    out.key_prefix = "transports/tcp";
    return conf ? net::readServerLimits(*conf, out.key_prefix, out)
                : Status::OK();
}

// transports/tcp/send_buffer_bytes: below 64 KiB a socket moves a few
// segments per wake-up; the top only keeps the value far from int limits.
constexpr int kMinSendBufferBytes = 64 * 1024;
constexpr int kMaxSendBufferBytes = 1 << 30;
// transports/tcp/min_slice_bytes: below 64 KiB a slice costs more in its
// round trip than it moves; above one frame's limit it would need several.
constexpr int kMinSliceBytes = 64 * 1024;
// transports/tcp/staging_slice_bytes: the same floor; the pool holds at
// least one slice and at most 64 GiB.
constexpr int64_t kMaxStagingPoolBytes = 64ll << 30;
// transports/tcp/lanes_per_peer: more lanes than this to one peer only
// costs sockets; the workers (at most 256) are spread over peers anyway.
constexpr int kMaxLanesPerPeer = 64;
// transports/tcp/max_inflight_tasks and max_inflight_bytes: the tops only
// keep the counts far from overflowing.
constexpr int64_t kMaxInflightTasks = 1ll << 30;
constexpr int64_t kMaxInflightBytes = 1ll << 50;

Status readSettings(const std::shared_ptr<Config>& conf,
                    TcpTransport::Settings& out) {
    if (!conf) return Status::OK();
    int timeout_ms = conf->get("transports/tcp/timeout_ms", out.timeout_ms);
    CHECK_STATUS(checkPositive("transports/tcp/timeout_ms", timeout_ms));
    int workers = conf->get("transports/tcp/workers", out.workers);
    CHECK_STATUS(checkInRange("transports/tcp/workers", workers, 1, 256));
    int lanes = conf->get("transports/tcp/lanes_per_peer", out.lanes_per_peer);
    CHECK_STATUS(checkInRange("transports/tcp/lanes_per_peer", lanes, 1,
                              kMaxLanesPerPeer));
    int wait_ms =
        conf->get("transports/tcp/unregister_wait_ms", out.unregister_wait_ms);
    CHECK_STATUS(checkPositive("transports/tcp/unregister_wait_ms", wait_ms));
    int leave_ms = conf->get("transports/tcp/unregister_timeout_ms",
                             out.unregister_timeout_ms);
    CHECK_STATUS(
        checkPositive("transports/tcp/unregister_timeout_ms", leave_ms));
    int send_buffer =
        conf->get("transports/tcp/send_buffer_bytes", out.send_buffer_bytes);
    if (send_buffer != 0 && (send_buffer < kMinSendBufferBytes ||
                             send_buffer > kMaxSendBufferBytes)) {
        return Status::InvalidArgument(
            "transports/tcp/send_buffer_bytes must be 0 (the kernel's "
            "autotuning) or in [" +
            std::to_string(kMinSendBufferBytes) + ", " +
            std::to_string(kMaxSendBufferBytes) + "], got " +
            std::to_string(send_buffer));
    }
    int slice =
        conf->get("transports/tcp/min_slice_bytes", out.min_slice_bytes);
    CHECK_STATUS(checkInRange("transports/tcp/min_slice_bytes", slice,
                              kMinSliceBytes,
                              static_cast<int64_t>(tcp_wire::kMaxChunk)));
    int staging_slice = conf->get("transports/tcp/staging_slice_bytes",
                                  out.staging_slice_bytes);
    CHECK_STATUS(checkInRange("transports/tcp/staging_slice_bytes",
                              staging_slice, kMinSliceBytes,
                              static_cast<int64_t>(tcp_wire::kMaxChunk)));
    int64_t staging_pool =
        conf->get("transports/tcp/staging_pool_bytes", out.staging_pool_bytes);
    CHECK_STATUS(checkInRange("transports/tcp/staging_pool_bytes", staging_pool,
                              staging_slice, kMaxStagingPoolBytes));
    int64_t max_tasks =
        conf->get("transports/tcp/max_inflight_tasks", out.max_inflight_tasks);
    CHECK_STATUS(checkInRange("transports/tcp/max_inflight_tasks", max_tasks, 1,
                              kMaxInflightTasks));
    int64_t max_bytes =
        conf->get("transports/tcp/max_inflight_bytes", out.max_inflight_bytes);
    CHECK_STATUS(checkInRange("transports/tcp/max_inflight_bytes", max_bytes, 1,
                              kMaxInflightBytes));
    out.max_inflight_tasks = max_tasks;
    out.max_inflight_bytes = max_bytes;
    out.staging_slice_bytes = staging_slice;
    out.staging_pool_bytes = staging_pool;
    out.timeout_ms = timeout_ms;
    out.workers = workers;
    out.lanes_per_peer = lanes;
    out.min_slice_bytes = slice;
    out.unregister_wait_ms = wait_ms;
    out.unregister_timeout_ms = leave_ms;
    out.send_buffer_bytes = send_buffer;
    return Status::OK();
}

// The task `task_id` of `batch`, for cancel and status queries.
Status findTask(Transport::SubBatchRef batch, int task_id,
                std::shared_ptr<TcpTask>& task) {
    TcpSubBatch* sub = nullptr;
    CHECK_STATUS(subBatchOf("tcp", batch, sub));
    std::lock_guard<std::mutex> lock(sub->mu);
    CHECK_STATUS(checkTaskId("tcp", task_id, sub->tasks.size()));
    task = sub->tasks[task_id];
    return Status::OK();
}

}  // namespace

TcpTransport::TcpTransport()
    : buffers_(std::make_unique<TcpBufferTable>()),
      server_(std::make_unique<net::StreamServer>(
          "TcpTransport", [this](const net::StreamServer::Connection& conn,
                                 net::Deadline deadline) {
              return serveFrame(conn.fd, conn.peer, deadline);
          })) {}

TcpTransport::~TcpTransport() { uninstall(); }

Status TcpTransport::install(std::string& local_segment_name,
                             std::shared_ptr<ControlService> metadata,
                             std::shared_ptr<Topology> local_topology,
                             std::shared_ptr<Config> conf) {
    if (running_.load()) {
        return Status::InvalidArgument("tcp transport is already installed");
    }
    if (!metadata) {
        return Status::InvalidArgument(
            "tcp transport needs the engine's ControlService to publish its "
            "endpoint");
    }
    CHECK_STATUS(readSettings(conf, settings_));
    net::ServerLimits limits;
    CHECK_STATUS(readLimits(conf, limits));
    settings_.lane_idle_ms = limits.idle_timeout_ms;
    limits.send_buffer_bytes = settings_.send_buffer_bytes;
    if (conf) CHECK_STATUS(net::readAuthToken(*conf, settings_.auth_token));
    limits.auth_token = settings_.auth_token;
    int fd = -1;
    uint16_t port = 0;
    CHECK_STATUS(net::listenOn(0, fd, port));
    // A segment name chosen for a metadata store is not host:port; the
    // engine then names the host in rpc_server_hostname.
    std::string host = conf->get("rpc_server_hostname", "");
    if (host.empty()) host = hostOf(local_segment_name);
    std::string endpoint = host + ":" + std::to_string(port);
    SegmentManager& segments = metadata->segmentManager();
    Status s = segments.updateLocal([&](SegmentDesc& desc) {
        desc.getMemory().transport_attrs[TCP] = endpoint;
        return Status::OK();
    });
    if (s.ok()) s = segments.synchronizeLocal();
    if (!s.ok()) {
        ::close(fd);
        return Status(s.code(), "tcp transport cannot publish its endpoint " +
                                    endpoint + ": " + std::string(s.message()));
    }
    // Device memory exists only where the platform is not the CPU one
    // (USE_CUDA=ON, or a test platform); only then is there anything to
    // stage.
    platform_ = currentPlatform();
    if (std::string(platform_->name()) != "cpu") {
        stager_ = std::make_unique<TcpStager>(
            platform_, static_cast<uint64_t>(settings_.staging_pool_bytes),
            static_cast<uint64_t>(settings_.staging_slice_bytes),
            settings_.workers);
    }
    s = server_->start(fd, limits);
    if (!s.ok()) {
        stager_.reset();
        return s;
    }
    metadata_ = std::move(metadata);
    listen_port_ = port;
    endpoint_ = endpoint;
    caps = Capabilities();
    caps.dram_to_dram = true;
    caps.dram_to_gpu = caps.gpu_to_dram = caps.gpu_to_gpu = stager_ != nullptr;
    lanes_ = std::make_unique<TcpLanePool>(
        settings_.lanes_per_peer, settings_.lane_idle_ms, [this](int lane) {
            untrackSocket(lane);
            ::close(lane);
        });
    running_.store(true);
    for (int i = 0; i < settings_.workers; ++i) {
        workers_.emplace_back(&TcpTransport::workerLoop, this);
    }
    LOG(INFO) << "TcpTransport: listening on " << endpoint_ << " ("
              << settings_.workers << " workers, " << settings_.lanes_per_peer
              << " lanes per peer, timeout " << settings_.timeout_ms
              << " ms, send buffer " << settings_.send_buffer_bytes
              << " bytes, slices of at least " << settings_.min_slice_bytes
              << " bytes"
              << (stager_ ? ", device memory staged through at most " +
                                std::to_string(settings_.staging_pool_bytes) +
                                " bytes in slices of " +
                                std::to_string(settings_.staging_slice_bytes)
                          : std::string())
              << ")";
    return Status::OK();
}

Status TcpTransport::uninstall() {
    if (!running_.exchange(false)) return Status::OK();
    // The target side first: it joins every connection thread, so no
    // peer touches registered memory once it returns.
    server_->stop();
    // Shutting the dialled sockets down (not closing them: their workers
    // do) wakes every worker blocked on one; the flag tells them to leave.
    {
        std::lock_guard<std::mutex> lock(conn_mu_);
        for (int fd : sockets_) ::shutdown(fd, SHUT_RDWR);
    }
    // Workers waiting for a lane leave too.
    lanes_->shutdown();
    {
        // Taking the lock orders the flag against a worker that checked
        // it and is about to wait, so the notify below cannot be lost.
        std::lock_guard<std::mutex> lock(queue_mu_);
    }
    queue_cv_.notify_all();
    for (std::thread& t : workers_) t.join();
    workers_.clear();
    // No worker holds a lane any more: every one left is idle.
    lanes_->closeAll();
    lanes_.reset();
    failQueued();
    // Every user of the stager (server connections, workers) is gone.
    stager_.reset();
    return Status::OK();
}

void TcpTransport::failQueued() {
    std::deque<std::shared_ptr<TcpTask>> left;
    {
        std::lock_guard<std::mutex> lock(queue_mu_);
        left.swap(queue_);
    }
    // Out of the queue no worker claims from them any more; slices already
    // claimed settle on their own, so only the unclaimed bytes are settled
    // here.
    for (auto& task : left) {
        task->settle(task->request.length - task->next_offset, false);
    }
}

bool TcpTransport::trackSocket(int fd) {
    std::lock_guard<std::mutex> lock(conn_mu_);
    // Checked under the lock uninstall() takes to shut sockets down, so a
    // socket is either shut down by it or never used.
    if (!running_.load()) return false;
    sockets_.insert(fd);
    return true;
}

void TcpTransport::untrackSocket(int fd) {
    std::lock_guard<std::mutex> lock(conn_mu_);
    sockets_.erase(fd);
}

Status TcpTransport::addMemoryBuffer(BufferDesc& desc,
                                     const MemoryOptions& options) {
    if (desc.length == 0) {
        return Status::InvalidArgument("tcp transport cannot register " +
                                       hexRange(desc.addr, desc.length) +
                                       ": length is zero");
    }
    MemoryLocation where;
    CHECK_STATUS(parseMemoryLocation(desc.location, &where));
    const bool device = where.device();
    if (device && !stager_) {
        return Status::InvalidArgument(
            "tcp transport cannot register device memory at " + desc.location +
            ": the " + (platform_ ? platform_->name() : "cpu") +
            " platform has none (device memory needs a build with "
            "USE_CUDA=ON)");
    }
    CHECK_STATUS(buffers_->add(desc.addr, desc.length, device));
    for (TransportType t : desc.transports) {
        if (t == TCP) return Status::OK();
    }
    desc.transports.push_back(TCP);
    return Status::OK();
}

Status TcpTransport::removeMemoryBuffer(BufferDesc& desc) {
    // Waits only for peer accesses to this buffer, and only boundedly.
    return buffers_->remove(desc.addr, desc.length,
                            settings_.unregister_wait_ms,
                            settings_.unregister_timeout_ms);
}

size_t TcpTransport::activeAccesses() const {
    return buffers_->activeAccesses();
}

TcpTransport::LaneStats TcpTransport::laneStats() const {
    LaneStats out;
    if (!lanes_) return out;
    out.open = lanes_->open();
    out.peak_per_peer = lanes_->peak();
    return out;
}

TcpTransport::StagingStats TcpTransport::stagingStats() const {
    StagingStats out;
    if (!stager_) return out;
    TcpStager::Stats s = stager_->stats();
    out.slices = s.slices;
    out.pipelined = s.pipelined;
    out.buffers = s.buffers;
    return out;
}

Status TcpTransport::allocateSubBatch(SubBatchRef& batch, size_t max_size) {
    return newSubBatch<TcpSubBatch>("tcp", batch, max_size);
}

Status TcpTransport::freeSubBatch(SubBatchRef& batch) {
    return deleteSubBatch<TcpSubBatch>(batch);
}

Status TcpTransport::submitTransferTasks(
    SubBatchRef batch, const std::vector<Request>& request_list) {
    TcpSubBatch* sub = nullptr;
    CHECK_STATUS(subBatchOf("tcp", batch, sub));
    if (!running_.load()) {
        return Status::InvalidArgument("tcp transport is not installed");
    }
    std::vector<std::shared_ptr<TcpTask>> created;
    {
        std::lock_guard<std::mutex> lock(sub->mu);
        CHECK_STATUS(checkSubBatchRoom("tcp", sub->tasks.size(),
                                       request_list.size(), sub->capacity));
        // All or nothing: a list that does not fit is refused whole, before
        // any task exists, as a full sub-batch is.
        uint64_t bytes = 0;
        for (const Request& request : request_list) {
            // Saturates: a list whose lengths wrap is simply too big.
            bytes = request.length > UINT64_MAX - bytes
                        ? UINT64_MAX
                        : bytes + request.length;
        }
        CHECK_STATUS(TcpAdmission::admit(
            request_list.size(), bytes,
            {settings_.max_inflight_tasks, settings_.max_inflight_bytes}));
        for (const Request& request : request_list) {
            std::shared_ptr<TcpTask> task = sub->nextTask();
            task->request = request;
            task->admitted.store(true, std::memory_order_relaxed);
            sub->tasks.push_back(task);
            created.push_back(std::move(task));
        }
    }
    std::vector<std::shared_ptr<TcpTask>> runnable;
    uint64_t slices = 0;
    for (auto& task : created) {
        const Request& r = task->request;
        Status checked = checkRequest(r);
        if (!checked.ok()) {
            LOG(WARNING) << "TcpTransport: task failed: " << checked.message();
            task->finish(FAILED);
            continue;
        }
        SegmentDescRef desc;
        Status s = metadata_->segmentManager().getRemoteCached(
            desc, task->request.target_id);
        if (s.ok() && desc && desc->type != SegmentType::Memory) {
            s = Status::InvalidArgument("segment " + desc->name +
                                        " is a file segment");
        } else if (s.ok() && desc) {
            task->endpoint = desc->getMemory().getTransportAttrs(TCP);
            task->desc = std::move(desc);
            if (!task->endpoint || task->endpoint->empty()) {
                s = Status::InvalidArgument(
                    "segment " + task->segment() +
                    " publishes no tcp endpoint (transport_attrs[TCP])");
            }
        } else if (s.ok()) {
            s = noSegmentDescriptor(task->request.target_id);
        }
        if (!s.ok()) {
            LOG(WARNING) << "TcpTransport: task failed: " << s.message();
            task->finish(FAILED);
            continue;
        }
        if (stager_ && r.length > 0) {
            // Where the local side lives decides whether it is staged; a
            // platform that cannot say fails the task rather than hand a
            // device pointer to a socket.
            Location where;
            s = platform_->locate(r.source, r.length, where);
            if (!s.ok()) {
                LOG(WARNING) << "TcpTransport: task failed: " << s.message();
                task->finish(FAILED);
                continue;
            }
            task->local_device = isDeviceMemoryLocation(where);
        }
        task->units_left.store(TcpTask::units(r.length, r.length),
                               std::memory_order_relaxed);
        slices += maxSlices(r.length, settings_.min_slice_bytes);
        runnable.push_back(std::move(task));
    }
    {
        std::lock_guard<std::mutex> lock(queue_mu_);
        for (auto& task : runnable) queue_.push_back(std::move(task));
    }
    // One worker per possible slice at most: waking every worker for each
    // submit only has the rest find the queue empty and sleep again, on
    // CPUs the busy workers and the target need.
    if (slices >= static_cast<uint64_t>(settings_.workers)) {
        queue_cv_.notify_all();
    } else {
        for (uint64_t i = 0; i < slices; ++i) queue_cv_.notify_one();
    }
    // uninstall() may have drained the queue between the check above and
    // the push; whatever it missed is failed here rather than left PENDING.
    if (!running_.load()) failQueued();
    return Status::OK();
}

Status TcpTransport::cancelTransferTask(SubBatchRef batch, int task_id) {
    std::shared_ptr<TcpTask> task;
    CHECK_STATUS(findTask(batch, task_id, task));
    std::lock_guard<std::mutex> lock(queue_mu_);
    // Slices claimed later (none, once out of the queue) and slices not
    // yet on the wire skip the network.
    task->failed.store(true, std::memory_order_relaxed);
    auto it = std::find(queue_.begin(), queue_.end(), task);
    if (it == queue_.end()) return Status::OK();  // final or all claimed
    queue_.erase(it);
    if (task->next_offset == 0) {
        // No worker ever saw it.
        task->finish(CANCELED);
    } else {
        task->settle(task->request.length - task->next_offset, false);
    }
    return Status::OK();
}

Status TcpTransport::getTaskRequest(SubBatchRef batch, int task_id,
                                    Request& request) {
    std::shared_ptr<TcpTask> task;
    CHECK_STATUS(findTask(batch, task_id, task));
    request = task->request;
    return Status::OK();
}

Status TcpTransport::getTransferStatus(SubBatchRef batch, int task_id,
                                       TransferStatus& status) {
    std::shared_ptr<TcpTask> task;
    CHECK_STATUS(findTask(batch, task_id, task));
    status.s = static_cast<TransferStatusEnum>(
        task->state.load(std::memory_order_acquire));
    status.transferred_bytes = task->transferred.load();
    return Status::OK();
}

}  // namespace mooncake::tent
