// The metrics endpoint: configuration keys and TENT_METRICS_* variables
// (defaults, overrides, refusals by name), the four endpoints served over a
// real socket, and an engine pair whose initiator's /metrics counts exactly
// the bytes and requests a cross-process TCP run moved.
#include "metrics/metrics_http_server.h"

#include <gtest/gtest.h>
#include <httplib.h>
#include <json/json.h>

#include "kit/log_capture.h"
#include "kit/metrics_port.h"
#include "kit/scoped_env.h"
#include "kit/two_process_fixture.h"
#include "kit/wait_until.h"

namespace mooncake::tent::testing {
namespace {

using metrics::MetricsConfig;
using metrics::MetricsHttpServer;
using metrics::Op;
using metrics::TentMetrics;

std::string refusal(const Config& conf) {
    MetricsConfig out;
    Status s = MetricsConfig::load(conf, out);
    EXPECT_FALSE(s.ok());
    return std::string(s.message());
}

TEST(MetricsConfigTest, DefaultsAreUpstreamsButOff) {
    MetricsConfig c;
    ASSERT_TRUE(MetricsConfig::load(Config(), c).ok());
    EXPECT_FALSE(c.enabled);
    EXPECT_EQ(c.http_host, "0.0.0.0");
    EXPECT_EQ(c.http_port, 9100);
    EXPECT_EQ(c.http_server_threads, 2);
    EXPECT_EQ(c.report_interval_seconds, 30);
}

TEST(MetricsConfigTest, EnvironmentOverridesKeys) {
    Config conf;
    conf.set("metrics/enabled", false);
    conf.set("metrics/http_port", 9200);
    ScopedEnv e1("TENT_METRICS_ENABLED", "1");
    ScopedEnv e2("TENT_METRICS_HTTP_PORT", "0");
    ScopedEnv e3("TENT_METRICS_HTTP_HOST", "127.0.0.1");
    ScopedEnv e4("TENT_METRICS_HTTP_SERVER_THREADS", "3");
    ScopedEnv e5("TENT_METRICS_REPORT_INTERVAL", "0");
    MetricsConfig c;
    ASSERT_TRUE(MetricsConfig::load(conf, c).ok());
    EXPECT_TRUE(c.enabled);
    EXPECT_EQ(c.http_port, 0);
    EXPECT_EQ(c.http_host, "127.0.0.1");
    EXPECT_EQ(c.http_server_threads, 3);
    EXPECT_EQ(c.report_interval_seconds, 0);
}

TEST(MetricsConfigTest, BadValuesAreRefusedByName) {
    Config conf;
    conf.set("metrics/http_port", 70000);
    EXPECT_EQ(refusal(conf),
              "metrics/http_port must be an integer in [0, 65535], got 70000");
    conf = Config();
    conf.set("metrics/http_server_threads", 0);
    EXPECT_EQ(refusal(conf),
              "metrics/http_server_threads must be an integer in [1, 64], "
              "got 0");
    conf = Config();
    conf.set("metrics/enabled", std::string("yes"));
    EXPECT_EQ(refusal(conf),
              "metrics/enabled must be true or false, got \"yes\"");
    {
        ScopedEnv e("TENT_METRICS_HTTP_PORT", "9x");
        EXPECT_EQ(refusal(Config()),
                  "TENT_METRICS_HTTP_PORT must be an integer in [0, 65535], "
                  "got \"9x\"");
    }
    {
        ScopedEnv e("TENT_METRICS_REPORT_INTERVAL", "-1");
        EXPECT_EQ(refusal(Config()),
                  "TENT_METRICS_REPORT_INTERVAL must be an integer in [0, "
                  "86400], got \"-1\"");
    }
    {
        ScopedEnv e("TENT_METRICS_ENABLED", "maybe");
        EXPECT_EQ(refusal(Config()),
                  "TENT_METRICS_ENABLED must be one of 1, 0, true, false, on, "
                  "off, yes, no; got \"maybe\"");
    }
    {
        ScopedEnv e("TENT_METRICS_HTTP_HOST", "a b");
        EXPECT_NE(refusal(Config()).find("TENT_METRICS_HTTP_HOST must be a "
                                         "host name or address"),
                  std::string::npos);
    }
}

TEST(MetricsHttpServerTest, ServesTheFourEndpoints) {
    TentMetrics registry;
    registry.recordRequest(Op::kRead, TCP, 4096, 250, true);
    registry.recordRequest(Op::kWrite, MPCOMM, 100, 10, false);
    MetricsConfig config;
    config.enabled = true;
    config.http_host = "127.0.0.1";
    config.http_port = 0;
    config.report_interval_seconds = 0;
    LogCapture log;
    MetricsHttpServer server(registry, config);
    ASSERT_TRUE(server.start().ok());
    ASSERT_NE(server.port(), 0);
    EXPECT_EQ(metricsPortIn(log), server.port());

    httplib::Client client("127.0.0.1", server.port());
    client.set_read_timeout(5, 0);
    auto r = client.Get("/metrics");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->get_header_value("Content-Type"),
              "text/plain; version=0.0.4; charset=utf-8");
    EXPECT_EQ(r->body, registry.renderPrometheus());
    EXPECT_NE(r->body.find("tent_read_bytes_total{transport=\"tcp\"} 4096\n"),
              std::string::npos);

