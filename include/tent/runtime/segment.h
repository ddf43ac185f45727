// Segment descriptors: what a peer needs to address this process's memory.
// Serialized as JSON between peers (p2p metadata RPC).
#pragma once

#include <json/json.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "tent/common/status.h"
#include "tent/common/types.h"

namespace mooncake::tent {

struct BufferDesc {
    uint64_t addr = 0;
    uint64_t length = 0;
    Location location = kWildcardLocation;
    // Transports that registered this buffer, in registration order.
    std::vector<TransportType> transports;
    // The POSIX shared memory object behind the buffer (shm transport,
    // "/mooncake_<pid>_<8 hex>"); "" for other memory. Serialized only when
    // set, so descriptors without it read as before.
    std::string shm_path;
};

struct MemorySegmentDesc {
    std::vector<BufferDesc> buffers;
    // Not serialized: positions in `buffers` ordered by address, set by
    // indexBuffers() when no two buffers overlap, so that findBuffer()
    // bisects instead of walking every buffer; empty otherwise. Whoever
    // changes `buffers` calls indexBuffers() again (SegmentManager does
    // after each updateLocal(), segmentFromJson() after parsing); an index
    // whose size no longer matches `buffers` is not used.
    std::vector<uint32_t> by_addr;
    // Not serialized either: how many of `buffers` are host memory (see
    // parseMemoryLocation()), counted by indexBuffers(). When all are, routing
    // knows the segment's memory kind without finding the buffer.
    size_t dram_buffers = 0;

    void indexBuffers();
    bool allDram() const { return dram_buffers == buffers.size(); }
    // Per-transport endpoint attributes, keyed by (int)TransportType;
    // e.g. MPCOMM -> "v1:10.0.0.1:13579", TCP -> "10.0.0.1:40123".
    std::map<int, std::string> transport_attrs;

    // The attribute of `transport_type`, created empty when absent.
    std::string& getTransportAttrs(int transport_type) {
        return transport_attrs[transport_type];
    }
    // nullptr when the transport published nothing.
    const std::string* getTransportAttrs(int transport_type) const;
};

// File segments carry no buffers in this tree; the type exists so that
// policies can name segment_type "file" and descriptors round-trip.
struct FileSegmentDesc {};

enum class SegmentType { Memory = 0, File = 1 };

struct SegmentDesc {
    std::string name;
    SegmentType type = SegmentType::Memory;
    // Who publishes this descriptor, so that a peer keyed by name can tell
    // a new process (the incarnation, drawn at random once per process; 0
    // means unknown) from memory registered again (registration_epoch,
    // advanced by every register and unregister) with two compares, never
    // a walk over `buffers`.
    uint64_t incarnation = 0;
    uint64_t registration_epoch = 0;
    // The publishing host's kernel (see localMachineId()), so that a
    // policy's same_machine can tell a peer on this host from one
    // elsewhere; "" (a peer that does not say) counts as another host.
    std::string machine_id;
    // MemorySegmentDesc when type is Memory, FileSegmentDesc when File.
    std::variant<MemorySegmentDesc, FileSegmentDesc> detail;

    // Only for SegmentType::Memory (std::bad_variant_access otherwise).
    const MemorySegmentDesc& getMemory() const {
        return std::get<MemorySegmentDesc>(detail);
    }
    MemorySegmentDesc& getMemory() {
        return std::get<MemorySegmentDesc>(detail);
    }
    // The registered buffer that wholly contains [base, base + length), or
    // nullptr (always for file segments).
    const BufferDesc* findBuffer(uint64_t base, uint64_t length) const;
};

using SegmentDescRef = std::shared_ptr<const SegmentDesc>;

// This host's identity for SegmentDesc::machine_id: the kernel's boot id
// (/proc/sys/kernel/random/boot_id), which every process and container
// under one running kernel shares and no other host has; else
// /etc/machine-id; else the hostname. Read once per process.
const std::string& localMachineId();

Json::Value segmentToJson(const SegmentDesc& desc);
// Validates field types; a malformed descriptor is InvalidEntry naming the
// bad field. A descriptor with more than maxSegmentBuffers() buffers is
// refused before any buffer is decoded.
Status segmentFromJson(const Json::Value& value, SegmentDesc& desc);

// What every user of a segment id says when no descriptor backs it: an
// InvalidArgument naming the id.
Status noSegmentDescriptor(SegmentID id);

// metadata/max_segment_buffers: the most buffers a peer's descriptor may
// list (p2p reply or store value). Process-wide, like the JSON limits; an
// engine sets it from its configuration at start.
inline constexpr int64_t kDefaultMaxSegmentBuffers = 65536;
void setMaxSegmentBuffers(int64_t buffers);
int64_t maxSegmentBuffers();

}  // namespace mooncake::tent
