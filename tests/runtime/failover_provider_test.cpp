// tent_failover_provider_test: cross-transport failover (docs/failover.md)
// over the real MPComm provider (softmpcomm or libmpcomm), nothing faked on
// the initiator. The target (kit/target_main.cpp) serves its pattern
// buffer over mpcomm and tcp, and its MPComm path is really broken
// (TENT_TEST_TARGET_MPCOMM_FAULT, see kit/target_process.h):
//   killable     its provider is shut down ("mpcomm-down") after a first
//                batch moved over mpcomm: listener closed, links dropped;
//   closed-port  it publishes an MPComm port nobody listens on: every
//                handshake is refused;
// or the target process is SIGKILLed, so every path is down.
// Skips without the provider unless TENT_MPCOMM_TEST_REQUIRE_PROVIDER=1.
#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "kit/batch_wait.h"
#include "kit/log_capture.h"
#include "kit/metrics_port.h"
#include "kit/scoped_env.h"
#include "kit/two_process_fixture.h"
#include "kit/wait_until.h"

namespace mooncake::tent {
namespace {

using testing::kBufferSize;
using testing::LogCapture;
using testing::patternByte;

constexpr size_t kChunk = 64 << 10;
constexpr size_t kTasks = 8;
// The initiator's bounds in these tests, small so that a target down on
// every path is given up on quickly; the bound asserted is computed from
// them as docs/failover.md states it.
constexpr int kConnectTimeoutMs = 1500;  // transports/mpcomm/connect_timeout_ms
constexpr int kTcpTimeoutMs = 1500;      // transports/tcp/timeout_ms
constexpr int kRpcTimeoutMs = 1000;      // rpc/timeout_ms
// Scheduling on a loaded 2-core CI machine, on top of the keys' sum.
constexpr int kMarginMs = 1500;

const char kMovedLine[] = "Transport failover: mpcomm -> tcp (attempt 1/3)";

// tent_transport_failover_total{from="mpcomm",to="tcp"} as the engine's
// own /metrics endpoint on `port` serves it (0 when the series is absent).
uint64_t failoverMetric(int port) {
    httplib::Client client("127.0.0.1", port);
    client.set_read_timeout(5, 0);
    auto r = client.Get("/metrics");
    EXPECT_TRUE(r) << "no /metrics answer on port " << port;
    if (!r) return 0;
    std::smatch m;
    static const std::regex series(
        "tent_transport_failover_total\\{from=\"mpcomm\",to=\"tcp\"\\} "
        "([0-9]+)");
    return std::regex_search(r->body, m, series) ? std::stoull(m[1]) : 0;
}

class FailoverProviderTest : public testing::TwoProcessTest {
 protected:
    // The target with `fault` (kMpcommFaultEnv; null: none) and an
    // initiator with mpcomm and tcp, both real.
    void start(const char* fault, int max_attempts = 3) {
        testing::ScopedEnv env(testing::kMpcommFaultEnv, fault);
        testing::TargetOptions options;
        options.xport = MPCOMM;
        options.with_tcp = true;
        ASSERT_NO_FATAL_FAILURE(startTargetWith(options));
        if (IsSkipped()) return;
        auto conf = testing::onlyTransport(MPCOMM);
        conf->set("transports/tcp/enable", true);
        conf->set("max_failover_attempts", max_attempts);
        conf->set("transports/mpcomm/connect_timeout_ms", kConnectTimeoutMs);
        conf->set("transports/tcp/timeout_ms", kTcpTimeoutMs);
        conf->set("rpc/timeout_ms", kRpcTimeoutMs);
        // The failover metric is read from the engine's own endpoint.
        conf->set("metrics/enabled", true);
        conf->set("metrics/http_host", std::string("127.0.0.1"));
        conf->set("metrics/http_port", 0);
        conf->set("metrics/report_interval_seconds", 0);
        {
            LogCapture log;
            ASSERT_NO_FATAL_FAILURE(startInitiatorWithConfig(conf));
            if (IsSkipped()) return;
            metrics_port_ = testing::metricsPortIn(log);
        }
        ASSERT_NE(metrics_port_, 0);
        ASSERT_TRUE(testing::hasTransport(*engine_, TCP));
        metric_before_ = failoverMetric(metrics_port_);
    }

    // kTasks READs (or WRITEs) of kChunk each, hinted to mpcomm.
    std::vector<Request> tasks(Request::OpCode op) {
        std::vector<Request> list;
        for (size_t k = 0; k < kTasks; ++k) {
            list.push_back(request(op, k * kChunk, kChunk));
        }
        return list;
    }

