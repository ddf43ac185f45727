// Parsing the `policy` rules. Every field a TENT policy rule can carry is
// either applied (TransportSelector) or refused here, so that a filter the
// engine would ignore never turns a narrow rule into one that matches
// every request.
#include "runtime/selection_policy.h"

#include <algorithm>
#include <cctype>
#include <set>
#include <string>

#include "common/json_util.h"

namespace mooncake::tent {

namespace {

// How a value appears in an error: strings bare, anything else as JSON.
std::string shown(const Json::Value& value) {
    return value.isString() ? value.asString() : toCompactJson(value);
}

std::string lowered(std::string text) {
    std::transform(text.begin(), text.end(), text.begin(),
                   [](unsigned char c) { return std::tolower(c); });
    return text;
}

const char* const kIntentNames[] = {
    "intent_unspec", "foreground_get", "background_prefetch", "migration",
    "checkpoint",    "weight_loading", "staging_internal",
};
constexpr int kIntentCount = sizeof(kIntentNames) / sizeof(kIntentNames[0]);

// Fields that select queue pairs and link-layer QoS in upstream's RDMA
// transport. No transport here has queue pairs, so accepting them would
// mean ignoring them.
const std::set<std::string> kRefusedFields = {"service_level", "traffic_class",
                                              "qp_pool"};
const std::set<std::string> kKnownFields = {
    "name",          "segment_type", "same_machine", "local_memory",
    "remote_memory", "min_size",     "max_size",     "priority",
    "devices",       "transports",   "intent_type"};

class RuleParser {
 public:
    RuleParser(const Json::Value& rule, const Topology* topology)
        : rule_(rule), topology_(topology) {}

    Status parse(SelectionPolicy& policy) {
        policy_ = &policy;
        for (const std::string& field : rule_.getMemberNames()) {
            if (kRefusedFields.count(field)) {
                return error("field " + field +
                             " is not supported here: it sets RDMA "
                             "queue-pair QoS, and no transport in this tree "
                             "has queue pairs");
            }
            if (!kKnownFields.count(field)) {
                return error("unknown field " + field);
            }
        }
        CHECK_STATUS(parseSegmentType());
        CHECK_STATUS(parseSameMachine());
        CHECK_STATUS(parseMemory("local_memory", policy.local_memory));
        CHECK_STATUS(parseMemory("remote_memory", policy.remote_memory));
        CHECK_STATUS(parseSize("min_size", policy.min_size));
        CHECK_STATUS(parseSize("max_size", policy.max_size));
        if (policy.min_size && policy.max_size &&
            *policy.min_size > *policy.max_size) {
            return error("min_size " + std::to_string(*policy.min_size) +
                         " exceeds max_size " +
                         std::to_string(*policy.max_size));
        }
        CHECK_STATUS(parsePriority());
        CHECK_STATUS(parseIntent());
        CHECK_STATUS(parseDevices());
        return parseTransports();
    }

 private:
    Status error(const std::string& what) const {
        return Status::InvalidArgument("policy " + policy_->name + ": " + what);
    }

    Status parseSegmentType() {
        const Json::Value& v = rule_["segment_type"];
        if (v.isNull()) return Status::OK();
        std::string value = v.isString() ? v.asString() : "";
        if (value != "memory" && value != "file") {
            return error("segment_type " + shown(v) +
                         " is not \"memory\" or \"file\"");
        }
        policy_->segment_type = value;
        return Status::OK();
    }

    Status parseSameMachine() {
        const Json::Value& v = rule_["same_machine"];
        if (v.isNull()) return Status::OK();
        if (!v.isBool()) {
            return error("same_machine must be true or false, got " + shown(v));
        }
        policy_->same_machine = v.asBool();
        return Status::OK();
    }

    // dram/cpu, vram/cuda/gpu, any/"*" (no filter); case-insensitive.
    Status parseMemory(const char* field, std::optional<MemoryKind>& out) {
        const Json::Value& v = rule_[field];
        if (v.isNull()) return Status::OK();
        const std::string value = v.isString() ? lowered(v.asString()) : "";
        if (value == "dram" || value == "cpu") {
            out = MemoryKind::kDram;
        } else if (value == "vram" || value == "cuda" || value == "gpu") {
            out = MemoryKind::kVram;
        } else if (value != "any" && value != "*") {
            return error(std::string(field) + " " + shown(v) +
                         " is not dram, vram or any");
        }
        return Status::OK();
    }

    Status parseSize(const char* field, std::optional<uint64_t>& out) {
        const Json::Value& v = rule_[field];
        if (v.isNull()) return Status::OK();
        if (!v.isIntegral() || !v.isUInt64()) {
            return error(std::string(field) +
                         " must be a byte count (an integer >= 0), got " +
                         shown(v));
        }
        out = v.asUInt64();
        return Status::OK();
    }

