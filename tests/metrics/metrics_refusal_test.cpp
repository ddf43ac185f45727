// A transport that refuses every submission: each refused request is one
// failed attempt under that transport and op on the engine's /metrics.
#include <gtest/gtest.h>
#include <httplib.h>

#include <memory>
#include <string>
#include <vector>

#include "kit/log_capture.h"
#include "kit/metrics_port.h"
#include "tent/runtime/transport.h"
#include "tent/transfer_engine.h"

namespace mooncake::tent {
namespace {

// Declares dram_to_dram so the selector routes to it, then refuses.
class RefusingTransport : public Transport {
 public:
    RefusingTransport() { caps.dram_to_dram = true; }
    Status addMemoryBuffer(BufferDesc&, const MemoryOptions&) override {
        return Status::OK();
    }
    using Transport::addMemoryBuffer;
    struct Sub : SubBatch {
        size_t size() const override { return 0; }
    };
    Status allocateSubBatch(SubBatchRef& batch, size_t) override {
        batch = &sub_;
        return Status::OK();
    }
    Status freeSubBatch(SubBatchRef&) override { return Status::OK(); }
    Status submitTransferTasks(SubBatchRef,
                               const std::vector<Request>&) override {
        return Status::TooManyRequests("refusing: test");
    }
    Status getTransferStatus(SubBatchRef, int, TransferStatus& s) override {
        s.s = FAILED;
        return Status::OK();
    }
    const char* getName() const override { return "tcp"; }

 private:
    Sub sub_;
};

TEST(MetricsRefusalTest, RefusedSubmissionsAreFailedAttempts) {
    setTransportFactoryOverride(
        TCP, [] { return std::make_unique<RefusingTransport>(); });
    auto conf = std::make_shared<Config>();
    conf->set("rpc_server_hostname", "127.0.0.1");
    conf->set("transports/mpcomm/enable", false);
    conf->set("metrics/enabled", true);
    conf->set("metrics/http_host", std::string("127.0.0.1"));
    conf->set("metrics/http_port", 0);
    conf->set("metrics/report_interval_seconds", 0);
    {
        testing::LogCapture log;
        TransferEngine engine(conf);
        ASSERT_TRUE(engine.available());
        std::vector<char> data(8192);
        MemoryOptions options;
        options.location = "cpu:0";
        ASSERT_TRUE(
            engine.registerLocalMemory(data.data(), data.size(), options).ok());
        // 3 WRITEs and 2 READs, each refused by the transport.
        std::vector<Request> list;
        for (int k = 0; k < 5; ++k) {
            Request r;
            r.opcode = k < 3 ? Request::WRITE : Request::READ;
            r.source = data.data() + k * 1024;
            r.target_id = LOCAL_SEGMENT_ID;
            r.target_offset =
                reinterpret_cast<uint64_t>(data.data()) + 5120 + 512 * k;
            r.length = 512;
            r.transport_hint = TCP;
            list.push_back(r);
        }
        const BatchID id = engine.allocateBatch(list.size());
        ASSERT_NE(id, 0u);
        ASSERT_TRUE(engine.submitTransfer(id, list).ok());
        for (size_t k = 0; k < list.size(); ++k) {
            TransferStatus status;
            ASSERT_TRUE(engine.getTransferStatus(id, k, status).ok());
            EXPECT_EQ(status.s, FAILED);
        }
        EXPECT_TRUE(engine.freeBatch(id).ok());

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
        EXPECT_TRUE(
            has("tent_transport_attempt_failures_total{transport="
                "\"tcp\",operation=\"write\"} 3"))
            << body;
        EXPECT_TRUE(
            has("tent_transport_attempt_failures_total{transport="
                "\"tcp\",operation=\"read\"} 2"))
            << body;
        EXPECT_TRUE(
            has("tent_transport_attempts_total{transport="
                "\"tcp\",operation=\"write\"} 3"));
        EXPECT_TRUE(
            has("tent_transport_attempts_total{transport="
                "\"tcp\",operation=\"read\"} 2"));
    }
    setTransportFactoryOverride(TCP, nullptr);
}

}  // namespace
}  // namespace mooncake::tent
