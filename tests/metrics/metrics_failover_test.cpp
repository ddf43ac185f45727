// Metrics across a failover, two processes: the initiator's mpcomm fails
// every issue (FaultyMpcommAdapter) and each request completes over tcp.
// Requests count once, under tcp; attempts count once each: one failed
// mpcomm attempt and one tcp attempt per request.
#include <gtest/gtest.h>
#include <httplib.h>

#include <memory>
#include <string>
#include <vector>

#include "kit/faulty_mpcomm_adapter.h"
#include "kit/log_capture.h"
#include "kit/metrics_port.h"
#include "kit/two_process_fixture.h"
#include "tent/runtime/transport.h"
#include "tent/transport/mpcomm/mpcomm_transport.h"

namespace mooncake::tent {
namespace {

constexpr size_t kChunk = 64 << 10;
constexpr size_t kTasks = 6;

class MetricsFailoverTest : public testing::TwoProcessTest {
 protected:
    void TearDown() override {
        TwoProcessTest::TearDown();
        setTransportFactoryOverride(MPCOMM, {});
    }
};

TEST_F(MetricsFailoverTest, RecoveredRequestsCountOnceUnderTcp) {
    testing::TargetOptions options;
    options.xport = MPCOMM;
    options.with_tcp = true;
    ASSERT_NO_FATAL_FAILURE(startTargetWith(options));
    if (IsSkipped()) return;
    auto faulty = std::make_shared<testing::FaultyMpcommAdapter>(
        createDefaultMpcommAdapter());
    faulty->issue_refusals = 1 << 30;
    setTransportFactoryOverride(
        MPCOMM, [faulty] { return std::make_unique<MpcommTransport>(faulty); });
    auto conf = testing::onlyTransport(TCP);
    conf->set("transports/mpcomm/enable", true);
    conf->set("max_failover_attempts", 3);
    conf->set("metrics/enabled", true);
    conf->set("metrics/http_host", std::string("127.0.0.1"));
    conf->set("metrics/http_port", 0);
    conf->set("metrics/report_interval_seconds", 0);
    testing::LogCapture log;
    ASSERT_NO_FATAL_FAILURE(startInitiatorWithConfig(conf));
    if (IsSkipped()) return;
    ASSERT_TRUE(testing::hasTransport(*engine_, MPCOMM));

    std::vector<Request> reads;
    for (size_t k = 0; k < kTasks; ++k) {
        reads.push_back(request(Request::READ, k * kChunk, kChunk));
    }
    for (const auto& st : run(reads)) ASSERT_EQ(st.s, COMPLETED);

    const int port = testing::metricsPortIn(log);
    ASSERT_NE(port, 0);
    httplib::Client client("127.0.0.1", port);
    client.set_read_timeout(5, 0);
    auto r = client.Get("/metrics");
    ASSERT_TRUE(r);
    const std::string body = r->body;
    auto has = [&](const std::string& line) {
        return body.find(line + "\n") != std::string::npos;
    };
    EXPECT_TRUE(has("tent_read_requests_total{transport=\"tcp\"} 6")) << body;
    EXPECT_TRUE(has("tent_read_bytes_total{transport=\"tcp\"} " +
                    std::to_string(kTasks * kChunk)));
    EXPECT_EQ(body.find("tent_read_requests_total{transport=\"mpcomm\"}"),
              std::string::npos);
    EXPECT_EQ(body.find("tent_read_failures_total{"), std::string::npos);
    EXPECT_TRUE(has("tent_stage_transport_us_count{transport=\"tcp\"} 6"));
    // Served by this engine's endpoint, once per move.
    EXPECT_TRUE(
        has("tent_transport_failover_total{from=\"mpcomm\","
            "to=\"tcp\"} 6"))
        << body;
    EXPECT_TRUE(
        has("tent_transport_attempts_total{transport=\"mpcomm\","
            "operation=\"read\"} 6"));
    EXPECT_TRUE(
        has("tent_transport_attempt_failures_total{transport=\"mpcomm\","
            "operation=\"read\"} 6"));
    EXPECT_TRUE(
        has("tent_transport_attempts_total{transport=\"tcp\","
            "operation=\"read\"} 6"));
    EXPECT_EQ(
        body.find("tent_transport_attempt_failures_total{transport=\"tcp\""),
        std::string::npos);
}

}  // namespace
}  // namespace mooncake::tent