    // Reads every task's range of the target's seed-7 pattern into a
    // zeroed buffer; each task must complete with its full length.
    void expectReadsComplete() {
        std::memset(localBytes(), 0, kBufferSize);
        for (const auto& st : run(tasks(Request::READ))) {
            ASSERT_EQ(st.s, COMPLETED);
            ASSERT_EQ(st.transferred_bytes, kChunk);
        }
        for (size_t i = 0; i < kTasks * kChunk; ++i) {
            ASSERT_EQ(localBytes()[i], patternByte(i, 7)) << "byte " << i;
        }
    }

    // Writes pattern `seed` over every task's range; the target checks its
    // own bytes.
    void expectWritesComplete(uint8_t seed) {
        for (size_t i = 0; i < kTasks * kChunk; ++i) {
            localBytes()[i] = patternByte(i, seed);
        }
        for (const auto& st : run(tasks(Request::WRITE))) {
            ASSERT_EQ(st.s, COMPLETED);
            ASSERT_EQ(st.transferred_bytes, kChunk);
        }
        expectTargetHolds(0, kTasks * kChunk, seed);
    }

    // Every failover is seen three ways: the log line, the engine's count
    // and the metric.
    void expectFailovers(LogCapture& logs, size_t n) {
        EXPECT_EQ(logs.count(kMovedLine), int(n));
        EXPECT_EQ(engine_->getFailoverCount(MPCOMM, TCP), n);
        EXPECT_EQ(engine_->getFailoverCount(), n);
        EXPECT_EQ(failoverMetric(metrics_port_) - metric_before_, n);
    }

