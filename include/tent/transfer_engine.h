// The public TENT API: TransferEngine (C++) and the tent_* C API.
#pragma once

#include <stddef.h>
#include <stdint.h>

#define TRANSPORT_UNSPEC 0
#define TRANSPORT_RDMA 1
#define TRANSPORT_MNNVL 2
#define TRANSPORT_SHM 3
#define TRANSPORT_NVLINK 4
#define TRANSPORT_GDS 5
#define TRANSPORT_IOURING 6
#define TRANSPORT_TCP 7
#define TRANSPORT_ASCEND_DIRECT 8
#define TRANSPORT_SUNRISE_LINK 9
#define TRANSPORT_TPU 10
#define TRANSPORT_UB 11
#define TRANSPORT_MPCOMM 12

#define OPCODE_READ 0
#define OPCODE_WRITE 1

#define TENT_STATUS_INITIAL 0
#define TENT_STATUS_PENDING 1
#define TENT_STATUS_INVALID 2
#define TENT_STATUS_CANCELED 3
#define TENT_STATUS_COMPLETED 4
#define TENT_STATUS_TIMEOUT 5
#define TENT_STATUS_FAILED 6

#ifdef __cplusplus
extern "C" {
#endif

typedef void* tent_engine_t;
typedef uint64_t tent_segment_id_t;
typedef uint64_t tent_batch_id_t;

struct tent_request {
    int opcode;  // OPCODE_READ / OPCODE_WRITE
    void* source;
    tent_segment_id_t target_id;
    uint64_t target_offset;  // absolute remote address
    uint64_t length;
    int transport_hint;  // TRANSPORT_*; TRANSPORT_UNSPEC lets TENT choose
};

struct tent_status {
    int status;  // TENT_STATUS_*
    uint64_t transferred_bytes;
};

// All int-returning calls return 0 on success and -1 on failure; the last
// failure's text is available from tent_last_error() (per thread).
const char* tent_last_error(void);

// config_path may be NULL (defaults + MC_TENT_CONF). NULL on failure.
tent_engine_t tent_create_engine(const char* config_path);
void tent_destroy_engine(tent_engine_t engine);
int tent_available(tent_engine_t engine);
// Copies the NUL-terminated segment name into buf.
int tent_segment_name(tent_engine_t engine, char* buf, size_t buf_len);
int tent_open_segment(tent_engine_t engine, tent_segment_id_t* handle,
                      const char* segment_name);
int tent_close_segment(tent_engine_t engine, tent_segment_id_t handle);
int tent_allocate_memory(tent_engine_t engine, void** addr, size_t size);
int tent_free_memory(tent_engine_t engine, void* addr);
int tent_register_memory(tent_engine_t engine, void* addr, size_t size);
int tent_unregister_memory(tent_engine_t engine, void* addr, size_t size);
// Returns 0 (never a valid id) on failure.
tent_batch_id_t tent_allocate_batch(tent_engine_t engine, size_t batch_size);
int tent_free_batch(tent_engine_t engine, tent_batch_id_t batch_id);
int tent_submit(tent_engine_t engine, tent_batch_id_t batch_id,
                const struct tent_request* requests, size_t count);
int tent_get_status(tent_engine_t engine, tent_batch_id_t batch_id,
                    size_t task_id, struct tent_status* status);
int tent_get_overall_status(tent_engine_t engine, tent_batch_id_t batch_id,
                            struct tent_status* status);

#ifdef __cplusplus
}  // extern "C"

#include <memory>
#include <string>
#include <vector>

#include "tent/common/config.h"
#include "tent/common/status.h"
#include "tent/common/types.h"

namespace mooncake::tent {

class TransferEngineImpl;
class Topology;

class TransferEngine {
 public:
    TransferEngine();
    explicit TransferEngine(const std::string config_path);
    explicit TransferEngine(std::shared_ptr<Config> config);
    ~TransferEngine();

    TransferEngine(const TransferEngine&) = delete;
    TransferEngine& operator=(const TransferEngine&) = delete;

    // False when construction failed; the reason was logged.
    bool available() const;

    const std::string getSegmentName() const;
    const std::string getRpcServerAddress() const;
    uint16_t getRpcServerPort() const;
    // Names of the installed transports in getSupportedTransports() order.
    std::vector<std::string> getSupportedTransports() const;

