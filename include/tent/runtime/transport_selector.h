// TransportSelector: which loaded transport carries a request.
//
// 1. A request's transport_hint (not UNSPEC) wins; a hint naming a transport
//    that is not loaded is an InvalidArgument naming it.
// 2. Else the first `policy` rule (config array of {name, segment_type
//    "memory"|"file" (absent: any), transports: [names]}) that matches the
//    target segment: its first transport that is loaded and registered the
//    target buffer.
// 3. Else buffer order: the first transport in the target buffer's
//    `transports` list that is loaded here (registration follows
//    getSupportedTransports() order, so tcp precedes mpcomm).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tent/common/config.h"
#include "tent/common/status.h"
#include "tent/common/types.h"
#include "tent/runtime/segment.h"

namespace mooncake::tent {

struct SelectionPolicy {
    std::string name;
    std::string segment_type;  // "" = any
    std::vector<TransportType> transports;
};

class TransportSelector {
 public:
    // Parses conf "policy"; an unknown transport name in a rule is an
    // InvalidArgument naming the rule and the name.
    Status loadPolicy(const Config& conf);
    void setLoaded(std::vector<TransportType> loaded) {
        loaded_ = std::move(loaded);
    }
    const std::vector<SelectionPolicy>& policies() const { return policies_; }

    Status select(const Request& request, const SegmentDesc& target,
                  TransportType& chosen) const;
    // Rule 1 alone: OK when `hint` (not UNSPEC) is loaded, so that it is
    // the choice for any target. Needs no descriptor, which is why the
    // engine resolves a hinted request's target only in the transport.
    Status checkHint(TransportType hint) const;

 private:
    bool isLoaded(TransportType t) const;
    std::vector<SelectionPolicy> policies_;
    std::vector<TransportType> loaded_;
};

}  // namespace mooncake::tent
