// The public TENT API: TransferEngine (C++) and the tent_* C API.
#pragma once

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The C API. Names, signatures, struct layouts and macro values are those
 * of upstream TENT's C API, so a C program written against it compiles
 * against this header and runs against libtent; docs/api.md lists where
 * the behaviour differs. Every int-returning call returns 0 on success and
 * -1 on failure, and tent_last_error() then names the cause. */

typedef uint64_t tent_batch_id_t;
typedef uint64_t tent_segment_id_t;
typedef void* tent_engine_t;

#ifndef LOCAL_SEGMENT_ID
#define LOCAL_SEGMENT_ID (0ull)
#endif

#define OPCODE_READ (0)
#define OPCODE_WRITE (1)

/* Zero-initialize before filling in: 0 is the default of every field
 * (priority high, transport chosen by policy). */
struct tent_request {
    int opcode; /* OPCODE_READ / OPCODE_WRITE */
    void* source;
    tent_segment_id_t target_id;
    uint64_t target_offset; /* absolute address in the target segment */
    uint64_t length;
    int priority;       /* 0 high, 1 medium, 2 low */
    int transport_hint; /* TRANSPORT_*; TRANSPORT_UNSPEC follows policy */
};
typedef struct tent_request tent_request_t;

#define STATUS_WAITING (0)
#define STATUS_PENDING (1)
#define STATUS_INVALID (2)
#define STATUS_CANCELED (3)
#define STATUS_COMPLETED (4)
#define STATUS_TIMEOUT (5)
#define STATUS_FAILED (6)

struct tent_status {
    int status; /* STATUS_* */
    uint64_t transferred_bytes;
};
typedef struct tent_status tent_status_t;

struct tent_buffer_info {
    uint64_t base, length;
    char location[64]; /* NUL-terminated, e.g. "cpu:0" */
};

#define TYPE_MEMORY (0)
#define TYPE_FILE (1)

/* Filled by tent_get_segment_info(); release buffers with
 * tent_free_segment_info(). */
struct tent_segment_info {
    int type; /* TYPE_MEMORY / TYPE_FILE */
    int num_buffers;
    struct tent_buffer_info* buffers;
};
typedef struct tent_segment_info tent_segment_info_t;

struct tent_notifi_record {
    tent_segment_id_t handle; /* always 0: notifications carry no sender */
    char name[256];           /* NUL-terminated */
    char msg[4096];           /* NUL-terminated */
};
typedef struct tent_notifi_record tent_notifi_record_t;

/* Filled by tent_recv_notifs(); release records with tent_free_notifs(). */
struct tent_notifi_info {
    int num_records;
    struct tent_notifi_record* records;
};
typedef struct tent_notifi_info tent_notifi_info;

#define PERM_LOCAL_READ_WRITE (0)
#define PERM_GLOBAL_READ_ONLY (1)
#define PERM_GLOBAL_READ_WRITE (2)

#define TRANSPORT_UNSPEC (0)
#define TRANSPORT_RDMA (1)
#define TRANSPORT_MNNVL (2)
#define TRANSPORT_SHM (3)
#define TRANSPORT_NVLINK (4)
#define TRANSPORT_GDS (5)
#define TRANSPORT_IOURING (6)
#define TRANSPORT_TCP (7)
#define TRANSPORT_ASCEND_DIRECT (8)
#define TRANSPORT_SUNRISE_LINK (9)
#define TRANSPORT_TPU (10)
#define TRANSPORT_UB (11)
#define TRANSPORT_MPCOMM (12)

/* For the _ex calls. An empty location means "*" (any). */
struct tent_memory_options {
    char location[64];
    int permission;     /* PERM_* */
    int transport_type; /* TRANSPORT_*; TRANSPORT_UNSPEC registers with all */
    char shm_path[256]; /* must be empty here (no file-backed buffers) */
    size_t shm_offset;  /* must be 0 here */
    int internal;       /* nonzero: an engine-internal buffer */
};
typedef struct tent_memory_options tent_memory_options_t;

struct tent_nic_load_stat {
    char device_name[64];
    uint64_t inflight_bytes;
    double ewma_bandwidth_bps;
};
typedef struct tent_nic_load_stat tent_nic_load_stat_t;

/* This thread's text for its last failed call ("" before any). */
const char* tent_last_error(void);

/* Configuration for the next tent_create_engine() on the same thread. */
void tent_load_config_from_file(const char* path);
/* `value` is taken as JSON when it parses as JSON (true, 12, "x", {...}),
 * else as a string; `key` is a slash path ("transports/tcp/enable"). */
void tent_set_config(const char* key, const char* value);

/* NULL on failure (tent_last_error() says why). */
tent_engine_t tent_create_engine(void);
void tent_destroy_engine(tent_engine_t engine);
/* 1 when the engine came up, else 0. */
int tent_available(tent_engine_t engine);

/* Copies the NUL-terminated segment name / RPC address into the buffer;
 * fails, naming the size needed, when it does not fit. */
int tent_segment_name(tent_engine_t engine, char* buf, size_t buf_len);
int tent_rpc_server_addr_port(tent_engine_t engine, char* addr_buf,
                              size_t buf_len, uint16_t* port);

int tent_open_segment(tent_engine_t engine, tent_segment_id_t* handle,
                      const char* segment_name);
int tent_close_segment(tent_engine_t engine, tent_segment_id_t handle);
int tent_get_segment_info(tent_engine_t engine, tent_segment_id_t handle,
                          tent_segment_info_t* info);
void tent_free_segment_info(tent_segment_info_t* info);

/* location may be NULL or "" for "*" (any). */
int tent_allocate_memory(tent_engine_t engine, void** addr, size_t size,
                         const char* location);
