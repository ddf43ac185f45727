// Settings of the metrics HTTP endpoint: the `metrics/*` configuration keys,
// overridden by upstream's TENT_METRICS_* environment variables.
#pragma once

#include <cstdint>
#include <string>

#include "tent/common/config.h"
#include "tent/common/status.h"

namespace mooncake {
namespace tent {
namespace metrics {

struct MetricsConfig {
    bool enabled = false;
    std::string http_host = "0.0.0.0";
    uint16_t http_port = 9100;  // 0: the system picks a free port
    int http_server_threads = 2;
    int report_interval_seconds = 30;  // 0: no periodic summary line

    static constexpr int kMaxServerThreads = 64;
    static constexpr int kMaxReportIntervalSeconds = 86400;

    // Reads the keys, then the environment; a bad value is refused with a
    // message naming the key or variable and the value seen.
    static Status load(const Config& conf, MetricsConfig& out);
};

}  // namespace metrics
}  // namespace tent
}  // namespace mooncake
