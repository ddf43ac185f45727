#include "tent/runtime/transport_selector.h"

#include <algorithm>
#include <atomic>
#include <sstream>

#include "runtime/selection_policy.h"
#include "tent/runtime/memory_location.h"

namespace mooncake::tent {

namespace {

bool contains(const std::vector<TransportType>& list, TransportType t) {
    return std::find(list.begin(), list.end(), t) != list.end();
}

// Transports that only reach memory of this host.
bool sameMachineOnly(TransportType t) { return t == SHM || t == NVLINK; }

const char* capabilityName(MemoryKind local, MemoryKind remote) {
    if (local == MemoryKind::kDram) {
        return remote == MemoryKind::kDram ? "dram_to_dram" : "dram_to_gpu";
    }
    return remote == MemoryKind::kDram ? "gpu_to_dram" : "gpu_to_gpu";
}

bool covers(const Capabilities& caps, MemoryKind local, MemoryKind remote) {
    if (local == MemoryKind::kDram) {
        return remote == MemoryKind::kDram ? caps.dram_to_dram
                                           : caps.dram_to_gpu;
    }
    return remote == MemoryKind::kDram ? caps.gpu_to_dram : caps.gpu_to_gpu;
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

// Selector generations, unique in the process: a memo keyed by one never
// matches another selector's, nor an earlier state of the same one.
std::atomic<uint64_t> g_next_generation{1};

}  // namespace

// One request's search: the pair it needs carried and every refusal met on
// the way, so that a failure can list them (each transport once).
class TransportSelector::Attempt {
 public:
    explicit Attempt(const RouteContext& context) : context_(context) {
        if (context.local_kind) {
            local_ = *context.local_kind;
        } else {
            status_ = kindOf("local", context.local_location, local_);
        }
        if (!status_.ok()) return;
        if (context.remote_kind) {
            remote_ = *context.remote_kind;
        } else {
            status_ = kindOf("remote", context.remote_location, remote_);
        }
    }

    // Not OK when either location names no memory kind: such a request is
    // refused before any transport is considered.
    const Status& status() const { return status_; }
    MemoryKind local() const { return local_; }
    MemoryKind remote() const { return remote_; }

    void refuse(TransportType t, const std::string& reason) {
        std::string line = std::string(transportTypeName(t)) + ": " + reason;
        if (std::find(reasons_.begin(), reasons_.end(), line) ==
            reasons_.end()) {
            reasons_.push_back(std::move(line));
        }
    }

    // "<head> local L -> remote R (segment S): t1: why; t2: why".
    Status failure(const std::string& head) const {
        std::ostringstream os;
        os << head << " local " << context_.local_location << " -> remote "
           << context_.remote_location << " (segment " << context_.segment_name
           << "): ";
        if (reasons_.empty()) os << "no transport was considered";
        for (size_t i = 0; i < reasons_.size(); ++i) {
            os << (i ? "; " : "") << reasons_[i];
        }
        return Status::InvalidArgument(os.str());
    }

 private:
    // An empty location is one not known (no registered buffer holds the
    // range); it is routed as host memory and the transport judges it.
    static Status kindOf(const char* side, std::string_view location,
                         MemoryKind& out) {
        out = MemoryKind::kDram;
        if (location.empty()) return Status::OK();
        MemoryLocation where;
        Status s = parseMemoryLocation(location, &where);
        if (!s.ok()) {
            return Status::InvalidArgument(std::string("cannot route: ") +
                                           side + " " +
                                           std::string(s.message()));
        }
        if (where.device()) out = MemoryKind::kVram;
        return Status::OK();
    }