int tent_free_memory(tent_engine_t engine, void* addr);
int tent_register_memory(tent_engine_t engine, void* addr, size_t size);
int tent_unregister_memory(tent_engine_t engine, void* addr, size_t size);
int tent_register_memory_with_perm(tent_engine_t engine, void* addr,
                                   size_t size, int permission);
int tent_register_memory_batch(tent_engine_t engine, void** addrs,
                               size_t* sizes, size_t count, int permission);
/* sizes may be NULL: each address's registered length. */
int tent_unregister_memory_batch(tent_engine_t engine, void** addrs,
                                 size_t* sizes, size_t count);
int tent_allocate_memory_ex(tent_engine_t engine, void** addr, size_t size,
                            tent_memory_options_t* opts);
int tent_register_memory_ex(tent_engine_t engine, void* addr, size_t size,
                            tent_memory_options_t* opts);
int tent_register_memory_batch_ex(tent_engine_t engine, void** addrs,
                                  size_t* sizes, size_t count,
                                  tent_memory_options_t* opts);

/* 0 (never a valid id) on failure. */
tent_batch_id_t tent_allocate_batch(tent_engine_t engine, size_t batch_size);
int tent_free_batch(tent_engine_t engine, tent_batch_id_t batch_id);
int tent_submit(tent_engine_t engine, tent_batch_id_t batch_id,
                tent_request_t* entries, size_t count);

int tent_task_status(tent_engine_t engine, tent_batch_id_t batch_id,
                     size_t task_id, tent_status_t* status);
int tent_overall_status(tent_engine_t engine, tent_batch_id_t batch_id,
                        tent_status_t* status);
/* *count: on entry the capacity of `statuses`, on return the number of
 * tasks in the batch; min(capacity, tasks) statuses are written. */
int tent_task_status_list(tent_engine_t engine, tent_batch_id_t batch_id,
                          tent_status_t* statuses, size_t* count);
/* Best-effort cancel, returns at once: a pending task ends CANCELED, at
 * once when no transport started it, else when its transport lets go of it
 * (poll for a final status before freeing its buffers). A task already
 * final stays as it is. */
int tent_cancel_task(tent_engine_t engine, tent_batch_id_t batch_id,
                     size_t task_id);

/* As tent_submit(); {name, message} reaches each target segment once all
 * of these requests completed there (never before the data). name is at
 * most 255 bytes and message at most 4095, what a receiver's record holds. */
int tent_submit_notif(tent_engine_t engine, tent_batch_id_t batch_id,
                      tent_request_t* entries, size_t count, const char* name,
                      const char* message);
int tent_send_notifs(tent_engine_t engine, tent_segment_id_t handle,
                     const char* name, const char* message);
/* Every notification received since the last call, oldest first, in
 * records the caller releases with tent_free_notifs(). */
int tent_recv_notifs(tent_engine_t engine, tent_notifi_info* info);
void tent_free_notifs(tent_notifi_info* info);

/* As tent_task_status_list(). Fails (NotImplemented) here: no transport in
 * this tree reports NIC load. */
int tent_get_nic_load_stats(tent_engine_t engine, tent_nic_load_stat_t* stats,
                            size_t* count);

#ifdef __cplusplus
}  // extern "C"

#include <memory>
#include <string>
#include <vector>

// Only the standard library and these two: a client compiles this header
// with nothing but -I<prefix>/include (no jsoncpp, glog or gflags).
#include "tent/common/status.h"
#include "tent/common/types.h"

namespace mooncake::tent {

// Config (tent/common/config.h) needs jsoncpp and is not installed; a client
// configures an engine through a file path, tent_set_config() or
// MC_TENT_CONF instead. In-tree code includes config.h itself.
class Config;
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
    // How many times a request naming memory no cached descriptor held
    // made the engine re-read that peer's descriptor (at most once per
    // segment per metadata/miss_refresh_interval_ms); 0 when the engine is
    // not available.
    uint64_t getDescriptorRereads() const;
    Status closeSegment(SegmentID handle);
    Status getSegmentInfo(SegmentID handle, SegmentInfo& info);

    Status allocateLocalMemory(void** addr, size_t size,
                               Location location = kWildcardLocation);
    Status allocateLocalMemory(void** addr, size_t size,
                               MemoryOptions& options);
    Status freeLocalMemory(void* addr);
    // Host memory same-host peers can map (shm transport, docs/shm.md);
    // refused when transports/shm/enable is off. With shm loaded,
    // allocateLocalMemory() on host memory returns the same kind.
    Status allocateSharedMemory(void** addr, size_t size);
    Status freeSharedMemory(void* addr);

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

    // Best effort, and returns at once. A task no transport has started
    // reads CANCELED on return; one in flight keeps reading PENDING until
    // its transport lets go of it, then CANCELED. Poll for a final status
    // before freeing the task's buffers: only then does no transport touch
    // them. A task already final is left as it is (OK).
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

    // One progress step over the batch (failing FAILED tasks over to the
    // next transport, whatever enable_auto_failover_on_poll says), then
    // its overall status, as getTransferStatus(batch_id, overall_status).
    Status progressBatch(BatchID batch_id, TransferStatus& overall_status);

    // Tasks failed over from transport `from` to `to` so far
    // (docs/failover.md); UNSPEC for both: every pair together.
    uint64_t getFailoverCount(TransportType from = UNSPEC,
                              TransportType to = UNSPEC) const;

    // NIC load needs RDMA NICs; this tree has no transport that reports it,
    // so: NotImplemented, `stats` emptied.
    Status getNicLoadStats(std::vector<NicLoadStats>& stats) const;

 private:
    std::unique_ptr<TransferEngineImpl> impl_;
};

}  // namespace mooncake::tent
#endif  // __cplusplus