    r = client.Get("/metrics/json");
    ASSERT_TRUE(r);
    Json::Value json;
    std::string errors;
    Json::CharReaderBuilder builder;
    std::unique_ptr<Json::CharReader> reader(builder.newCharReader());
    ASSERT_TRUE(reader->parse(r->body.data(), r->body.data() + r->body.size(),
                              &json, &errors))
        << errors;
    EXPECT_EQ(json["read"]["tcp"]["bytes"].asUInt64(), 4096u);
    EXPECT_EQ(json["read"]["tcp"]["requests"].asUInt64(), 1u);
    EXPECT_EQ(json["write"]["mpcomm"]["failures"].asUInt64(), 1u);
    EXPECT_EQ(json["write"]["mpcomm"]["bytes"].asUInt64(), 0u);

    r = client.Get("/metrics/summary");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->body,
              "read: 4096 bytes, 1 requests, 0 failures; write: 0 bytes, 1 "
              "requests, 1 failures\n");
    r = client.Get("/health");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->body, "OK\n");
    r = client.Get("/nothing");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 404);

    // A body over the payload bound is refused, not read.
    r = client.Post("/metrics",
                    std::string(metrics::kMaxRequestPayload + 1, 'x'),
                    "text/plain");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 413);

    server.stop();
    server.stop();
    httplib::Client after("127.0.0.1", server.port());
    after.set_connection_timeout(1, 0);
    EXPECT_FALSE(after.Get("/health"));
}

TEST(MetricsHttpServerTest, BusyPortIsRefusedByName) {
    TentMetrics registry;
    MetricsConfig config;
    config.http_host = "127.0.0.1";
    config.http_port = 0;
    config.report_interval_seconds = 0;
    MetricsHttpServer first(registry, config);
    ASSERT_TRUE(first.start().ok());
    config.http_port = first.port();
    MetricsHttpServer second(registry, config);
    Status s = second.start();
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(std::string(s.message()),
              "metrics HTTP server cannot bind 127.0.0.1:" +
                  std::to_string(first.port()) +
                  " (metrics/http_host, metrics/http_port)");
}

TEST(MetricsHttpServerTest, LogsASummaryEveryInterval) {
    TentMetrics registry;
    registry.recordRequest(Op::kWrite, TCP, 512, 5, true);
    MetricsConfig config;
    config.http_host = "127.0.0.1";
    config.http_port = 0;
    config.report_interval_seconds = 1;
    LogCapture log;
    MetricsHttpServer server(registry, config);
    ASSERT_TRUE(server.start().ok());
    const std::string want =
        "TENT metrics: read: 0 bytes, 0 requests, 0 failures; write: 512 "
        "bytes, 1 requests, 0 failures";
    EXPECT_TRUE(waitUntil([&] { return log.count(want) >= 1; },
                          std::chrono::seconds(10)));
    server.stop();
}

class MetricsEnginePairTest : public TwoProcessTest {};

