// Routing between two processes on this host with shm and tcp both
// loaded: a target whose buffer shm registered is reached over shm (its
// object is mapped here), one without shm over tcp; bytes exact either way.
#include <gtest/gtest.h>

#include "kit/target_process.h"
#include "kit/two_process_fixture.h"
#include "tent/transport/shm/shm_transport.h"

namespace mooncake::tent::testing {
namespace {

class ShmRoutePairTest : public ::testing::Test {
 protected:
    void TearDown() override {
        setTransportFactoryOverride(SHM, nullptr);
        if (engine_ && local_) {
            engine_->unregisterLocalMemory(local_, kBufferSize);
            engine_->freeLocalMemory(local_);
        }
        engine_.reset();
        std::string why;
        if (target_.running()) {
            EXPECT_TRUE(target_.finish(why)) << why;
        }
    }

    // A target serving over `xport` and tcp, and an initiator with shm and
    // tcp whose ShmTransport is `shm_`.
    void start(TransportType xport) {
        std::string why;
        TargetOptions options;
        options.xport = xport;
        options.with_tcp = true;
        ASSERT_EQ(target_.start(options, why), TargetProcess::Started::kReady)
            << why;
        setTransportFactoryOverride(SHM, [this] {
            auto t = std::make_unique<ShmTransport>();
            shm_ = t.get();
            return t;
        });
        auto conf = onlyTransport(SHM);
        conf->set("transports/tcp/enable", true);
        engine_ = std::make_unique<TransferEngine>(conf);
        ASSERT_TRUE(engine_->available());
        ASSERT_NE(shm_, nullptr);
        ASSERT_TRUE(engine_->allocateLocalMemory(&local_, kBufferSize).ok());
        ASSERT_TRUE(engine_->registerLocalMemory(local_, kBufferSize).ok());
        ASSERT_TRUE(engine_->openSegment(handle_, target_.name()).ok());
    }

    // Writes a pattern without a transport hint, reads it back, checks it.
    void roundTrip(uint8_t seed) {
        auto* bytes = static_cast<uint8_t*>(local_);
        for (size_t i = 0; i < kBufferSize; ++i) {
            bytes[i] = patternByte(i, seed);
        }
        auto states =
            runBatch(*engine_, {makeRequest(Request::WRITE, local_, handle_,
                                            target_.base(), kBufferSize)});
        ASSERT_EQ(states[0].s, COMPLETED);
        // The target's own bytes: a read back over the same mapping would
        // also pass a copy that never reached the target's memory.
        EXPECT_EQ(target_.ask("check 0 " + std::to_string(kBufferSize) + " " +
                              std::to_string(seed)),
                  "ok");
        std::memset(local_, 0, kBufferSize);
        states = runBatch(*engine_, {makeRequest(Request::READ, local_, handle_,
                                                 target_.base(), kBufferSize)});
        ASSERT_EQ(states[0].s, COMPLETED);
        EXPECT_EQ(states[0].transferred_bytes, kBufferSize);
        for (size_t i = 0; i < kBufferSize; ++i) {
            ASSERT_EQ(bytes[i], patternByte(i, seed)) << "byte " << i;
        }
    }

    TargetProcess target_;
    std::unique_ptr<TransferEngine> engine_;
    ShmTransport* shm_ = nullptr;
    void* local_ = nullptr;
    SegmentID handle_ = 0;
};

TEST_F(ShmRoutePairTest, ASameHostShmTargetIsReachedOverShm) {
    start(SHM);
    roundTrip(23);
    EXPECT_EQ(shm_->mappedObjects(handle_), 1u);
}

TEST_F(ShmRoutePairTest, ATargetWithoutShmIsReachedOverTcp) {
    start(TCP);
    roundTrip(29);
    EXPECT_EQ(shm_->mappedObjects(handle_), 0u);
}

}  // namespace
}  // namespace mooncake::tent::testing
