#include "metrics/metrics_config.h"

#include <cstdlib>
#include <limits>

namespace mooncake {
namespace tent {
namespace metrics {
namespace {

// A short, single-line rendering of a JSON value for error messages.
std::string shown(const Json::Value& v) {
    std::string s = v.toStyledString();
    s = s.substr(0, s.find('\n'));
    return s.size() > 64 ? s.substr(0, 64) + "..." : s;
}

Status intKey(const Config& conf, const char* key, int64_t lo, int64_t hi,
              int64_t& out) {
    const Json::Value v = conf.getValue(key);
    if (v.isNull()) return Status::OK();
    if (!v.isIntegral() || v.asInt64() < lo || v.asInt64() > hi) {
        return Status::InvalidArgument(
            std::string(key) + " must be an integer in [" + std::to_string(lo) +
            ", " + std::to_string(hi) + "], got " + shown(v));
    }
    out = v.asInt64();
    return Status::OK();
}

Status intEnv(const char* name, int64_t lo, int64_t hi, int64_t& out) {
    const char* text = std::getenv(name);
    if (text == nullptr) return Status::OK();
    std::string value(text);
    char* end = nullptr;
    errno = 0;
    long long parsed = std::strtoll(value.c_str(), &end, 10);
    if (value.empty() || value.size() > 20 || *end != '\0' || errno != 0 ||
        parsed < lo || parsed > hi) {
        return Status::InvalidArgument(
            std::string(name) + " must be an integer in [" +
            std::to_string(lo) + ", " + std::to_string(hi) + "], got \"" +
            value.substr(0, 64) + "\"");
    }
    out = parsed;
    return Status::OK();
}

Status boolEnv(const char* name, bool& out) {
    const char* text = std::getenv(name);
    if (text == nullptr) return Status::OK();
    std::string v(text);
    if (v == "1" || v == "true" || v == "TRUE" || v == "on" || v == "yes") {
        out = true;
    } else if (v == "0" || v == "false" || v == "FALSE" || v == "off" ||
               v == "no") {
        out = false;
    } else {
        return Status::InvalidArgument(
            std::string(name) +
            " must be one of 1, 0, true, false, on, off, yes, no; got \"" +
            v.substr(0, 64) + "\"");
    }
    return Status::OK();
}

// Host names and addresses only: no whitespace, bounded length.
Status checkHost(const char* source, const std::string& host) {
    bool ok = !host.empty() && host.size() <= 253;
    for (char c : host) {
        if (!(isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' ||
              c == ':' || c == '_')) {
            ok = false;
        }
    }
    if (ok) return Status::OK();
    return Status::InvalidArgument(
        std::string(source) +
        " must be a host name or address (1..253 characters of letters, "
        "digits, '.', '-', ':', '_'), got \"" +
        host.substr(0, 64) + "\"");
}

}  // namespace

Status MetricsConfig::load(const Config& conf, MetricsConfig& out) {
    MetricsConfig c;
    const Json::Value enabled = conf.getValue("metrics/enabled");
    if (!enabled.isNull()) {
        if (!enabled.isBool()) {
            return Status::InvalidArgument(
                "metrics/enabled must be true or false, got " + shown(enabled));
        }
        c.enabled = enabled.asBool();
    }
    const Json::Value host = conf.getValue("metrics/http_host");
    if (!host.isNull()) {
        if (!host.isString()) {
            return Status::InvalidArgument(
                "metrics/http_host must be a string, got " + shown(host));
        }
        c.http_host = host.asString();
        CHECK_STATUS(checkHost("metrics/http_host", c.http_host));
    }
    int64_t port = c.http_port, threads = c.http_server_threads,
            interval = c.report_interval_seconds;
    CHECK_STATUS(intKey(conf, "metrics/http_port", 0, 65535, port));
    CHECK_STATUS(intKey(conf, "metrics/http_server_threads", 1,
                        kMaxServerThreads, threads));
    CHECK_STATUS(intKey(conf, "metrics/report_interval_seconds", 0,
                        kMaxReportIntervalSeconds, interval));

    CHECK_STATUS(boolEnv("TENT_METRICS_ENABLED", c.enabled));
    if (const char* h = std::getenv("TENT_METRICS_HTTP_HOST")) {
        c.http_host = h;
        CHECK_STATUS(checkHost("TENT_METRICS_HTTP_HOST", c.http_host));
    }
    CHECK_STATUS(intEnv("TENT_METRICS_HTTP_PORT", 0, 65535, port));
    CHECK_STATUS(intEnv("TENT_METRICS_HTTP_SERVER_THREADS", 1,
                        kMaxServerThreads, threads));
    CHECK_STATUS(intEnv("TENT_METRICS_REPORT_INTERVAL", 0,
                        kMaxReportIntervalSeconds, interval));
    c.http_port = static_cast<uint16_t>(port);
    c.http_server_threads = static_cast<int>(threads);
    c.report_interval_seconds = static_cast<int>(interval);
    out = c;
    return Status::OK();
}

}  // namespace metrics
}  // namespace tent
}  // namespace mooncake
