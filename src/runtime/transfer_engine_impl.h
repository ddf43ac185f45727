// TransferEngineImpl: the engine behind TransferEngine (private header).
//
// Split by job: engine_setup.cpp (construction, transport loading,
// teardown), engine_memory.cpp (allocation and registration),
// engine_batch.cpp (batches, routing, status), engine_segments.cpp
// (opening peers).
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "metrics/metrics_http_server.h"
#include "runtime/engine_batch_table.h"
#include "runtime/notification_channel.h"
#include "runtime/notification_inbox.h"
#include "runtime/progress_worker.h"
#include "tent/common/config.h"
#include "tent/common/status.h"
#include "tent/common/types.h"
#include "tent/runtime/control_plane.h"
#include "tent/runtime/metastore.h"
#include "tent/runtime/platform.h"
#include "tent/runtime/segment_manager.h"
#include "tent/runtime/topology.h"
#include "tent/runtime/transport.h"
#include "tent/runtime/transport_selector.h"

namespace mooncake::tent {

class SegmentPublisher;
class StoreHealth;

// The refusals the batch calls share (engine_batch.cpp); `operation`
// names the call refused.
Status unknownBatch(const char* operation, BatchID id);
Status taskOutOfRange(const char* operation, size_t task_id, BatchID id,
                      size_t count);

// The metrics clock of one status read: read on the first task the read
// finalises and reused for the rest, so a read of many tasks pays one clock
// read, not one per task (0: not read yet).
struct MetricsClock {
    uint64_t us = 0;
};

class TransferEngineImpl {
 public:
    // Always constructs; a failure leaves available() false and every call
    // answers with notAvailable().
    // `config_path`, when not empty, is loaded into `conf` first.
    explicit TransferEngineImpl(std::shared_ptr<Config> conf,
                                const std::string& config_path = "");
    ~TransferEngineImpl();

    TransferEngineImpl(const TransferEngineImpl&) = delete;
    TransferEngineImpl& operator=(const TransferEngineImpl&) = delete;

    bool available() const { return init_status_.ok(); }
    const Status& initStatus() const { return init_status_; }
    // The error every call returns when construction failed.
    Status notAvailable() const;

    const std::string& segmentName() const { return local_segment_name_; }
    uint64_t descriptorRereads() const {
        return segments_ ? segments_->missRefreshes() : 0;
    }
    const std::string& hostname() const { return hostname_; }
    uint16_t rpcPort() const { return rpc_port_; }
    std::vector<std::string> installedTransportNames() const;

    // engine_segments.cpp
    Status openSegment(SegmentID& handle, const std::string& segment_name);
    Status closeSegment(SegmentID handle);
    Status getSegmentInfo(SegmentID handle, SegmentInfo& info);

    // engine_memory.cpp
    Status allocateLocalMemory(void** addr, size_t size,
                               const MemoryOptions& options);
    Status freeLocalMemory(void* addr);
    // Host memory from the shm transport (docs/shm.md); refused when shm
    // is not loaded. freeSharedMemory() refuses any other memory.
    Status allocateSharedMemory(void** addr, size_t size);
    Status freeSharedMemory(void* addr);
    Status registerLocalMemory(const std::vector<void*>& addr_list,
                               const std::vector<size_t>& size_list,
                               const MemoryOptions& options);
    Status unregisterLocalMemory(const std::vector<void*>& addr_list,
                                 const std::vector<size_t>& size_list);

    // engine_batch.cpp
    // The loaded transport of `type`, or null (SubmissionRouter).
    Transport* transportOf(TransportType type) const;
    BatchID allocateBatch(size_t batch_size);
    Status freeBatch(BatchID batch_id);
    Status submitTransfer(BatchID batch_id,
                          const std::vector<Request>& request_list);
    Status getTransferStatus(BatchID batch_id, size_t task_id,
                             TransferStatus& status);
    Status getTransferStatus(BatchID batch_id,
                             std::vector<TransferStatus>& status_list);
    Status getTransferStatus(BatchID batch_id, TransferStatus& overall);
    Status progressBatch(BatchID batch_id, TransferStatus& overall);

