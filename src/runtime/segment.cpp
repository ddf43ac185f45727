#include "tent/runtime/segment.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "common/json_util.h"
#include "tent/runtime/memory_location.h"

namespace mooncake::tent {

const std::string* MemorySegmentDesc::getTransportAttrs(
    int transport_type) const {
    auto it = transport_attrs.find(transport_type);
    return it == transport_attrs.end() ? nullptr : &it->second;
}

namespace {

// The first line of `path`, "" when it cannot be read.
std::string firstLine(const char* path) {
    std::ifstream in(path);
    std::string line;
    std::getline(in, line);
    return line;
}

}  // namespace

const std::string& localMachineId() {
    static const std::string id = [] {
        std::string value = firstLine("/proc/sys/kernel/random/boot_id");
        if (value.empty()) value = firstLine("/etc/machine-id");
        if (value.empty()) {
            char host[256] = {};
            if (gethostname(host, sizeof(host) - 1) == 0) value = host;
        }
        return value;
    }();
    return id;
}

namespace {

// Written without addr + length so that a range near 2^64 cannot wrap
// around and appear contained.
bool holds(const BufferDesc& buf, uint64_t addr, uint64_t length) {
    if (addr < buf.addr) return false;
    const uint64_t offset = addr - buf.addr;
    return offset <= buf.length && length <= buf.length - offset;
}

}  // namespace

void MemorySegmentDesc::indexBuffers() {
    by_addr.clear();
    dram_buffers = 0;
    // A location that does not parse is not counted: routing then finds
    // the buffer, and the selector refuses it by name.
    for (const BufferDesc& buf : buffers) {
        MemoryLocation where;
        if (parseMemoryLocation(buf.location, &where).ok() && !where.device()) {
            ++dram_buffers;
        }
    }
    if (buffers.size() > UINT32_MAX) return;
    std::vector<uint32_t> order(buffers.size());
    for (uint32_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [this](uint32_t a, uint32_t b) {
        return buffers[a].addr < buffers[b].addr;
    });
    // Only disjoint buffers (distinct starts, each ending at or before the
    // next starts) leave a non-empty range one candidate: the last buffer
    // starting at or below it. Overlapping ones keep the linear walk, which
    // answers the first in list order.
    for (size_t k = 1; k < order.size(); ++k) {
        const BufferDesc& prev = buffers[order[k - 1]];
        const BufferDesc& next = buffers[order[k]];
        if (next.addr <= prev.addr || next.addr - prev.addr < prev.length) {
            return;
        }
    }
    by_addr = std::move(order);
}

const BufferDesc* SegmentDesc::findBuffer(uint64_t addr,
                                          uint64_t length) const {
    if (type != SegmentType::Memory) return nullptr;
    const MemorySegmentDesc& memory = getMemory();
    const std::vector<BufferDesc>& buffers = memory.buffers;
    // An empty range may sit on the boundary of two disjoint buffers, where
    // only the list order decides: the walk below answers it.
    if (length != 0 && !buffers.empty() &&
        memory.by_addr.size() == buffers.size()) {
        auto after = std::upper_bound(
            memory.by_addr.begin(), memory.by_addr.end(), addr,
            [&buffers](uint64_t a, uint32_t i) { return a < buffers[i].addr; });
        if (after == memory.by_addr.begin()) return nullptr;
        const BufferDesc& candidate = buffers[*(after - 1)];
        return holds(candidate, addr, length) ? &candidate : nullptr;
    }
    for (const BufferDesc& buf : buffers) {
        if (holds(buf, addr, length)) return &buf;
    }
    return nullptr;
}

Json::Value segmentToJson(const SegmentDesc& desc) {
    Json::Value root(Json::objectValue);
    root["name"] = desc.name;
    root["type"] = desc.type == SegmentType::File ? "file" : "memory";
    root["incarnation"] =
        Json::Value(static_cast<Json::UInt64>(desc.incarnation));
    root["registration_epoch"] =
        Json::Value(static_cast<Json::UInt64>(desc.registration_epoch));
    if (!desc.machine_id.empty()) root["machine_id"] = desc.machine_id;
    if (desc.type != SegmentType::Memory) return root;
    const MemorySegmentDesc& memory = desc.getMemory();
    Json::Value buffers(Json::arrayValue);
    for (const BufferDesc& buf : memory.buffers) {
        Json::Value b(Json::objectValue);
        b["addr"] = Json::Value(static_cast<Json::UInt64>(buf.addr));
        b["length"] = Json::Value(static_cast<Json::UInt64>(buf.length));
        b["location"] = buf.location;
        Json::Value transports(Json::arrayValue);
        for (TransportType t : buf.transports) {
            transports.append(static_cast<int>(t));
        }
        b["transports"] = transports;
        if (!buf.shm_path.empty()) b["shm_path"] = buf.shm_path;
        buffers.append(b);
    }
    root["buffers"] = buffers;
    Json::Value attrs(Json::objectValue);
    for (const auto& [type, value] : memory.transport_attrs) {
        attrs[std::to_string(type)] = value;
    }
    root["transport_attrs"] = attrs;
    return root;
}

namespace {

std::atomic<int64_t> g_max_segment_buffers{kDefaultMaxSegmentBuffers};

}  // namespace

void setMaxSegmentBuffers(int64_t buffers) {
    g_max_segment_buffers.store(buffers < 1 ? 1 : buffers,
                                std::memory_order_relaxed);
}

int64_t maxSegmentBuffers() {
    return g_max_segment_buffers.load(std::memory_order_relaxed);
}

namespace {

// Bounds on what a peer may send: far above any real descriptor, low
// enough that nothing downstream handles absurd strings.
constexpr size_t kMaxNameBytes = 1024;
constexpr size_t kMaxLocationBytes = 256;
constexpr size_t kMaxAttrBytes = 1024;

// A key quoted in an error message, control bytes escaped, cut short.
std::string printable(const std::string& text) {
    std::string out;
    for (unsigned char c : text.substr(0, 64)) {
        if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') {
            out.push_back(static_cast<char>(c));
        } else {
            char buf[8];
            std::snprintf(buf, sizeof(buf), "\\x%02x", c);
            out += buf;
        }
    }
    return text.size() > 64 ? out + "..." : out;
}

bool isUnsigned(const Json::Value& v) {
    return (v.type() == Json::uintValue || v.type() == Json::intValue) &&
           v.isUInt64();
}

// An optional string member `key` of the buffer entry `field`, read into
// `out` (left as it was when absent), at most kMaxLocationBytes long.
Status readShortString(const Json::Value& b, const std::string& field,
                       const char* key, std::string& out) {
    if (!b.isMember(key)) return Status::OK();
    if (!b[key].isString()) {
        return Status::InvalidEntry("segment descriptor field " + field + "." +
                                    key + " is not a string");
    }
    out = b[key].asString();
    if (out.size() > kMaxLocationBytes) {
        return Status::InvalidEntry("segment descriptor field " + field + "." +
                                    key + " is " + std::to_string(out.size()) +
                                    " bytes, above the limit of " +
                                    std::to_string(kMaxLocationBytes));
    }
    return Status::OK();
}

Status parseBuffer(const Json::Value& b, size_t index, BufferDesc& out) {
    const std::string field = "buffers[" + std::to_string(index) + "]";
    if (!b.isObject()) {
        return Status::InvalidEntry("segment descriptor field " + field +
                                    " is not an object");
    }
    if (!b.isMember("addr") || !isUnsigned(b["addr"])) {
        return Status::InvalidEntry("segment descriptor field " + field +
                                    ".addr is missing or not an unsigned "
                                    "integer");
    }
    if (!b.isMember("length") || !isUnsigned(b["length"])) {
        return Status::InvalidEntry("segment descriptor field " + field +
                                    ".length is missing or not an unsigned "
                                    "integer");
    }
    out.addr = b["addr"].asUInt64();
    out.length = b["length"].asUInt64();
    if (out.addr == 0) {
        return Status::InvalidEntry("segment descriptor field " + field +
                                    ".addr is 0");
    }
    if (out.length == 0) {
        return Status::InvalidEntry("segment descriptor field " + field +
                                    ".length is 0");
    }
    // The last byte, addr + length - 1, must not pass 2^64 - 1: a range
    // that wraps would look contained in checks written as addr + length.
    if (out.length - 1 > UINT64_MAX - out.addr) {
        return Status::InvalidEntry("segment descriptor field " + field +
                                    " wraps past 2^64 (addr " +
                                    std::to_string(out.addr) + ", length " +
                                    std::to_string(out.length) + ")");
    }
    CHECK_STATUS(readShortString(b, field, "location", out.location));
    out.shm_path.clear();
    CHECK_STATUS(readShortString(b, field, "shm_path", out.shm_path));
    out.transports.clear();
    if (b.isMember("transports")) {
        const Json::Value& ts = b["transports"];
        if (!ts.isArray()) {
            return Status::InvalidEntry("segment descriptor field " + field +
                                        ".transports is not an array");
        }
        for (Json::ArrayIndex i = 0; i < ts.size(); ++i) {
            const Json::Value& t = ts[i];
            if (!t.isIntegral() || t.isBool() || !t.isInt() || t.asInt() < 0 ||
                t.asInt() >= kSupportedTransportTypes) {
                return Status::InvalidEntry(
                    "segment descriptor field " + field + ".transports[" +
                    std::to_string(i) + "] is not a transport type (0.." +
                    std::to_string(kSupportedTransportTypes - 1) + ")");
            }
            out.transports.push_back(static_cast<TransportType>(t.asInt()));
        }
    }
    return Status::OK();
}

}  // namespace

