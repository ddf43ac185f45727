// The re-read after a descriptor miss (engine_miss_refresh_test.cpp) with
// the descriptor on a metadata store: a target (a child process) on a real
// redis-server or etcd registers its buffer only after the initiator opened
// its segment; the first READ re-reads the descriptor from the store once
// and moves the target's bytes. Over tcp.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "kit/free_tcp_port.h"
#include "kit/store_engine_support.h"
#include "kit/store_server.h"
#include "kit/target_process.h"
#include "kit/two_process_fixture.h"

namespace mooncake::tent::testing {
namespace {

class MissRefreshStoreTest : public ::testing::TestWithParam<std::string> {
 protected:
    void SetUp() override {
        TENT_SKIP_OR_FAIL_WITHOUT_STORE(GetParam());
        server_ = std::make_unique<StoreServer>(GetParam());
        Status s = server_->start();
        ASSERT_TRUE(s.ok()) << s.ToString();
    }

    void TearDown() override {
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

    std::unique_ptr<StoreServer> server_;
    TargetProcess target_;
    std::unique_ptr<TransferEngine> engine_;
    void* local_ = nullptr;
};

TEST_P(MissRefreshStoreTest, ABufferRegisteredAfterTheOpenIsReadFromTheStore) {
    const std::string name = "miss-target-" + std::to_string(getpid());
    TargetOptions options;
    options.xport = TCP;
    options.mpcomm_port = freeTcpPort();
    options.metadata_type = GetParam();
    options.metadata_servers = server_->address();
    options.segment_name = name;
    std::string why;
    ASSERT_EQ(target_.start(options, why), TargetProcess::Started::kReady)
        << why;
    ASSERT_EQ(target_.ask("unreg"), "ok");

    auto conf =
        storeEngineConfig(GetParam(), server_->address(),
                          "miss-initiator-" + std::to_string(getpid()), TCP, 0);
    conf->set("metadata/miss_refresh_interval_ms", 600000);
    // The miss path itself: with Redis's notifications on, the target's
    // registration may drop the copy before the transfer needs a re-read.
    conf->set("metadata/watch", false);
    engine_ = std::make_unique<TransferEngine>(conf);
    ASSERT_TRUE(engine_->available());
    ASSERT_TRUE(engine_->allocateLocalMemory(&local_, kBufferSize).ok());
    ASSERT_TRUE(engine_->registerLocalMemory(local_, kBufferSize).ok());
    SegmentID target = 0;
    ASSERT_TRUE(engine_->openSegment(target, name).ok());
    // Registered, and written to the store, before the answer.
    ASSERT_EQ(target_.ask("reg"), "ok");
    EXPECT_EQ(engine_->getDescriptorRereads(), 0u);

    std::memset(local_, 0, kBufferSize);
    auto states =
        runBatch(*engine_, {makeRequest(Request::READ, local_, target,
                                        target_.base(), kBufferSize)});
    ASSERT_EQ(states[0].s, COMPLETED);
    EXPECT_EQ(firstMismatch(local_, kBufferSize, 7), kBufferSize);
    EXPECT_EQ(engine_->getDescriptorRereads(), 1u);
    // A wrong address: the old text's failure, no second re-read within
    // the interval.
    states =
        runBatch(*engine_, {makeRequest(Request::READ, local_, target,
                                        target_.base() + kBufferSize, 4096)});
    EXPECT_EQ(states[0].s, FAILED);
    EXPECT_EQ(engine_->getDescriptorRereads(), 1u);
}

INSTANTIATE_TEST_SUITE_P(Stores, MissRefreshStoreTest,
                         ::testing::Values("redis", "etcd"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                             return info.param;
                         });

}  // namespace
}  // namespace mooncake::tent::testing