    // engine_batch_notify.cpp
    Status submitTransfer(BatchID batch_id,
                          const std::vector<Request>& request_list,
                          const Notification& notifi);
    Status sendNotification(SegmentID target_id, const Notification& notifi);
    Status receiveNotification(std::vector<Notification>& notifi_list);
    Status probePeerAliveByID(SegmentID target_id);
    std::shared_ptr<Topology> localTopology() const;

    // engine_batch_cancel.cpp
    Status cancelTransfer(BatchID batch_id, size_t task_id);

    // Port the metrics HTTP server listens on; 0 when metrics are off.
    uint16_t metricsHttpPort() const {
        return metrics_server_ ? metrics_server_->port() : 0;
    }
    metrics::TentMetrics* metricsRegistry() const { return metrics_.get(); }

    // Failovers so far per (from, to) transport pair (engine_events.h).
    const FailoverCounters& failoverCounters() const {
        return failover_counters_;
    }

 private:
    struct Loaded {
        const TransportEntry* entry;
        std::unique_ptr<Transport> transport;
    };

    // engine_setup.cpp
    Status construct(const std::string& config_path);
    Status startControlPlane();
    // engine_store.cpp: metadata_type etcd and redis.
    Status openMetadataStore(const std::string& type,
                             std::shared_ptr<SegmentFetcher>& fetcher);
    std::string storeSegmentName();
    Status claimSegmentName();
    Status startPublishing();
    void stopPublishing();
    void loadTransports();
    void teardown();

    // engine_memory.cpp
    Status registerOne(void* addr, size_t size, const MemoryOptions& options);
    Status unregisterOne(void* addr, size_t size);

    // engine_batch.cpp
    // The batch `id` names, pinned for a lock-free read; null when the id
    // is not allocated (never, or freed already).
    EngineBatch* pinBatch(BatchID id) const;
    // submitTransfer(); `hook`, when given, is recorded for the new tasks.
    Status submitInternal(BatchID batch_id,
                          const std::vector<Request>& request_list,
                          EngineBatch::NotifyHook* hook);
    // Task `task_id` (< batch.published) of a batch the caller pinned, or
    // holds kFreeing on.
    // `drive`: fail a FAILED task over even when
    // enable_auto_failover_on_poll is off (progressBatch()).
    // `clock`: the calling status read's metrics clock, read at most once
    // per read of many tasks (engine_metrics.cpp).
    // `fire_hooks`: then send the notifications whose tasks the read
    // completed (getTransferStatus of one task: one call, one Status).
    Status taskStatus(EngineBatch& batch, size_t task_id,
                      TransferStatus& status, bool drive = false,
                      MetricsClock* clock = nullptr, bool fire_hooks = false);
    // fireNotifyHooks(batch, false) when a notification of `batch` waits.
    void fireHooksIfOpen(EngineBatch& batch) {
        if (batch.open_hooks.load(std::memory_order_acquire) != 0) {
            fireNotifyHooks(batch, /*wait=*/false);
        }
    }
    // failover.cpp: moves task `task_id`, read FAILED on `seen` (its route
    // then; null: its submission's transport), to the next transport able
    // to carry it. True: it reads PENDING (moved, or another reader is
    // moving it); false: it stays FAILED (settled when out of attempts or
    // transports).
    bool failOver(EngineBatch& batch, size_t task_id, const FailoverRoute* seen,
                  TransferStatus& status);
    // Inline: every completed request's status read asks it (the metrics'
    // label), and a call there would make the read save registers.
    TransportType typeOf(const Transport* transport) const {
        for (const Loaded& l : transports_) {
            if (l.transport.get() == transport) return l.entry->type;
        }
        return UNSPEC;
    }
    // Tasks of `batch` still PENDING (or INITIAL).
    Status countInFlight(EngineBatch& batch, size_t& in_flight);
    // freeBatch()'s wait, holding kFreeing, for the `in_flight` tasks it
    // counted: OK once none is left, the timeout error (naming the count
    // and batch/free_timeout_ms) when some still are at the deadline.
    Status waitForTasks(EngineBatch& batch, BatchID batch_id, size_t in_flight);

