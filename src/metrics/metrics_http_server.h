// Serves a TentMetrics registry over HTTP: /metrics (Prometheus text
// 0.0.4), /metrics/json, /metrics/summary and /health; and, when asked,
// logs a summary line every report_interval_seconds.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "metrics/metrics_config.h"
#include "metrics/tent_metrics.h"
#include "tent/common/status.h"

namespace mooncake {
namespace tent {
namespace metrics {

// Per-connection bounds (httplib limits): a scrape request has no body.
constexpr size_t kMaxRequestPayload = 4096;
constexpr int kReadTimeoutSeconds = 5;
constexpr int kWriteTimeoutSeconds = 5;
constexpr size_t kKeepAliveMaxCount = 100;
constexpr int kKeepAliveTimeoutSeconds = 5;

class MetricsHttpServer {
 public:
    MetricsHttpServer(const TentMetrics& metrics, MetricsConfig config);
    ~MetricsHttpServer();
    MetricsHttpServer(const MetricsHttpServer&) = delete;
    MetricsHttpServer& operator=(const MetricsHttpServer&) = delete;

    // Binds http_host:http_port (0: a free port) and starts serving; logs
    // "Metrics HTTP server listening on host:port".
    Status start();
    // Stops serving and the reporter; bounded by the keep-alive and read
    // timeouts of connections in flight. Safe to call twice.
    void stop();
    uint16_t port() const { return port_; }

    // Bodies of /metrics/json and /metrics/summary (also the log line).
    std::string renderJson() const;
    std::string renderSummary() const;

 private:
    struct Impl;
    const TentMetrics& metrics_;
    MetricsConfig config_;
    uint16_t port_ = 0;
    std::unique_ptr<Impl> impl_;
};

}  // namespace metrics
}  // namespace tent
}  // namespace mooncake
