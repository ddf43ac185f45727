#include "tent/runtime/transport_selector.h"

#include <algorithm>
#include <sstream>

namespace mooncake::tent {

namespace {

const char* segmentTypeName(SegmentType type) {
    return type == SegmentType::File ? "file" : "memory";
}

bool contains(const std::vector<TransportType>& list, TransportType t) {
    return std::find(list.begin(), list.end(), t) != list.end();
}

std::string joinNames(const std::vector<TransportType>& list) {
    if (list.empty()) return "none";
    std::ostringstream os;
    for (size_t i = 0; i < list.size(); ++i) {
        if (i) os << ", ";
        os << transportTypeName(list[i]);
    }
    return os.str();
}

}  // namespace

Status TransportSelector::loadPolicy(const Config& conf) {
    std::vector<SelectionPolicy> parsed;
    Json::Value rules = conf.getValue("policy");
    if (rules.isNull()) {
        policies_.clear();
        return Status::OK();
    }
    if (!rules.isArray()) {
        return Status::InvalidArgument(
            "policy must be an array of {name, segment_type, transports}");
    }
    for (Json::ArrayIndex i = 0; i < rules.size(); ++i) {
        const Json::Value& rule = rules[i];
        SelectionPolicy policy;
        if (!rule.isObject()) {
            return Status::InvalidArgument("policy[" + std::to_string(i) +
                                           "] must be an object");
        }
        policy.name =
            rule.get("name", "policy[" + std::to_string(i) + "]").asString();
        const Json::Value& seg_type = rule["segment_type"];
        if (!seg_type.isNull()) {
            std::string value = seg_type.isString() ? seg_type.asString() : "";
            if (value != "memory" && value != "file") {
                return Status::InvalidArgument(
                    "policy " + policy.name + ": segment_type " +
                    (seg_type.isString() ? value : seg_type.toStyledString()) +
                    " is not \"memory\" or \"file\"");
            }
            policy.segment_type = value;
        }
        const Json::Value& names = rule["transports"];
        if (!names.isArray()) {
            return Status::InvalidArgument(
                "policy " + policy.name +
                ": transports must be an array of transport names");
        }
        for (const Json::Value& name : names) {
            std::string text = name.isString() ? name.asString() : "";
            TransportType type = parseTransportType(text);
            if (type == UNSPEC) {
                return Status::InvalidArgument(
                    "policy " + policy.name + ": unknown transport " +
                    (name.isString() ? text : name.toStyledString()));
            }
            policy.transports.push_back(type);
        }
        parsed.push_back(std::move(policy));
    }
    policies_ = std::move(parsed);
    return Status::OK();
}

bool TransportSelector::isLoaded(TransportType t) const {
    return contains(loaded_, t);
}

Status TransportSelector::checkHint(TransportType hint) const {
    if (!isLoaded(hint)) {
        return Status::InvalidArgument(
            std::string("transport_hint ") + transportTypeName(hint) +
            " is not loaded (loaded: " + joinNames(loaded_) + ")");
    }
    return Status::OK();
}

Status TransportSelector::select(const Request& request,
                                 const SegmentDesc& target,
                                 TransportType& chosen) const {
    // 1. The caller's hint wins over everything, even over the buffer's
    //    registrations: the transport itself reports what it cannot reach.
    if (request.transport_hint != UNSPEC) {
        CHECK_STATUS(checkHint(request.transport_hint));
        chosen = request.transport_hint;
        return Status::OK();
    }

    const BufferDesc* buffer =
        target.findBuffer(request.target_offset, request.length);
    if (!buffer) {
        std::ostringstream os;
        os << "no transport can reach segment " << target.name
           << ": no registered buffer contains [0x" << std::hex
           << request.target_offset << ", +0x" << request.length << ")";
        return Status::InvalidArgument(os.str());
    }

    // 2. Policy rules, in configuration order.
    const char* seg_type = segmentTypeName(target.type);
    for (const SelectionPolicy& policy : policies_) {
        if (!policy.segment_type.empty() && policy.segment_type != seg_type) {
            continue;
        }
        for (TransportType t : policy.transports) {
            if (isLoaded(t) && contains(buffer->transports, t)) {
                chosen = t;
                return Status::OK();
            }
        }
    }

    // 3. The target buffer's registration order.
    for (TransportType t : buffer->transports) {
        if (isLoaded(t)) {
            chosen = t;
            return Status::OK();
        }
    }
    return Status::InvalidArgument(
        "no transport can reach segment " + target.name +
        ": its buffer is registered with " + joinNames(buffer->transports) +
        ", loaded here: " + joinNames(loaded_));
}

}  // namespace mooncake::tent
