// The port an engine's metrics endpoint listens on, read from its
// "Metrics HTTP server listening on 127.0.0.1:<port>" log line, so a test
// that configured metrics/http_port 0 can scrape it.
#pragma once

#include <regex>
#include <string>

#include "kit/log_capture.h"

namespace mooncake::tent::testing {

// 0 when no such line was logged.
inline int metricsPortIn(LogCapture& log) {
    static const std::regex re(
        "Metrics HTTP server listening on 127\\.0\\.0\\.1:([0-9]+)");
    for (const auto& line : log.lines()) {
        std::smatch m;
        if (std::regex_search(line, m, re)) return std::stoi(m[1]);
    }
    return 0;
}

}  // namespace mooncake::tent::testing