// Two processes over TCP: what the initiator's /metrics says is exactly
// what the run moved, counted once per request under tcp.
TEST_F(MetricsEnginePairTest, CountsWhatAPairMoved) {
    TargetOptions options;
    options.xport = TCP;
    ASSERT_NO_FATAL_FAILURE(startTargetWith(options));
    if (IsSkipped()) return;
    auto conf = onlyTransport(TCP);
    conf->set("metrics/enabled", true);
    conf->set("metrics/http_host", std::string("127.0.0.1"));
    conf->set("metrics/http_port", 0);
    conf->set("metrics/report_interval_seconds", 0);
    LogCapture log;
    ASSERT_NO_FATAL_FAILURE(startInitiatorWithConfig(conf));
    if (IsSkipped()) return;
    const int port = metricsPortIn(log);
    ASSERT_NE(port, 0);

    constexpr size_t kChunk = 64 << 10;
    std::vector<Request> writes, reads;
    for (size_t off = 0; off < 8 * kChunk; off += kChunk) {
        writes.push_back(request(Request::WRITE, off, kChunk));
    }
    for (size_t off = 0; off < 3 * kChunk; off += kChunk) {
        reads.push_back(request(Request::READ, off, kChunk));
    }
    for (const auto& st : run(writes)) ASSERT_EQ(st.s, COMPLETED);
    for (const auto& st : run(reads)) ASSERT_EQ(st.s, COMPLETED);
    // A task read again after its final status is not counted again.
    {
        BatchID batch = engine_->allocateBatch(2);
        ASSERT_TRUE(
            engine_
                ->submitTransfer(batch, {request(Request::READ, 0, 100),
                                         // Apart: two READs into one local
                                         // range would race (TSan).
                                         request(Request::READ, kChunk, 28)})
                .ok());
        for (size_t i = 0; i < 2; ++i) {
            TransferStatus st;
            ASSERT_TRUE(waitUntil(
                [&] {
                    return engine_->getTransferStatus(batch, i, st).ok() &&
                           st.s != PENDING && st.s != INITIAL;
                },
                kDeadline));
            ASSERT_EQ(st.s, COMPLETED);
            for (int again = 0; again < 3; ++again) {
                ASSERT_TRUE(engine_->getTransferStatus(batch, i, st).ok());
                ASSERT_EQ(st.s, COMPLETED);
            }
        }
        ASSERT_TRUE(engine_->freeBatch(batch).ok());
    }

    httplib::Client client("127.0.0.1", port);
    client.set_read_timeout(5, 0);
    auto r = client.Get("/metrics");
    ASSERT_TRUE(r);
    const std::string& body = r->body;
    auto has = [&](const std::string& line) {
        return body.find(line + "\n") != std::string::npos;
    };
    EXPECT_TRUE(has("tent_write_bytes_total{transport=\"tcp\"} " +
                    std::to_string(8 * kChunk)))
        << body;
    EXPECT_TRUE(has("tent_read_bytes_total{transport=\"tcp\"} " +
                    std::to_string(3 * kChunk + 128)));
    EXPECT_TRUE(has("tent_write_requests_total{transport=\"tcp\"} 8"));
    EXPECT_TRUE(has("tent_read_requests_total{transport=\"tcp\"} 5"));
    EXPECT_TRUE(
        has("tent_transport_attempts_total{transport=\"tcp\","
            "operation=\"write\"} 8"));
    EXPECT_TRUE(has("tent_write_size_bytes_count{transport=\"tcp\"} 8"));
    EXPECT_TRUE(has("tent_read_latency_us_count{transport=\"tcp\"} 5"));
    EXPECT_TRUE(has("tent_stage_dispatch_us_count{transport=\"tcp\"} 13"));
    EXPECT_TRUE(has("tent_stage_transport_us_count{transport=\"tcp\"} 13"));
    EXPECT_EQ(body.find("failures_total{"), std::string::npos);

    // Teardown stops the server: the port no longer answers.
    abandonInitiator();
    httplib::Client after("127.0.0.1", port);
    after.set_connection_timeout(1, 0);
    EXPECT_FALSE(after.Get("/health"));
}

}  // namespace
}  // namespace mooncake::tent::testing