    uint64_t metric_before_ = 0;
    int metrics_port_ = 0;
};

// (a) The listener dies under a working pair: the first batches move over
// mpcomm with no failover; after "mpcomm-down" every read and write
// completes over tcp, byte-exact.
TEST_F(FailoverProviderTest, ListenerClosedAfterUseFailsOverToTcp) {
    ASSERT_NO_FATAL_FAILURE(start("killable"));
    if (IsSkipped()) return;
    {
        LogCapture logs;
        ASSERT_NO_FATAL_FAILURE(expectReadsComplete());
        ASSERT_NO_FATAL_FAILURE(expectFailovers(logs, 0));
    }
    ASSERT_EQ(target_process_.ask("mpcomm-down"), "ok");
    LogCapture logs;
    ASSERT_NO_FATAL_FAILURE(expectReadsComplete());
    ASSERT_NO_FATAL_FAILURE(expectFailovers(logs, kTasks));
    ASSERT_NO_FATAL_FAILURE(expectWritesComplete(41));
    EXPECT_EQ(logs.count(kMovedLine), int(2 * kTasks));
    EXPECT_EQ(engine_->getFailoverCount(MPCOMM, TCP), 2 * kTasks);
    EXPECT_EQ(failoverMetric(metrics_port_) - metric_before_, 2 * kTasks);
}

// (b) The published endpoint refuses every handshake: reads and writes
// complete over tcp, byte-exact.
TEST_F(FailoverProviderTest, RefusingEndpointFailsOverToTcp) {
    ASSERT_NO_FATAL_FAILURE(start("closed-port"));
    if (IsSkipped()) return;
    LogCapture logs;
    ASSERT_NO_FATAL_FAILURE(expectReadsComplete());
    ASSERT_NO_FATAL_FAILURE(expectFailovers(logs, kTasks));
    ASSERT_NO_FATAL_FAILURE(expectWritesComplete(43));
    EXPECT_EQ(engine_->getFailoverCount(MPCOMM, TCP), 2 * kTasks);
}

// The refusal spends the same budget as a failed task: with one attempt,
// tcp still carries each task, as attempt 1/1.
TEST_F(FailoverProviderTest, RefusingEndpointSpendsTheSameBudget) {
    ASSERT_NO_FATAL_FAILURE(start("closed-port", 1));
    if (IsSkipped()) return;
    LogCapture logs;
    ASSERT_NO_FATAL_FAILURE(expectReadsComplete());
    EXPECT_EQ(logs.count("Transport failover: mpcomm -> tcp (attempt 1/1)"),
              int(kTasks));
    EXPECT_EQ(engine_->getFailoverCount(MPCOMM, TCP), kTasks);
}

// max_failover_attempts 0: the refused tasks fail as without failover,
// nothing is logged or counted.
TEST_F(FailoverProviderTest, ZeroAttemptsFailsAsWithoutFailover) {
    ASSERT_NO_FATAL_FAILURE(start("closed-port", 0));
    if (IsSkipped()) return;
    LogCapture logs;
    BatchID batch = engine_->allocateBatch(kTasks);
    Status submitted = engine_->submitTransfer(batch, tasks(Request::READ));
    if (submitted.ok()) {
        std::vector<TransferStatus> states(kTasks);
        ASSERT_TRUE(testing::waitTasksFinal(*engine_, batch, states,
                                            testing::kDeadline));
        for (const auto& st : states) EXPECT_EQ(st.s, FAILED);
    }
    EXPECT_TRUE(engine_->freeBatch(batch).ok());
    EXPECT_TRUE(logs.linesStartingWith("Transport failover:").empty());
    EXPECT_TRUE(logs.linesStartingWith("Task failover limit").empty());
    EXPECT_EQ(engine_->getFailoverCount(), 0u);
    EXPECT_EQ(failoverMetric(metrics_port_), metric_before_);
}

// The target process dies (SIGKILL): every task fails within the bound
// docs/failover.md gives, computed from the keys: mpcomm's connect, a
// descriptor fetch, then tcp's timeout.
TEST_F(FailoverProviderTest, TargetDownOnEveryPathFailsWithinBound) {
    ASSERT_NO_FATAL_FAILURE(start(nullptr));
    if (IsSkipped()) return;
    ASSERT_NO_FATAL_FAILURE(expectReadsComplete());
    ASSERT_EQ(engine_->getFailoverCount(), 0u);
    killTarget();
    LogCapture logs;
    const auto bound = std::chrono::milliseconds(
        kConnectTimeoutMs + kRpcTimeoutMs + kTcpTimeoutMs + kMarginMs);
    const auto t0 = std::chrono::steady_clock::now();
    BatchID batch = engine_->allocateBatch(kTasks);
    Status submitted = engine_->submitTransfer(batch, tasks(Request::READ));
    std::vector<TransferStatus> states(kTasks);
    if (submitted.ok()) {
        ASSERT_TRUE(testing::waitTasksFinal(*engine_, batch, states,
                                            testing::kDeadline));
    }
    const int64_t elapsed_ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(
            std::chrono::steady_clock::now() - t0)
            .count();
    EXPECT_LT(elapsed_ms, bound.count()) << "ms, the bound from the keys";
    EXPECT_TRUE(engine_->freeBatch(batch).ok());
    if (submitted.ok()) {
        for (const auto& st : states) EXPECT_EQ(st.s, FAILED);
    }
    // Each task was tried on tcp once and tcp failed it too; or, where the
    // cached descriptor had expired (a slow, e.g. TSan, run), the refetch
    // from the dead target failed and no transport was left to try.
    const int after_tcp =
        logs.count("No more transports available after tcp failed");
    const int after_mpcomm =
        logs.count("No more transports available after mpcomm failed");
    EXPECT_EQ(after_tcp + after_mpcomm, int(kTasks));
    EXPECT_EQ(logs.count(kMovedLine), after_tcp);
    EXPECT_EQ(engine_->getFailoverCount(MPCOMM, TCP), size_t(after_tcp));
}

// Status readers, a canceller and the free race the failovers off the
// dead listener: every task ends COMPLETED (bytes exact) or CANCELED, the
// never-canceled ones COMPLETED, and the batch frees.
TEST_F(FailoverProviderTest, FailoverUnderConcurrentCancelAndFree) {
    ASSERT_NO_FATAL_FAILURE(start("killable"));
    if (IsSkipped()) return;
    ASSERT_NO_FATAL_FAILURE(expectReadsComplete());
    ASSERT_EQ(target_process_.ask("mpcomm-down"), "ok");
    for (int round = 0; round < 3; ++round) {
        std::memset(localBytes(), 0, kBufferSize);
        BatchID batch = engine_->allocateBatch(kTasks);
        ASSERT_TRUE(engine_->submitTransfer(batch, tasks(Request::READ)).ok());
        std::vector<TransferStatus> states(kTasks);
        const bool settled = testing::cancelEvenTasksWhilePolling(
            *engine_, batch, states, testing::kDeadline);
        ASSERT_TRUE(settled) << "round " << round;
        for (size_t k = 0; k < kTasks; ++k) {
            ASSERT_TRUE(states[k].s == COMPLETED || states[k].s == CANCELED)
                << "round " << round << " task " << k << " " << states[k].s;
            if (k % 2 == 1) {
                EXPECT_EQ(states[k].s, COMPLETED) << k;
            }
            if (states[k].s != COMPLETED) continue;
            for (size_t i = k * kChunk; i < (k + 1) * kChunk; ++i) {
                ASSERT_EQ(localBytes()[i], patternByte(i, 7)) << "byte " << i;
            }
        }
        EXPECT_TRUE(engine_->freeBatch(batch).ok());
    }
    // At least the odd tasks of each round moved; none moved twice.
    EXPECT_GE(engine_->getFailoverCount(MPCOMM, TCP), 3 * kTasks / 2);
    EXPECT_LE(engine_->getFailoverCount(MPCOMM, TCP), 3 * kTasks);
}

}  // namespace
}  // namespace mooncake::tent