Status noSegmentDescriptor(SegmentID id) {
    return Status::InvalidArgument("no descriptor for segment id " +
                                   std::to_string(id));
}

Status segmentFromJson(const Json::Value& value, SegmentDesc& desc) {
    if (!value.isObject()) {
        return Status::InvalidEntry("segment descriptor is not a JSON object");
    }
    SegmentDesc parsed;
    if (!value.isMember("name") || !value["name"].isString()) {
        return Status::InvalidEntry(
            "segment descriptor field name is missing or not a string");
    }
    parsed.name = value["name"].asString();
    if (parsed.name.size() > kMaxNameBytes) {
        return Status::InvalidEntry("segment descriptor field name is " +
                                    std::to_string(parsed.name.size()) +
                                    " bytes, above the limit of " +
                                    std::to_string(kMaxNameBytes));
    }
    if (value.isMember("type")) {
        const Json::Value& type = value["type"];
        if (type.isString() && type.asString() == "memory") {
            parsed.type = SegmentType::Memory;
        } else if (type.isString() && type.asString() == "file") {
            parsed.type = SegmentType::File;
            parsed.detail = FileSegmentDesc{};
        } else {
            return Status::InvalidEntry(
                "segment descriptor field type must be \"memory\" or "
                "\"file\", got " +
                toCompactJson(type));
        }
    }
    for (const char* field : {"incarnation", "registration_epoch"}) {
        if (!value.isMember(field)) continue;
        if (!isUnsigned(value[field])) {
            return Status::InvalidEntry(
                std::string("segment descriptor field ") + field +
                " is not an unsigned integer");
        }
    }
    parsed.incarnation = value.get("incarnation", 0).asUInt64();
    parsed.registration_epoch = value.get("registration_epoch", 0).asUInt64();
    if (value.isMember("machine_id")) {
        if (!value["machine_id"].isString()) {
            return Status::InvalidEntry(
                "segment descriptor field machine_id is not a string");
        }
        parsed.machine_id = value["machine_id"].asString();
    }
    if (parsed.type == SegmentType::File) {
        desc = std::move(parsed);
        return Status::OK();
    }
    MemorySegmentDesc& memory = parsed.getMemory();
    if (value.isMember("buffers")) {
        const Json::Value& buffers = value["buffers"];
        if (!buffers.isArray()) {
            return Status::InvalidEntry(
                "segment descriptor field buffers is not an array");
        }
        const int64_t limit = maxSegmentBuffers();
        if (static_cast<int64_t>(buffers.size()) > limit) {
            return Status::InvalidEntry(
                "segment descriptor lists " + std::to_string(buffers.size()) +
                " buffers, above metadata/max_segment_buffers=" +
                std::to_string(limit));
        }
        memory.buffers.reserve(buffers.size());
        for (Json::ArrayIndex i = 0; i < buffers.size(); ++i) {
            BufferDesc buf;
            CHECK_STATUS(parseBuffer(buffers[i], i, buf));
            memory.buffers.push_back(std::move(buf));
        }
    }
    memory.indexBuffers();
    if (value.isMember("transport_attrs")) {
        const Json::Value& attrs = value["transport_attrs"];
        if (!attrs.isObject()) {
            return Status::InvalidEntry(
                "segment descriptor field transport_attrs is not an object");
        }
        for (const std::string& key : attrs.getMemberNames()) {
            // Plain decimal only: "+7", " 7", "07" or "7x" are not a type.
            bool digits = !key.empty() && key.size() <= 9 &&
                          (key == "0" || key[0] != '0');
            for (char c : key) digits = digits && c >= '0' && c <= '9';
            if (!digits) {
                return Status::InvalidEntry(
                    "segment descriptor field transport_attrs key \"" +
                    printable(key) + "\" is not a non-negative integer");
            }
            const std::string where =
                "segment descriptor field transport_attrs[\"" + key + "\"]";
            if (!attrs[key].isString()) {
                return Status::InvalidEntry(where + " is not a string");
            }
            const std::string value = attrs[key].asString();
            if (value.size() > kMaxAttrBytes) {
                return Status::InvalidEntry(where + " is " +
                                            std::to_string(value.size()) +
                                            " bytes, above the limit of " +
                                            std::to_string(kMaxAttrBytes));
            }
            for (unsigned char c : value) {
                if (c < 0x20 || c == 0x7f) {
                    return Status::InvalidEntry(where +
                                                " contains control character " +
                                                std::to_string(c));
                }
            }
            long type = std::strtol(key.c_str(), nullptr, 10);
            // A type this build does not know (a newer peer) is dropped:
            // nothing here would read it.
            if (type >= kSupportedTransportTypes) continue;
            memory.transport_attrs[static_cast<int>(type)] = value;
        }
    }
    desc = std::move(parsed);
    return Status::OK();
}

}  // namespace mooncake::tent
