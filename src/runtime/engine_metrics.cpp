// The engine's metrics hooks: the registry and its HTTP server come up when
// metrics/enabled; submission and final status feed the registry.
#include <chrono>

#include "runtime/transfer_engine_impl.h"

namespace mooncake::tent {
namespace {

uint64_t steadyUs() {
    return static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::microseconds>(
            std::chrono::steady_clock::now().time_since_epoch())
            .count());
}

metrics::Op opOf(const Request& request) {
    return request.opcode == Request::WRITE ? metrics::Op::kWrite
                                            : metrics::Op::kRead;
}

}  // namespace

uint64_t TransferEngineImpl::metricsNowUs() { return steadyUs(); }

Status TransferEngineImpl::startMetrics() {
    metrics::MetricsConfig config;
    CHECK_STATUS(metrics::MetricsConfig::load(*conf_, config));
    if (!config.enabled) return Status::OK();
    metrics_ = std::make_unique<metrics::TentMetrics>();
    metrics_server_ =
        std::make_unique<metrics::MetricsHttpServer>(*metrics_, config);
    return metrics_server_->start();
}

void TransferEngineImpl::noteSubmitted(EngineBatch::TaskRef& ref) {
    ref.start_us = metricsNowUs();
}

// A transport refused `list` at submitTransferTasks: one failed attempt per
// request under that transport (latency 0: nothing ran).
void TransferEngineImpl::noteRefused(Transport* transport,
                                     const std::vector<Request>& list) {
    const TransportType type = typeOf(transport);
    for (const Request& request : list) {
        metrics_->recordAttempt(opOf(request), type, 0, false);
    }
}

// Called by every status read of a task that runs on `transport` (null:
// nowhere). A failed attempt is counted once per route (a failover gives
// the task a new route, so a new attempt); the first final read counts the
// request under its final transport, and a COMPLETED one its attempt.
void TransferEngineImpl::noteStatus(EngineBatch::TaskRef& ref,
                                    Transport* transport,
                                    const FailoverRoute* route,
                                    bool attempt_failed,
                                    TransferStatusEnum status) {
    // Polls that see PENDING are the common case: they read no clock.
    if (attempt_failed && transport != nullptr) {
        const auto attempt = reinterpret_cast<uintptr_t>(route);
        uintptr_t seen = ref.failure_noted.load(std::memory_order_relaxed);
        if (seen != attempt && ref.failure_noted.compare_exchange_strong(
                                   seen, attempt, std::memory_order_relaxed)) {
            metrics_->recordAttempt(opOf(ref.request), typeOf(transport),
                                    steadyUs() - ref.start_us, false);
        }
    }
    if (status == PENDING || status == INITIAL ||
        ref.counted.load(std::memory_order_relaxed) ||
        ref.counted.exchange(true, std::memory_order_relaxed)) {
        return;
    }
    const metrics::Op op = opOf(ref.request);
    const TransportType type = transport ? typeOf(transport) : UNSPEC;
    const uint64_t now = steadyUs();
    const uint64_t elapsed = now - ref.start_us;
    const bool ok = status == COMPLETED;
    if (ok) {
        metrics_->recordAttempt(op, type, elapsed, true);
        // accepted_us is 0 for a task its first transport refused (it
        // completed through a failover): no dispatch stage to speak of.
        if (ref.accepted_us != 0) {
            metrics_->recordStages(type, ref.accepted_us - ref.start_us,
                                   now - ref.accepted_us);
        }
    }
    metrics_->recordRequest(op, type, ref.request.length, elapsed, ok);
}

}  // namespace mooncake::tent