    // The topology discovered at construction (NICs, memory nodes); null
    // when the engine is not available.
    std::shared_ptr<Topology> getLocalTopology() const;
    // Its {"nics":[...],"mems":[...]} JSON; "{}" when the engine is not
    // available.
    std::string getLocalTopologyString() const;

    // Shared-handle segments (upstream's hook for intra-node sharing):
    // NotImplemented here, as upstream.
    Status exportLocalSegment(std::string& shared_handle);
    Status importRemoteSegment(SegmentID& handle,
                               const std::string& shared_handle);

    Status openSegment(SegmentID& handle, const std::string& segment_name);
    Status closeSegment(SegmentID handle);
    Status getSegmentInfo(SegmentID handle, SegmentInfo& info);

    Status allocateLocalMemory(void** addr, size_t size,
                               Location location = kWildcardLocation);
    Status allocateLocalMemory(void** addr, size_t size,
                               MemoryOptions& options);
    Status freeLocalMemory(void* addr);

    Status registerLocalMemory(void* addr, size_t size,
                               Permission permission = kGlobalReadWrite);
    Status registerLocalMemory(std::vector<void*> addr_list,
                               std::vector<size_t> size_list,
                               Permission permission = kGlobalReadWrite);
    Status registerLocalMemory(void* addr, size_t size, MemoryOptions& options);
    Status registerLocalMemory(std::vector<void*> addr_list,
                               std::vector<size_t> size_list,
                               MemoryOptions& options);
    Status unregisterLocalMemory(void* addr, size_t size = 0);
    Status unregisterLocalMemory(std::vector<void*> addr_list,
                                 std::vector<size_t> size_list = {});

    // 0 on failure (logged).
    BatchID allocateBatch(size_t batch_size);
    Status freeBatch(BatchID batch_id);
    Status submitTransfer(BatchID batch_id,
                          const std::vector<Request>& request_list);
    Status getTransferStatus(BatchID batch_id, size_t task_id,
                             TransferStatus& status);
    Status getTransferStatus(BatchID batch_id,
                             std::vector<TransferStatus>& status_list);
    Status getTransferStatus(BatchID batch_id, TransferStatus& overall_status);

    // As submitTransfer(), and `notifi` is delivered to every target segment
    // of `request_list` once all of these requests have COMPLETED (seen by
    // a status read, progressBatch() or freeBatch()); never before the data
    // is in place at the target. Not sent when one of them fails or is
    // cancelled. See docs/api.md.
    Status submitTransfer(BatchID batch_id,
                          const std::vector<Request>& request_list,
                          const Notification& notifi);

    // Ends task `task_id` CANCELED. On return no transport touches the
    // task's buffers any more: at once for a transport that can cancel, else
    // after the transport reports the task done, waiting at most
    // batch/cancel_timeout_ms (then an error, and the task is left as is).
    // A task already final is left as it is (OK).
    Status cancelTransfer(BatchID batch_id, size_t task_id);

    // Delivers `notifi` to the engine of segment `target_id` (blocking, at
    // most rpc/timeout_ms). Refused by the target when the message exceeds
    // notification/max_message_bytes or the target holds
    // notification/max_pending_per_peer undelivered ones from us.
    Status sendNotification(SegmentID target_id, const Notification& notifi);
    // Moves every notification received so far into `notifi_list`
    // (replacing its contents), oldest first.
    Status receiveNotification(std::vector<Notification>& notifi_list);

    // OK when the engine of segment `target_id` answers its RPC port within
    // rpc/timeout_ms.
    Status probePeerAliveByID(SegmentID target_id);

    // One progress step over the batch, then its overall status, as
    // getTransferStatus(batch_id, overall_status) (there is no failover
    // here to drive).
    Status progressBatch(BatchID batch_id, TransferStatus& overall_status);

    // NIC load needs RDMA NICs; this tree has no transport that reports it,
    // so: NotImplemented, `stats` emptied.
    Status getNicLoadStats(std::vector<NicLoadStats>& stats) const;

 private:
    std::unique_ptr<TransferEngineImpl> impl_;
};

}  // namespace mooncake::tent
#endif  // __cplusplus