    const RouteContext& context_;
    Status status_;
    MemoryKind local_ = MemoryKind::kDram;
    MemoryKind remote_ = MemoryKind::kDram;
    std::vector<std::string> reasons_;
};

void TransportSelector::changed() {
    generation_ = g_next_generation.fetch_add(1, std::memory_order_relaxed);
    uses_target_facts_ = false;
    for (const Loaded& l : loaded_) {
        if (sameMachineOnly(l.type)) uses_target_facts_ = true;
    }
    for (const SelectionPolicy& p : policies_) {
        if (p.same_machine) uses_target_facts_ = true;
    }
}

Status TransportSelector::loadPolicy(const Config& conf,
                                     const Topology* topology) {
    Json::Value rules = conf.getValue("policy");
    Status s;
    if (rules.isNull()) {
        policies_.clear();
    } else {
        s = parseSelectionPolicies(rules, topology, policies_);
    }
    changed();
    return s;
}

void TransportSelector::setLoaded(std::vector<TransportType> loaded) {
    loaded_.clear();
    for (TransportType t : loaded) {
        Capabilities caps;
        caps.dram_to_dram = true;
        loaded_.push_back(Loaded{t, caps});
    }
    changed();
}

void TransportSelector::setCapabilities(TransportType type,
                                        const Capabilities& caps) {
    for (Loaded& l : loaded_) {
        if (l.type == type) l.caps = caps;
    }
    changed();
}

const TransportSelector::Loaded* TransportSelector::find(
    TransportType t) const {
    for (const Loaded& l : loaded_) {
        if (l.type == t) return &l;
    }
    return nullptr;
}

Status TransportSelector::checkHint(TransportType hint) const {
    if (find(hint) == nullptr) {
        std::vector<TransportType> names;
        for (const Loaded& l : loaded_) names.push_back(l.type);
        return Status::InvalidArgument(
            std::string("transport_hint ") + transportTypeName(hint) +
            " is not loaded (loaded: " + joinNames(names) + ")");
    }
    return Status::OK();
}

bool TransportSelector::matches(const SelectionPolicy& policy,
                                const Request& request,
                                const RouteContext& context,
                                const Attempt& attempt) const {
    if (!policy.segment_type.empty() &&
        policy.segment_type !=
            (context.segment_type == SegmentType::File ? "file" : "memory")) {
        return false;
    }
    if (policy.same_machine && *policy.same_machine != context.same_machine) {
        return false;
    }
    if (policy.local_memory && *policy.local_memory != attempt.local()) {
        return false;
    }
    if (policy.remote_memory && *policy.remote_memory != attempt.remote()) {
        return false;
    }
    if (policy.min_size && request.length < *policy.min_size) return false;
    if (policy.max_size && request.length > *policy.max_size) return false;
    if (policy.priority && request.priority != *policy.priority) return false;
    if (policy.intent_type && request.intent_type != *policy.intent_type) {
        return false;
    }
    return true;
}

bool TransportSelector::able(TransportType t, const SelectionPolicy* policy,
                             const RouteContext& context,
                             bool needs_registration, Attempt& attempt) const {
    const Loaded* loaded = find(t);
    if (loaded == nullptr) {
        attempt.refuse(t, "not loaded");
        return false;
    }
    if (needs_registration && !contains(*context.buffer_transports, t)) {
        attempt.refuse(t, "did not register the target buffer");
        return false;
    }
    if (policy != nullptr && !policy->device_transports.empty() &&
        !contains(policy->device_transports, t)) {
        attempt.refuse(t,
                       "runs on none of policy " + policy->name + "'s devices");
        return false;
    }
    if (sameMachineOnly(t) && !context.same_machine) {
        attempt.refuse(t, "the target is on another machine");
        return false;
    }
    if (t == SHM && !context.same_user) {
        attempt.refuse(t, "the target runs as another user");
        return false;
    }
    if (!covers(loaded->caps, attempt.local(), attempt.remote())) {
        attempt.refuse(t,
                       std::string("no ") +
                           capabilityName(attempt.local(), attempt.remote()));
        return false;
    }
    return true;
}

TransportType TransportSelector::firstAble(
    const std::vector<TransportType>& candidates, const SelectionPolicy* policy,
    const RouteContext& context, Attempt& attempt) const {
    for (TransportType t : candidates) {
        if (able(t, policy, context, true, attempt)) return t;
    }
    return UNSPEC;
}

Status TransportSelector::select(const Request& request,
                                 const RouteContext& context,
                                 TransportType& chosen) const {
    Attempt attempt(context);
    if (!attempt.status().ok()) return attempt.status();
    // 1. The caller's hint, when it can carry the pair. The target buffer's
    //    registrations are not checked: the transport reports what it
    //    cannot reach.
    if (request.transport_hint != UNSPEC) {
        CHECK_STATUS(checkHint(request.transport_hint));
        if (!able(request.transport_hint, nullptr, context, false, attempt)) {
            return attempt.failure(std::string("transport_hint ") +
                                   transportTypeName(request.transport_hint) +
                                   " cannot carry");
        }
        chosen = request.transport_hint;
        return Status::OK();
    }

    if (context.buffer_transports == nullptr) {
        std::ostringstream os;
        os << "no transport can reach segment " << context.segment_name
           << ": no registered buffer contains [0x" << std::hex
           << request.target_offset << ", +0x" << request.length << ")";
        return Status::InvalidArgument(os.str());
    }
    const std::vector<TransportType>& buffer_order = *context.buffer_transports;

    // 2. A rule bound by name: that rule alone.
    if (request.policy_name) {
        const std::string& name = *request.policy_name;
        auto it = std::find_if(
            policies_.begin(), policies_.end(),
            [&name](const SelectionPolicy& p) { return p.name == name; });
        if (it == policies_.end()) {
            std::string names;
            for (const SelectionPolicy& p : policies_) {
                names += (names.empty() ? "" : ", ") + p.name;
            }
            return Status::InvalidArgument(
                "policy_name " + name + " names no policy rule (rules: " +
                (names.empty() ? "none" : names) + ")");
        }
        const char* seg_type =
            context.segment_type == SegmentType::File ? "file" : "memory";
        if (!it->segment_type.empty() && it->segment_type != seg_type) {
            return Status::InvalidArgument(
                "policy_name " + name + ": the rule is for " +
                it->segment_type + " segments, segment " +
                std::string(context.segment_name) + " is " + seg_type);
        }
        TransportType t =
            firstAble(it->transports.empty() ? buffer_order : it->transports,
                      &*it, context, attempt);
        if (t == UNSPEC) {
            return attempt.failure("policy " + name + " cannot carry");
        }
        chosen = t;
        return Status::OK();
    }

    // 3. Policy rules, in configuration order.
    for (const SelectionPolicy& policy : policies_) {
        if (!matches(policy, request, context, attempt)) continue;
        TransportType t = firstAble(
            policy.transports.empty() ? buffer_order : policy.transports,
            &policy, context, attempt);
        if (t != UNSPEC) {
            chosen = t;
            return Status::OK();
        }
    }

    // 4. The target buffer's registration order.
    TransportType t = firstAble(buffer_order, nullptr, context, attempt);
    if (t == UNSPEC) return attempt.failure("no transport can carry");
    chosen = t;
    return Status::OK();
}

Status TransportSelector::select(const Request& request,
                                 const SegmentDesc& target,
                                 TransportType& chosen) const {
    RouteContext context;
    context.segment_type = target.type;
    context.segment_name = target.name;
    const BufferDesc* buffer =
        target.findBuffer(request.target_offset, request.length);
    if (buffer != nullptr) {
        context.remote_location = buffer->location;
        context.buffer_transports = &buffer->transports;
    }
    return select(request, context, chosen);
}

}  // namespace mooncake::tent
