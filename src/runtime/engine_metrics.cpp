// The engine's metrics hooks: the registry and its HTTP server come up when
// metrics/enabled; submission and final status feed the registry.
#include <glog/logging.h>

#include "metrics/metric_clock.h"
#include "runtime/transfer_engine_impl.h"

namespace mooncake::tent {
namespace {

// Every stamp of a task (submitted, accepted, final) comes from here:
// spans are taken between them only.
uint64_t stampUs() { return metrics::MetricClock::nowUs(); }

// A status read that stamps several tasks reads the clock once.
uint64_t nowOf(MetricsClock& clock) {
    if (clock.us == 0) clock.us = stampUs();
    return clock.us;
}

}  // namespace

using metrics::opOf;

uint64_t TransferEngineImpl::metricsNowUs() { return stampUs(); }

Status TransferEngineImpl::startMetrics() {
    metrics::MetricsConfig config;
    CHECK_STATUS(metrics::MetricsConfig::load(*conf_, config));
    if (!config.enabled) return Status::OK();
    metrics_ = std::make_unique<metrics::TentMetrics>();
    metrics_server_ =
        std::make_unique<metrics::MetricsHttpServer>(*metrics_, config);
    return metrics_server_->start();
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

// Called by the status reads of a task that runs on `transport` (null:
// nowhere) that did not read COMPLETED: taskStatus() hands those to
// noteCompleted(). A failed attempt is counted once per route (a failover
// gives the task a new route, so a new attempt); the first final read
// counts the request, failed, under its final transport.
void TransferEngineImpl::noteStatus(
    EngineBatch::TaskRef& ref, Transport* transport, const FailoverRoute* route,
    bool attempt_failed, TransferStatusEnum status, MetricsClock* clock) {
    const TransportType type = typeOf(transport);
    if (attempt_failed && transport != nullptr) {
        const auto attempt = reinterpret_cast<uintptr_t>(route);
        uintptr_t seen = ref.failure_noted.load(std::memory_order_relaxed);
        if (seen != attempt && ref.failure_noted.compare_exchange_strong(
                                   seen, attempt, std::memory_order_relaxed)) {
            MetricsClock own;
            metrics_->recordAttempt(
                opOf(ref.opcode), type,
                metrics::spanUs(nowOf(clock ? *clock : own), ref.start_us),
                false);
        }
    }
    // Polls that see PENDING are the common case: they read no clock.
    if (status == PENDING || status == INITIAL) return;
    DCHECK(status != COMPLETED) << "a COMPLETED read goes to noteCompleted()";
    if (!ref.countOnce()) return;
    const uint64_t now = clock ? nowOf(*clock) : stampUs();
    metrics_->recordRequest(opOf(ref.opcode), type, ref.length,
                            metrics::spanUs(now, ref.start_us), false);
}

}  // namespace mooncake::tent
