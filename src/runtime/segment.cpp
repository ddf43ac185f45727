#include "tent/runtime/segment.h"

#include <cerrno>
#include <cstdlib>
#include <limits>

#include "common/json_util.h"

namespace mooncake::tent {

const std::string* MemorySegmentDesc::getTransportAttrs(
    int transport_type) const {
    auto it = transport_attrs.find(transport_type);
    return it == transport_attrs.end() ? nullptr : &it->second;
}

const BufferDesc* SegmentDesc::findBuffer(uint64_t addr,
                                          uint64_t length) const {
    if (type != SegmentType::Memory) return nullptr;
    for (const BufferDesc& buf : getMemory().buffers) {
        // Written without addr + length so that a range near 2^64 cannot
        // wrap around and appear contained.
        if (addr < buf.addr) continue;
        uint64_t offset = addr - buf.addr;
        if (offset > buf.length || length > buf.length - offset) continue;
        return &buf;
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

bool isUnsigned(const Json::Value& v) {
    return (v.type() == Json::uintValue || v.type() == Json::intValue) &&
           v.isUInt64();
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
    if (b.isMember("location")) {
        if (!b["location"].isString()) {
            return Status::InvalidEntry("segment descriptor field " + field +
                                        ".location is not a string");
        }
        out.location = b["location"].asString();
    }
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
        for (Json::ArrayIndex i = 0; i < buffers.size(); ++i) {
            BufferDesc buf;
            CHECK_STATUS(parseBuffer(buffers[i], i, buf));
            memory.buffers.push_back(std::move(buf));
        }
    }
    if (value.isMember("transport_attrs")) {
        const Json::Value& attrs = value["transport_attrs"];
        if (!attrs.isObject()) {
            return Status::InvalidEntry(
                "segment descriptor field transport_attrs is not an object");
        }
        for (const std::string& key : attrs.getMemberNames()) {
            char* end = nullptr;
            errno = 0;
            long type = std::strtol(key.c_str(), &end, 10);
            if (key.empty() || *end != '\0' || errno != 0 || type < 0 ||
                type > std::numeric_limits<int>::max()) {
                return Status::InvalidEntry(
                    "segment descriptor field transport_attrs key \"" + key +
                    "\" is not a non-negative integer");
            }
            if (!attrs[key].isString()) {
                return Status::InvalidEntry(
                    "segment descriptor field transport_attrs[\"" + key +
                    "\"] is not a string");
            }
            memory.transport_attrs[static_cast<int>(type)] =
                attrs[key].asString();
        }
    }
    desc = std::move(parsed);
    return Status::OK();
}

}  // namespace mooncake::tent