    // engine_batch_notify.cpp: sends the notification of every submission
    // of `batch` whose tasks all completed (drops it when one ended
    // otherwise). `wait`: take the hooks' lock even when another reader
    // holds it (freeBatch()); a status read skips instead.
    void fireNotifyHooks(EngineBatch& batch, bool wait);
    Status startNotifications();

    // Default of batch/free_timeout_ms: how long freeBatch() waits for
    // tasks in flight before refusing.
    static constexpr int kDefaultFreeBatchTimeoutMs = 10000;

    std::shared_ptr<Config> conf_;
    Status init_status_;
    std::string hostname_;
    uint16_t rpc_port_ = 0;
    std::string local_segment_name_;

    std::shared_ptr<Topology> topology_;
    std::shared_ptr<ControlService> control_;
    std::shared_ptr<SegmentManager> segments_;
    // Set with metadata_type etcd or redis (engine_store.cpp).
    std::shared_ptr<MetaStore> store_;
    std::shared_ptr<StoreHealth> store_health_;
    std::shared_ptr<SegmentPublisher> publisher_;
    // In transportTable() order.
    std::vector<Loaded> transports_;
    TransportSelector selector_;

    struct Registration {
        uint64_t length = 0;
        // The transports that accepted it (in table order), so unregister
        // asks exactly those.
        std::vector<Transport*> transports;
        // Set while unregisterOne() waits on the transports outside
        // memory_mu_: the range is still reachable until they return.
        bool retiring = false;
    };
    // The registered buffers overlapping [addr, addr + size); caller holds
    // memory_mu_.
    std::vector<std::pair<uint64_t, const Registration*>> registeredWithin(
        uint64_t addr, uint64_t size) const;

    std::mutex memory_mu_;
    // allocateLocalMemory() blocks by base, each freed by the platform
    // that allocated it (a test may swap the current one meanwhile).
    struct Allocation {
        size_t size = 0;
        Location location;
        std::shared_ptr<Platform> platform;
        // The transport that allocated it (shm), which frees it; null when
        // the platform did.
        Transport* owner = nullptr;
    };
    // The owner of the transport-made allocation overlapping
    // [addr, addr + size), or null; caller holds memory_mu_.
    Transport* sharedOwnerOf(uint64_t addr, uint64_t size) const;
    std::map<void*, Allocation> allocations_;
    // Registered buffers by base address.
    std::map<uint64_t, Registration> registered_;

    // User batches by id; see engine_batch_table.h.
    EngineBatchTable batches_;

    // failover.h: the keys, read once at construction, and the counts.
    FailoverSettings failover_;
    FailoverCounters failover_counters_;
    // Whether each task keeps a copy of its request (TaskRef::request)
    // for failover: when it is on and a loaded transport does not keep
    // its tasks' requests itself (Transport::keepsTaskRequests()). Set
    // once the transports are loaded.
    bool copy_requests_ = true;
    // Metrics (engine_metrics.cpp): null when metrics/enabled is false, so
    // a disabled engine pays one branch per hook.
    std::unique_ptr<metrics::TentMetrics> metrics_;
    std::unique_ptr<metrics::MetricsHttpServer> metrics_server_;
    Status startMetrics();
    void noteRefused(Transport* transport, const std::vector<Request>& list);
    static uint64_t metricsNowUs();
    void noteStatus(EngineBatch::TaskRef& ref, Transport* transport,
                    const FailoverRoute* route, bool attempt_failed,
                    TransferStatusEnum status, MetricsClock* clock);
    // What a COMPLETED read records (noteStatus() takes every other),
    // inline in the status read (engine_batch_status.cpp): every request
    // passes there once.
    __attribute__((always_inline)) inline void noteCompleted(
        EngineBatch::TaskRef& ref, const Transport* transport,
        MetricsClock* clock);
    // failover.cpp: with enable_progress_worker, drives every live batch.
    Status startProgressWorker();
    std::unique_ptr<ProgressWorker> progress_worker_;

    // Notifications: what peers sent us, and how we send ours.
    std::unique_ptr<NotificationInbox> inbox_;
    std::unique_ptr<NotificationChannel> channel_;
};

}  // namespace mooncake::tent
