// Cross-transport failover (private header): when the transport carrying a
// task reports it FAILED, or refuses it at submission, the engine carries
// it again on the next transport able to, up to max_failover_attempts
// times (docs/failover.md).
//
// A retry only follows a final FAILED: the transport has let go of the
// task's buffers by then, so no task ever runs on two transports at once
// and none runs twice to completion. Errors that another transport cannot
// cure (bad arguments, unregistered memory, an unknown segment) are never
// retried; isPermanentFailure() is the one place that says which.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "tent/common/config.h"
#include "tent/common/status.h"
#include "tent/common/types.h"
#include "tent/runtime/transport.h"

namespace mooncake::tent {

// Upstream TENT's keys (top level of the engine configuration).
struct FailoverSettings {
    static constexpr int kDefaultMaxAttempts = 3;
    // Refused above this: each attempt holds a sub-batch until the batch
    // is freed, so the budget must stay small.
    static constexpr int kMaxMaxAttempts = 16;
    int max_attempts = kDefaultMaxAttempts;  // max_failover_attempts; 0: off
    bool on_poll = true;                     // enable_auto_failover_on_poll
    bool progress_worker = false;            // enable_progress_worker

    bool enabled() const { return max_attempts > 0; }
    // Reads the keys; an out-of-range value is refused by name.
    static Status load(const Config& conf, FailoverSettings& out);
};

// True for a submission error that no other transport can cure.
bool isPermanentFailure(const Status& status);

// Failovers done, per (from, to) transport pair: what a metrics layer
// reads (engine_events.h).
class FailoverCounters {
 public:
    void record(TransportType from, TransportType to);
    uint64_t count(TransportType from, TransportType to) const;
    uint64_t total() const;

 private:
    static size_t index(TransportType t) {
        return t >= 0 && t < kSupportedTransportTypes ? size_t(t) : 0;
    }
    std::array<std::atomic<uint64_t>,
               size_t(kSupportedTransportTypes) * kSupportedTransportTypes>
        counts_{};
};

// Where a failed-over task runs now: its own one-task sub-batch on the
// transport that took it over. Immutable once published in
// TaskRef::moved; owned by the batch (FailoverRoutes) until it is freed.
struct FailoverRoute {
    Transport* transport = nullptr;
    Transport::SubBatchRef sub = nullptr;
    int sub_task = 0;
    int attempts = 0;    // failovers so far, this one included
    uint32_t tried = 0;  // bit per TransportType already used
    Request request;     // as submitted to `transport`
};

// A batch's failover routes, freed (with their sub-batches) when the
// batch is.
class FailoverRoutes {
 public:
    const FailoverRoute* add(std::unique_ptr<FailoverRoute> route);
    void release();
    bool emptyUnsynchronized() const { return routes_.empty(); }  // owner

 private:
    std::mutex mu_;
    std::vector<std::unique_ptr<FailoverRoute>> routes_;
};

}  // namespace mooncake::tent
