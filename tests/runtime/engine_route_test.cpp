// The engine's routing of DRAM-to-DRAM requests: where both segments hold
// only host memory the engine decides without finding either buffer, and a
// refusal is still reported with both buffers' own locations.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "kit/batch_wait.h"
#include "kit/log_capture.h"
#include "tent/runtime/transport.h"
#include "tent/transfer_engine.h"

namespace mooncake::tent {
namespace {

// Registers any buffer and accepts any request, but declares no memory
// pair at all: the selector must refuse every request before it gets here.
class CarriesNothingTransport : public Transport {
 public:
    CarriesNothingTransport() { caps = Capabilities(); }
    Status addMemoryBuffer(BufferDesc&, const MemoryOptions&) override {
        return Status::OK();
    }
    using Transport::addMemoryBuffer;
    Status allocateSubBatch(SubBatchRef&, size_t) override {
        return Status::OK();
    }
    Status freeSubBatch(SubBatchRef&) override { return Status::OK(); }
    Status submitTransferTasks(SubBatchRef,
                               const std::vector<Request>&) override {
        ++submitted;
        return Status::OK();
    }
    Status getTransferStatus(SubBatchRef, int, TransferStatus& s) override {
        s.s = COMPLETED;
        return Status::OK();
    }
    const char* getName() const override { return "tcp"; }
    static inline int submitted = 0;
};

TEST(EngineRouteTest, HostOnlyRefusalNamesBothBufferLocations) {
    setTransportFactoryOverride(
        TCP, [] { return std::make_unique<CarriesNothingTransport>(); });
    auto conf = std::make_shared<Config>();
    conf->set("rpc_server_hostname", "127.0.0.1");
    conf->set("transports/mpcomm/enable", false);
    {
        TransferEngine engine(conf);
        ASSERT_TRUE(engine.available());
        std::vector<char> data(4096);
        MemoryOptions options;
        options.location = "cpu:0";
        ASSERT_TRUE(
            engine.registerLocalMemory(data.data(), data.size(), options).ok());
        Request r;
        r.opcode = Request::WRITE;
        r.source = data.data();
        r.target_id = LOCAL_SEGMENT_ID;
        r.target_offset = reinterpret_cast<uint64_t>(data.data()) + 1024;
        r.length = 1024;
        r.transport_hint = TCP;
        testing::LogCapture logs;
        const BatchID id = engine.allocateBatch(1);
        ASSERT_NE(id, 0u);
        ASSERT_TRUE(engine.submitTransfer(id, {r}).ok());
        TransferStatus status;
        ASSERT_TRUE(engine.getTransferStatus(id, 0, status).ok());
        EXPECT_EQ(status.s, FAILED);
        EXPECT_EQ(CarriesNothingTransport::submitted, 0);
        const std::string expected =
            "Batch " + std::to_string(id) +
            " task 0 failed: transport_hint tcp cannot carry local cpu:0 "
            "-> remote cpu:0 (segment " +
            engine.getSegmentName() + "): tcp: no dram_to_dram";
        EXPECT_EQ(logs.count(expected), 1);
        EXPECT_TRUE(engine.freeBatch(id).ok());
    }
    setTransportFactoryOverride(TCP, nullptr);
}

// A hinted DRAM-to-DRAM decision is memoised per target, per hint: a
// hint that cannot be honoured still fails after the same target's other
// hint was memoised, in one batch and across batches.
TEST(EngineRouteTest, AMemoisedRouteAnswersOnlyItsOwnHint) {
    auto conf = std::make_shared<Config>();
    conf->set("rpc_server_hostname", "127.0.0.1");
    conf->set("transports/mpcomm/enable", false);
    TransferEngine peer(conf);
    TransferEngine engine(conf);
    ASSERT_TRUE(peer.available());
    ASSERT_TRUE(engine.available());
    std::vector<char> target(4096, 0);
    ASSERT_TRUE(peer.registerLocalMemory(target.data(), target.size()).ok());
    std::vector<char> data(4096, 'x');
    ASSERT_TRUE(engine.registerLocalMemory(data.data(), data.size()).ok());
    SegmentID id = 0;
    ASSERT_TRUE(engine.openSegment(id, peer.getSegmentName()).ok());
    auto write = [&](size_t at, TransportType hint) {
        Request r;
        r.opcode = Request::WRITE;
        r.source = data.data() + at;
        r.target_id = id;
        r.target_offset = reinterpret_cast<uint64_t>(target.data()) + at;
        r.length = 1024;
        r.transport_hint = hint;
        return r;
    };
    auto run = [&](const std::vector<Request>& requests) {
        const BatchID batch = engine.allocateBatch(requests.size());
        EXPECT_NE(batch, 0u);
        EXPECT_TRUE(engine.submitTransfer(batch, requests).ok());
        std::vector<TransferStatus> states(requests.size());
        EXPECT_TRUE(testing::waitTasksFinal(engine, batch, states));
        EXPECT_TRUE(engine.freeBatch(batch).ok());
        std::vector<TransferStatusEnum> out;
        for (const TransferStatus& s : states) out.push_back(s.s);
        return out;
    };
    // RDMA is not loaded here: its hint fails whatever TCP's memo says.
    EXPECT_EQ(run({write(0, TCP), write(1024, RDMA), write(2048, TCP)}),
              (std::vector<TransferStatusEnum>{COMPLETED, FAILED, COMPLETED}));
    EXPECT_EQ(run({write(3072, TCP)}),
              std::vector<TransferStatusEnum>{COMPLETED});
    EXPECT_EQ(run({write(1024, RDMA)}),
              std::vector<TransferStatusEnum>{FAILED});
    // A target routed from the memo (TCP, first), then its other hint: the
    // descriptor the memo's decision did not need is found for it.
    EXPECT_EQ(run({write(3072, TCP), write(1024, RDMA), write(3072, TCP)}),
              (std::vector<TransferStatusEnum>{COMPLETED, FAILED, COMPLETED}));
    EXPECT_EQ(std::string(target.data(), 1024), std::string(1024, 'x'));
    EXPECT_EQ(std::string(target.data() + 1024, 1024), std::string(1024, 0))
        << "the RDMA-hinted range stays untouched";
    EXPECT_EQ(std::string(target.data() + 2048, 2048), std::string(2048, 'x'));
    EXPECT_TRUE(engine.unregisterLocalMemory(data.data()).ok());
    EXPECT_TRUE(peer.unregisterLocalMemory(target.data()).ok());
}

}  // namespace
}  // namespace mooncake::tent
