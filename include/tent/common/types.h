// Types shared by the engine, the transports and the public API.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace mooncake::tent {

using SegmentID = uint64_t;
using BatchID = uint64_t;
using Location = std::string;

// The engine's own segment; openSegment() never returns it for a peer.
// A macro, as upstream spells it, because the C API in transfer_engine.h
// defines the same name for C callers.
#ifndef LOCAL_SEGMENT_ID
#define LOCAL_SEGMENT_ID (0ull)
#endif
static const Location kWildcardLocation = "*";

// A short message from one engine to another: sendNotification(), or
// submitTransfer() with a notification, which delivers it once the data of
// that submission is complete at the target. `name` and `msg` are opaque
// bytes to the engine.
struct Notification {
    std::string name;
    std::string msg;
};

// Values are serialized (segment descriptors, the C API), so new transports
// are appended before the sentinel and existing values never move.
enum TransportType : int {
    UNSPEC = 0,
    RDMA = 1,
    MNNVL = 2,
    SHM = 3,
    NVLINK = 4,
    GDS = 5,
    IOURING = 6,
    TCP = 7,
    AscendDirect = 8,
    SUNRISE_LINK = 9,
    TPU = 10,
    UB = 11,
    MPCOMM = 12,
    kSupportedTransportTypes = 13,
};

// Lower-case config name ("tcp", "mpcomm", ...); "unspec" for UNSPEC and
// for values outside the enum.
const char* transportTypeName(TransportType type);
// Case-insensitive inverse of transportTypeName(); unknown names -> UNSPEC.
TransportType parseTransportType(const std::string& name);

enum TransferStatusEnum {
    INITIAL,
    PENDING,
    INVALID,
    CANCELED,
    COMPLETED,
    TIMEOUT,
    FAILED,
};
const char* transferStatusName(TransferStatusEnum s);

struct TransferStatus {
    TransferStatusEnum s = INITIAL;
    size_t transferred_bytes = 0;
};

// Request priority levels; a policy rule's `priority` matches one exactly.
static constexpr int PRIO_HIGH = 0;
static constexpr int PRIO_MEDIUM = 1;
static constexpr int PRIO_LOW = 2;

// What a transfer is for; a policy rule's `intent_type` matches one exactly.
enum class IntentType : int {
    INTENT_UNSPEC = 0,
    FOREGROUND_GET,
    BACKGROUND_PREFETCH,
    MIGRATION,
    CHECKPOINT,
    WEIGHT_LOADING,
    STAGING_INTERNAL,
};

struct Request {
    // A fixed underlying type: an opcode that arrives from C or the wire
    // as any int is a value the transports can load and refuse by number.
    enum OpCode : int { READ = 0, WRITE = 1 };
    OpCode opcode = READ;
    void* source = nullptr;
    SegmentID target_id = LOCAL_SEGMENT_ID;
    // Absolute address in the target segment's address space.
    uint64_t target_offset = 0;
    size_t length = 0;
    int priority = PRIO_HIGH;
    // Routes by the policy rule of this name alone (its other filters are
    // not consulted); a name no rule has fails the task.
    std::optional<std::string> policy_name;
    // Pins the transport when not UNSPEC; it must still be able to carry
    // the request's memory locations.
    TransportType transport_hint = UNSPEC;
    // Absolute steady_clock time in ns by which the caller wants it done;
    // 0 = none. Carried for upstream compatibility: nothing here schedules
    // by it yet.
    uint64_t deadline_ns = 0;
    IntentType intent_type = IntentType::INTENT_UNSPEC;
};

// One NIC's load, as upstream reports it for RDMA NICs (see
// TransferEngine::getNicLoadStats()).
struct NicLoadStats {
    std::string device_name;
    uint64_t inflight_bytes = 0;
    double ewma_bandwidth_bps = 0.0;
};

enum Permission {
    kLocalReadWrite = 0,
    kGlobalReadOnly = 1,
    kGlobalReadWrite = 2,
};

struct MemoryOptions {
    Location location = kWildcardLocation;
    Permission perm = kGlobalReadWrite;
    // The transport the caller intends to use (tebench --xport_type); UNSPEC
    // registers with every loaded transport.
    TransportType type = UNSPEC;
    bool internal = false;
};

struct SegmentInfo {
    enum Type { Memory, File };
    struct Buffer {
        uint64_t base = 0;
        size_t length = 0;
        Location location;
    };
    Type type = Memory;
    std::vector<Buffer> buffers;
};

}  // namespace mooncake::tent
