// TransportSelector: which loaded transport carries a request.
//
// Only a transport whose capabilities() cover the request's pair of memory
// locations (local buffer, remote buffer: dram_to_dram, dram_to_gpu,
// gpu_to_dram, gpu_to_gpu; the wildcard "*" counts as DRAM) is ever
// chosen, so device memory never reaches a transport that did not declare
// it. Within that:
// 1. A request's transport_hint (not UNSPEC) wins; a hint naming a transport
//    that is not loaded, or one that cannot carry the pair, is an
//    InvalidArgument naming it.
// 2. A request's policy_name binds it to the rule of that name (its
//    segment_type must fit; its other filters are not consulted).
// 3. Else the first `policy` rule whose filters all match (segment_type,
//    same_machine, local_memory, remote_memory, min_size, max_size,
//    priority, intent_type) and that has a transport able to carry it: its
//    first such transport that is loaded, registered the target buffer and
//    runs on one of the rule's `devices` when it names some. A rule with no
//    `transports` offers the buffer's order. A rule that does not match,
//    or matches with no usable transport, falls through to the next.
// 4. Else buffer order: the first able transport in the target buffer's
//    `transports` list (registration order) that is loaded here.
// When nothing can, the error names both locations and every transport
// considered with its reason ("tcp: no gpu_to_dram").
//
// Rule fields are checked when the policy loads (docs/policy.md): an
// unknown field, a bad value, or a field this tree cannot honour
// (service_level, traffic_class, qp_pool) is an InvalidArgument naming the
// rule and the field.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tent/common/config.h"
#include "tent/common/status.h"
#include "tent/common/types.h"
#include "tent/runtime/segment.h"
#include "tent/runtime/selection_policy_types.h"
#include "tent/runtime/topology.h"
#include "tent/runtime/transport.h"

namespace mooncake::tent {

// What the engine knows about one request besides the Request itself.
// Views, so that building one per request copies no string; what they
// view must outlive the select() call.
struct RouteContext {
    SegmentType segment_type = SegmentType::Memory;
    std::string_view segment_name;
    bool same_machine = false;
    // Whether the target runs as this process's user (both publish the same
    // transport_attrs[SHM]): shm maps only objects of its own user.
    bool same_user = false;
    std::string_view local_location = kWildcardLocation;
    std::string_view remote_location = kWildcardLocation;
    // The target buffer's transports, registration order; null when no
    // registered buffer of the target contains the range.
    const std::vector<TransportType>* buffer_transports = nullptr;
    // A side's memory kind when the caller knows it without the location
    // (the engine: every buffer of that side is host memory, as counted
    // when its descriptor was indexed), so that select() does not parse
    // that location again; unset: parsed from the location.
    std::optional<MemoryKind> local_kind;
    std::optional<MemoryKind> remote_kind;
};

class TransportSelector {
 public:
    // Parses conf "policy" (see above); `topology` resolves `devices`
    // (null: a host without NICs).
    Status loadPolicy(const Config& conf, const Topology* topology = nullptr);
    // Loaded transports in registration order; each carries DRAM to DRAM
    // until setCapabilities() says otherwise.
    void setLoaded(std::vector<TransportType> loaded);
    void setCapabilities(TransportType type, const Capabilities& caps);
    const std::vector<SelectionPolicy>& policies() const { return policies_; }

    Status select(const Request& request, const RouteContext& context,
                  TransportType& chosen) const;
    // select() for a target descriptor with the local buffer in DRAM on
    // another machine: the request's range is looked up in `target`.
    Status select(const Request& request, const SegmentDesc& target,
                  TransportType& chosen) const;
    // Rule 1's first half: OK when `hint` (not UNSPEC) is loaded.
    Status checkHint(TransportType hint) const;
    // Whether select() can depend on RouteContext's same_machine and
    // same_user: a same-machine-only transport (shm, nvlink) is loaded or a
    // rule filters on same_machine. When not, a caller may leave them
    // unset (false) and skip finding them out.
    bool usesTargetFacts() const { return uses_target_facts_; }
    // Moves (to a value no selector in the process had) on every
    // loadPolicy(), setLoaded() and setCapabilities(): a decision memoised
    // under one generation is the selector's answer while it holds.
    uint64_t generation() const { return generation_; }

 private:
    struct Loaded {
        TransportType type;
        Capabilities caps;
    };
    class Attempt;

    const Loaded* find(TransportType t) const;
    bool matches(const SelectionPolicy& policy, const Request& request,
                 const RouteContext& context, const Attempt& attempt) const;
    // Whether `t` can carry the request (under `policy`, when not null);
    // notes the refusal in `attempt` when not.
    bool able(TransportType t, const SelectionPolicy* policy,
              const RouteContext& context, bool needs_registration,
              Attempt& attempt) const;
    // The first transport of `candidates` that can carry the request
    // (UNSPEC when none), noting each refusal in `attempt`.
    TransportType firstAble(const std::vector<TransportType>& candidates,
                            const SelectionPolicy* policy,
                            const RouteContext& context,
                            Attempt& attempt) const;

    // After every change: a new generation, usesTargetFacts() found again.
    void changed();

    std::vector<SelectionPolicy> policies_;
    std::vector<Loaded> loaded_;
    uint64_t generation_ = 0;
    bool uses_target_facts_ = false;
};

}  // namespace mooncake::tent