    // An integer >= 0, or "high"/"medium"/"low" (PRIO_HIGH/MEDIUM/LOW).
    Status parsePriority() {
        const Json::Value& v = rule_["priority"];
        if (v.isNull()) return Status::OK();
        if (v.isString()) {
            const std::string name = lowered(v.asString());
            if (name == "high") policy_->priority = PRIO_HIGH;
            if (name == "medium") policy_->priority = PRIO_MEDIUM;
            if (name == "low") policy_->priority = PRIO_LOW;
        } else if (v.isIntegral() && v.isInt() && v.asInt() >= 0) {
            policy_->priority = v.asInt();
        }
        if (!policy_->priority) {
            return error(
                "priority must be an integer >= 0 or \"high\", \"medium\", "
                "\"low\", got " +
                shown(v));
        }
        return Status::OK();
    }

    // A name of IntentType (case-insensitive; "unspec" too) or its value.
    Status parseIntent() {
        const Json::Value& v = rule_["intent_type"];
        if (v.isNull()) return Status::OK();
        int found = -1;
        if (v.isString()) {
            const std::string name = lowered(v.asString());
            if (name == "unspec") found = 0;
            for (int i = 0; i < kIntentCount; ++i) {
                if (name == kIntentNames[i]) found = i;
            }
        } else if (v.isIntegral() && v.isInt() && v.asInt() >= 0 &&
                   v.asInt() < kIntentCount) {
            found = v.asInt();
        }
        if (found < 0) {
            std::string names;
            for (int i = 0; i < kIntentCount; ++i) {
                names += (i ? ", " : "") + std::string(kIntentNames[i]);
            }
            return error("intent_type " + shown(v) + " is not one of " + names +
                         " (or 0-" + std::to_string(kIntentCount - 1) + ")");
        }
        policy_->intent_type = static_cast<IntentType>(found);
        return Status::OK();
    }

    // Each name must be a NIC of the local topology; the rule may then pick
    // only transports that run on one of them.
    Status parseDevices() {
        const Json::Value& v = rule_["devices"];
        if (v.isNull()) return Status::OK();
        if (!v.isArray()) {
            return error("devices must be an array of NIC names, got " +
                         shown(v));
        }
        for (const Json::Value& name : v) {
            const Topology::NicEntry* nic = findNic(name);
            if (nic == nullptr) {
                return error("device " + shown(name) +
                             " is not a NIC of this host (NICs: " + nicNames() +
                             ")");
            }
            policy_->devices.push_back(nic->name);
            std::vector<TransportType> on_nic;
            if (nic->type == Topology::NIC_RDMA) on_nic = {MPCOMM, RDMA};
            if (nic->type == Topology::NIC_TCP) on_nic = {TCP};
            for (TransportType t : on_nic) {
                auto& list = policy_->device_transports;
                if (std::find(list.begin(), list.end(), t) == list.end()) {
                    list.push_back(t);
                }
            }
        }
        return Status::OK();
    }

    const Topology::NicEntry* findNic(const Json::Value& name) const {
        if (topology_ == nullptr || !name.isString()) return nullptr;
        for (const Topology::NicEntry& nic : topology_->nic_list_) {
            if (nic.name == name.asString()) return &nic;
        }
        return nullptr;
    }

    std::string nicNames() const {
        std::string out;
        if (topology_ != nullptr) {
            for (const Topology::NicEntry& nic : topology_->nic_list_) {
                out += (out.empty() ? "" : ", ") + nic.name;
            }
        }
        return out.empty() ? "none" : out;
    }

    Status parseTransports() {
        const Json::Value& names = rule_["transports"];
        if (names.isNull()) return Status::OK();
        if (!names.isArray()) {
            return error("transports must be an array of transport names");
        }
        for (const Json::Value& name : names) {
            TransportType type =
                parseTransportType(name.isString() ? name.asString() : "");
            if (type == UNSPEC)
                return error("unknown transport " + shown(name));
            policy_->transports.push_back(type);
        }
        return Status::OK();
    }

    const Json::Value& rule_;
    const Topology* topology_;
    SelectionPolicy* policy_ = nullptr;
};

}  // namespace

Status parseSelectionPolicies(const Json::Value& rules,
                              const Topology* topology,
                              std::vector<SelectionPolicy>& out) {
    if (!rules.isArray()) {
        return Status::InvalidArgument(
            "policy must be an array of rules ({name, segment_type, "
            "transports, ...})");
    }
    std::vector<SelectionPolicy> parsed;
    for (Json::ArrayIndex i = 0; i < rules.size(); ++i) {
        const Json::Value& rule = rules[i];
        const std::string index = "policy[" + std::to_string(i) + "]";
        if (!rule.isObject()) {
            return Status::InvalidArgument(index + " must be an object");
        }
        SelectionPolicy policy;
        policy.name = index;
        const Json::Value& name = rule["name"];
        if (!name.isNull()) {
            if (!name.isString() || name.asString().empty()) {
                return Status::InvalidArgument(
                    index + ": name must be a non-empty string, got " +
                    shown(name));
            }
            policy.name = name.asString();
        }
        // policy_name binds a request to a rule by name, so names are keys.
        for (size_t j = 0; j < parsed.size(); ++j) {
            if (parsed[j].name == policy.name) {
                return Status::InvalidArgument("policy " + policy.name +
                                               ": name also used by policy[" +
                                               std::to_string(j) + "]");
            }
        }
        CHECK_STATUS(RuleParser(rule, topology).parse(policy));
        parsed.push_back(std::move(policy));
    }
    out = std::move(parsed);
    return Status::OK();
}

}  // namespace mooncake::tent
