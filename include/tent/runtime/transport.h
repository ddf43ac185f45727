// Transport: what every data path (tcp, shm, mpcomm) implements.
//
// Lifecycle: construct -> install() -> addMemoryBuffer()* ->
// allocateSubBatch/submitTransferTasks/getTransferStatus ... ->
// uninstall() -> destroy. uninstall() must be safe with tasks in flight:
// afterwards their status reads FAILED, never hangs, never touches freed
// state. Optional operations fail the same way, from this base, with
// NotImplemented naming the transport and the operation.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tent/common/config.h"
#include "tent/common/status.h"
#include "tent/common/types.h"
#include "tent/runtime/control_plane.h"
#include "tent/runtime/segment.h"
#include "tent/runtime/topology.h"

namespace mooncake::tent {

// What a transport can carry, by where the local and the peer buffer live.
struct Capabilities {
    bool dram_to_dram = false;
    bool dram_to_gpu = false;
    bool gpu_to_dram = false;
    bool gpu_to_gpu = false;
};

class Transport {
 public:
    // A transport's slice of a user batch. Task ids are indices into the
    // order in which requests were submitted to this sub-batch.
    struct SubBatch {
        virtual ~SubBatch() = default;
        virtual size_t size() const = 0;
    };
    using SubBatchRef = SubBatch*;

    virtual ~Transport() = default;

    // metadata->segmentManager() is the engine's SegmentManager: where the
    // transport publishes its endpoint and resolves peers.
    virtual Status install(std::string& local_segment_name,
                           std::shared_ptr<ControlService> metadata,
                           std::shared_ptr<Topology> local_topology,
                           std::shared_ptr<Config> conf = nullptr);
    virtual Status uninstall();

    virtual const Capabilities capabilities() const { return caps; }

    virtual Status allocateSubBatch(SubBatchRef& batch, size_t max_size) = 0;
    virtual Status freeSubBatch(SubBatchRef& batch) = 0;
    // Turns `batch`, one of this transport's whose tasks all read final,
    // into an empty sub-batch of `max_size` tasks, as freeSubBatch() then
    // allocateSubBatch() would: what its tasks held is let go now. The
    // engine keeps a batch's sub-batches for the next batch allocated in
    // the same place, so a transport whose allocation costs more than an
    // emptying may override this. `batch` may change; it is null when this
    // failed. The default frees and allocates.
    virtual Status recycleSubBatch(SubBatchRef& batch, size_t max_size);
    // Requests beyond the sub-batch capacity: TooManyRequests, nothing
    // submitted. A request that cannot be issued fails its own task only.
    virtual Status submitTransferTasks(
        SubBatchRef batch, const std::vector<Request>& request_list) = 0;
    virtual Status getTransferStatus(SubBatchRef batch, int task_id,
                                     TransferStatus& status) = 0;

    // Whether getTaskRequest() answers for every task that reads FAILED.
    // The engine re-issues a failed task on another transport (failover)
    // from its request: for a transport that keeps them it copies none of
    // its own, so a request that does not fail pays nothing for failover.
    virtual bool keepsTaskRequests() const { return false; }
    // The request that task `task_id` of `batch` was submitted with, for a
    // task that reads FAILED, while `batch` is not freed or recycled.
    virtual Status getTaskRequest(SubBatchRef batch, int task_id,
                                  Request& request) {
        return unsupported("getTaskRequest");
    }

    virtual bool supportsCancellation() const { return false; }
    // Asks the transport to stop task `task_id`: one it has not started
    // reads CANCELED at once and is never touched; one in flight ends
    // (CANCELED or FAILED) once the transport no longer touches its
    // buffers. Only called when supportsCancellation().
    virtual Status cancelTransferTask(SubBatchRef batch, int task_id) {
        return unsupported("cancelTransferTask");
    }

    // Registers `desc` with this transport; on success the transport
    // appends its type to desc.transports.
    virtual Status addMemoryBuffer(BufferDesc& desc,
                                   const MemoryOptions& options);
    virtual Status addMemoryBuffer(std::vector<BufferDesc>& desc_list,
                                   const MemoryOptions& options);
    virtual Status removeMemoryBuffer(BufferDesc& desc);

    // Memory this transport exports itself (shm: a POSIX shared object).
    // The engine asks only a transport that allocates; others refuse.
    virtual Status allocateLocalMemory(void** addr, size_t size,
                                       const MemoryOptions& options) {
        return unsupported("allocateLocalMemory");
    }
    virtual Status freeLocalMemory(void* addr, size_t size) {
        return unsupported("freeLocalMemory");
    }

    virtual bool supportNotification() const { return false; }

    // Called by the engine once openSegment() has resolved `handle`. A
    // transport may start what the first transfer to that segment would
    // otherwise wait for (a handshake) in the background; it must not
    // block and cannot fail the open.
    virtual void warmupSegment(SegmentID handle) {}

    virtual const char* getName() const = 0;

 protected:
    Status unsupported(const char* operation) const;

    Capabilities caps;
};

// One row per transport compiled into this tree. The engine walks this
// table in getSupportedTransports() order, consults the row's config gate
// (transports/<name>/enable, default `enabled_by_default`) and installs
// what `factory` builds. The rows live in the runtime's transport loader,
// the only runtime file that names a concrete transport.
struct TransportEntry {
    const char* name;
    TransportType type;
    bool enabled_by_default;
    std::unique_ptr<Transport> (*factory)();
};
// MNNVL, NVLINK, RDMA, SUNRISE_LINK, AscendDirect, SHM, TCP, GDS, MPCOMM,
// TPU order; only rows compiled into this tree are present.
const std::vector<TransportEntry>& transportTable();

// For tests and benchmarks: while an override is set for `type`, engines
// constructed from then on build that transport with `factory` instead of
// the table row's (for instance an MpcommTransport over an in-memory
// adapter); the row's name and config gate still apply. An empty factory
// removes the override. Engines already built keep their transports.
using TransportFactory = std::function<std::unique_ptr<Transport>()>;
void setTransportFactoryOverride(TransportType type, TransportFactory factory);
// What the engine installs for `entry`: the override, else entry.factory().
std::unique_ptr<Transport> buildTransport(const TransportEntry& entry);

}  // namespace mooncake::tent
