#include "metrics/metrics_http_server.h"

#include <glog/logging.h>
#include <httplib.h>
#include <json/json.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <sstream>
#include <thread>

namespace mooncake {
namespace tent {
namespace metrics {

struct MetricsHttpServer::Impl {
    httplib::Server server;
    std::thread listener;
    std::thread reporter;
    std::mutex mu;
    std::condition_variable cv;
    bool stopping = false;
};

MetricsHttpServer::MetricsHttpServer(const TentMetrics& metrics,
                                     MetricsConfig config)
    : metrics_(metrics),
      config_(std::move(config)),
      impl_(std::make_unique<Impl>()) {}

MetricsHttpServer::~MetricsHttpServer() { stop(); }

std::string MetricsHttpServer::renderJson() const {
    Json::Value root(Json::objectValue);
    for (int op = 0; op < 2; ++op) {
        Json::Value per(Json::objectValue);
        for (int t = 0; t < kSupportedTransportTypes; ++t) {
            auto type = static_cast<TransportType>(t);
            const Op o = static_cast<Op>(op);
            uint64_t requests =
                metrics_.total(TentMetrics::Total::kRequests, o, type);
            if (requests == 0) continue;
            Json::Value v(Json::objectValue);
            v["bytes"] = Json::UInt64(
                metrics_.total(TentMetrics::Total::kBytes, o, type));
            v["requests"] = Json::UInt64(requests);
            v["failures"] = Json::UInt64(
                metrics_.total(TentMetrics::Total::kFailures, o, type));
            per[transportLabel(type)] = v;
        }
        root[op == 0 ? "read" : "write"] = per;
    }
    Json::StreamWriterBuilder builder;
    builder["indentation"] = "";
    return Json::writeString(builder, root);
}

std::string MetricsHttpServer::renderSummary() const {
    uint64_t v[2][3] = {};
    for (int op = 0; op < 2; ++op)
        for (int t = 0; t < kSupportedTransportTypes; ++t) {
            auto type = static_cast<TransportType>(t);
            const Op o = static_cast<Op>(op);
            v[op][0] += metrics_.total(TentMetrics::Total::kBytes, o, type);
            v[op][1] += metrics_.total(TentMetrics::Total::kRequests, o, type);
            v[op][2] += metrics_.total(TentMetrics::Total::kFailures, o, type);
        }
    std::ostringstream os;
    os << "read: " << v[0][0] << " bytes, " << v[0][1] << " requests, "
       << v[0][2] << " failures; write: " << v[1][0] << " bytes, " << v[1][1]
       << " requests, " << v[1][2] << " failures";
    return os.str();
}

Status MetricsHttpServer::start() {
    httplib::Server& s = impl_->server;
    const int threads = config_.http_server_threads;
    s.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
    // httplib's default also sets SO_REUSEPORT, which would let a second
    // engine bind the same port and take half the scrapes; a busy port must
    // be refused instead.
    s.set_socket_options([](socket_t sock) {
        int yes = 1;
        setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    });
    s.set_payload_max_length(kMaxRequestPayload);
    s.set_read_timeout(kReadTimeoutSeconds, 0);
    s.set_write_timeout(kWriteTimeoutSeconds, 0);
    s.set_keep_alive_max_count(kKeepAliveMaxCount);
    s.set_keep_alive_timeout(kKeepAliveTimeoutSeconds);
    s.Get("/metrics", [this](const httplib::Request&, httplib::Response& r) {
        r.set_content(metrics_.renderPrometheus(),
                      "text/plain; version=0.0.4; charset=utf-8");
    });
    s.Get("/metrics/json",
          [this](const httplib::Request&, httplib::Response& r) {
              r.set_content(renderJson(), "application/json");
          });
    s.Get("/metrics/summary",
          [this](const httplib::Request&, httplib::Response& r) {
              r.set_content(renderSummary() + "\n", "text/plain");
          });
    s.Get("/health", [](const httplib::Request&, httplib::Response& r) {
        r.set_content("OK\n", "text/plain");
    });

    if (config_.http_port == 0) {
        int bound = s.bind_to_any_port(config_.http_host);
        if (bound <= 0) {
            return Status::InvalidArgument("metrics HTTP server cannot bind " +
                                           config_.http_host +
                                           ":0 (metrics/http_host)");
        }
        port_ = static_cast<uint16_t>(bound);
    } else {
        if (!s.bind_to_port(config_.http_host, config_.http_port)) {
            return Status::InvalidArgument(
                "metrics HTTP server cannot bind " + config_.http_host + ":" +
                std::to_string(config_.http_port) +
                " (metrics/http_host, metrics/http_port)");
        }
        port_ = config_.http_port;
    }
    impl_->listener =
        std::thread([this] { impl_->server.listen_after_bind(); });
    // httplib's stop() is a no-op until the listen loop runs, and it offers
    // no callback for that moment; so start() returns once it runs, which
    // keeps a stop() right after start() from missing it.
    const auto deadline = std::chrono::steady_clock::now() +
                          std::chrono::seconds(kReadTimeoutSeconds);
    while (!s.is_running() && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (!s.is_running()) {
        stop();
        return Status::InternalError(
            "metrics HTTP server did not start serving within " +
            std::to_string(kReadTimeoutSeconds) + " s");
    }
    LOG(INFO) << "Metrics HTTP server listening on " << config_.http_host << ":"
              << port_;
    if (config_.report_interval_seconds > 0) {
        impl_->reporter = std::thread([this] {
            std::unique_lock<std::mutex> lock(impl_->mu);
            const auto every =
                std::chrono::seconds(config_.report_interval_seconds);
            while (!impl_->cv.wait_for(lock, every,
                                       [this] { return impl_->stopping; })) {
                LOG(INFO) << "TENT metrics: " << renderSummary();
            }
        });
    }
    return Status::OK();
}

void MetricsHttpServer::stop() {
    {
        std::lock_guard<std::mutex> lock(impl_->mu);
        impl_->stopping = true;
    }
    impl_->cv.notify_all();
    if (impl_->reporter.joinable()) impl_->reporter.join();
    impl_->server.stop();
    if (impl_->listener.joinable()) impl_->listener.join();
}

}  // namespace metrics
}  // namespace tent
}  // namespace mooncake
