// The engine's routing of DRAM-to-DRAM requests: where both segments hold
// only host memory the engine decides without finding either buffer, and a
// refusal is still reported with both buffers' own locations.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

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

}  // namespace
}  // namespace mooncake::tent
