// TCP carries device memory by staging it through host buffers at both
// ends, pipelined. Driven through FakeDevicePlatform, whose "device"
// memory is host memory and whose copies are counted, so the staging path
// is checked byte for byte on a machine without a GPU: every slice crosses
// exactly one copy at each device end, and with two staging buffers all
// but the first copy at a sending end (every copy at a receiving end) run
// on a copier thread while another slice is on the wire.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "kit/engine_config.h"
#include "kit/fake_device_platform.h"
#include "kit/request_builder.h"
#include "net/socket_io.h"
#include "tent/transfer_engine.h"
#include "tent/transport/tcp/tcp_transport.h"
#include "transport/tcp/tcp_test_support.h"

namespace mooncake::tent {
namespace {

using testing::FakeDevicePlatform;
using testing::ScopedPlatform;

constexpr int kBoundMs = 20000;
constexpr int kStageSlice = 64 << 10;
// 16 full staging slices and a short one: one frame (below
// min_slice_bytes), 17 staged slices.
constexpr size_t kLength = 16 * kStageSlice + 100;
constexpr int kSlices = 17;

std::shared_ptr<Config> tcpConf(int64_t pool_bytes) {
    auto conf = testing::onlyTransport(TCP);
    conf->set("transports/tcp/staging_slice_bytes", kStageSlice);
    conf->set("transports/tcp/staging_pool_bytes", pool_bytes);
    return conf;
}

void fill(void* p, size_t n, uint8_t seed) {
    auto* b = static_cast<uint8_t*>(p);
    for (size_t i = 0; i < n; ++i) b[i] = static_cast<uint8_t>(i * 31 + seed);
}

TransferStatus runOne(TransferEngine& engine, const Request& request) {
    BatchID batch = engine.allocateBatch(1);
    EXPECT_TRUE(engine.submitTransfer(batch, {request}).ok());
    TransferStatus st;
    net::Deadline deadline = net::deadlineIn(kBoundMs);
    do {
        EXPECT_TRUE(engine.getTransferStatus(batch, 0, st).ok());
        std::this_thread::yield();
    } while (st.s == PENDING && net::Clock::now() < deadline);
    EXPECT_TRUE(engine.freeBatch(batch).ok());
    return st;
}

// Two engines in this process under the fake platform, each with one
// registered buffer at the given locations.
class TcpStagingTest : public ::testing::Test {
 protected:
    void start(const Location& local_at, const Location& remote_at,
               int64_t pool_bytes = 2 * kStageSlice) {
        target_ = std::make_unique<TransferEngine>(tcpConf(pool_bytes));
        initiator_ = std::make_unique<TransferEngine>(tcpConf(pool_bytes));
        ASSERT_TRUE(target_->available() && initiator_->available());
        remote_ = allocRegister(*target_, remote_at);
        local_ = allocRegister(*initiator_, local_at);
        ASSERT_TRUE(
            initiator_->openSegment(seg_, target_->getSegmentName()).ok());
    }

    void* allocRegister(TransferEngine& engine, const Location& at) {
        MemoryOptions options;
        options.location = at;
        void* p = nullptr;
        EXPECT_TRUE(engine.allocateLocalMemory(&p, kLength, options).ok());
        EXPECT_TRUE(engine.registerLocalMemory(p, kLength, options).ok());
        return p;
    }

    void TearDown() override {
        if (initiator_) {
            initiator_->unregisterLocalMemory(local_);
            initiator_->freeLocalMemory(local_);
        }
        if (target_) {
            target_->unregisterLocalMemory(remote_);
            target_->freeLocalMemory(remote_);
        }
        initiator_.reset();
        target_.reset();
    }

    Request request(Request::OpCode op) {
        return testing::makeRequest(
            op, local_, seg_, reinterpret_cast<uint64_t>(remote_), kLength);
    }

    std::shared_ptr<FakeDevicePlatform> fake_ =
        std::make_shared<FakeDevicePlatform>();
    ScopedPlatform scoped_{fake_};
    std::unique_ptr<TransferEngine> target_;
    std::unique_ptr<TransferEngine> initiator_;
    void* local_ = nullptr;
    void* remote_ = nullptr;
    SegmentID seg_ = 0;
};

TEST_F(TcpStagingTest, WriteFromDeviceToDeviceIsStagedPipelinedAndExact) {
    start("cuda:0", "cuda:1");
    SegmentInfo info;
    ASSERT_TRUE(initiator_->getSegmentInfo(seg_, info).ok());
    ASSERT_EQ(info.buffers.size(), 1u);
    EXPECT_EQ(info.buffers[0].location, "cuda:1");
    fill(local_, kLength, 7);
    std::memset(remote_, 0, kLength);
    fake_->device_to_host = 0;
    fake_->host_to_device = 0;
    fake_->on_stager_threads = 0;
    EXPECT_EQ(runOne(*initiator_, request(Request::WRITE)).s, COMPLETED);
    EXPECT_EQ(std::memcmp(local_, remote_, kLength), 0);
    // Each slice: one copy out of the initiator's device, one into the
    // target's; none device to device, none of the payload host to host.
    EXPECT_EQ(fake_->device_to_host.load(), kSlices);
    EXPECT_EQ(fake_->host_to_device.load(), kSlices);
    EXPECT_EQ(fake_->device_to_device.load(), 0);
    // Pipelined: the sender copies slice 0 itself and slices 1..16 while
    // the previous one is sent; the receiver copies every slice out while
    // it reads the next.
    EXPECT_EQ(fake_->on_stager_threads.load(), (kSlices - 1) + kSlices);
}

TEST_F(TcpStagingTest, ReadFromDeviceIntoDeviceIsStagedPipelinedAndExact) {
    start("cuda:0", "cuda:0");
    fill(remote_, kLength, 99);
    std::memset(local_, 0, kLength);
    fake_->device_to_host = 0;
    fake_->host_to_device = 0;
    fake_->on_stager_threads = 0;
    EXPECT_EQ(runOne(*initiator_, request(Request::READ)).s, COMPLETED);
    EXPECT_EQ(std::memcmp(local_, remote_, kLength), 0);
    EXPECT_EQ(fake_->device_to_host.load(), kSlices);
    EXPECT_EQ(fake_->host_to_device.load(), kSlices);
    EXPECT_EQ(fake_->on_stager_threads.load(), (kSlices - 1) + kSlices);
}

TEST_F(TcpStagingTest, HostToDeviceAndBackStagesOnlyTheDeviceEnd) {
    start("cpu:0", "cuda:0");
    fill(local_, kLength, 3);
    fake_->device_to_host = 0;
    fake_->host_to_device = 0;
    EXPECT_EQ(runOne(*initiator_, request(Request::WRITE)).s, COMPLETED);
    EXPECT_EQ(std::memcmp(local_, remote_, kLength), 0);
    EXPECT_EQ(fake_->host_to_device.load(), kSlices);
    EXPECT_EQ(fake_->device_to_host.load(), 0);
    std::memset(local_, 0, kLength);
    EXPECT_EQ(runOne(*initiator_, request(Request::READ)).s, COMPLETED);
    EXPECT_EQ(std::memcmp(local_, remote_, kLength), 0);
    EXPECT_EQ(fake_->device_to_host.load(), kSlices);
}

TEST_F(TcpStagingTest, APoolOfOneSliceStagesWithoutOverlap) {
    start("cuda:0", "cuda:0", kStageSlice);
    fill(local_, kLength, 11);
    fake_->on_stager_threads = 0;
    fake_->device_to_host = 0;
    EXPECT_EQ(runOne(*initiator_, request(Request::WRITE)).s, COMPLETED);
    EXPECT_EQ(std::memcmp(local_, remote_, kLength), 0);
    EXPECT_EQ(fake_->device_to_host.load(), kSlices);
    EXPECT_EQ(fake_->on_stager_threads.load(), 0);
}

TEST_F(TcpStagingTest, HostMemoryIsNotStaged) {
    start("cpu:0", "cpu:0");
    fill(local_, kLength, 5);
    const int copies = fake_->host_to_device + fake_->device_to_host +
                       fake_->host_to_host + fake_->device_to_device;
    EXPECT_EQ(runOne(*initiator_, request(Request::WRITE)).s, COMPLETED);
    EXPECT_EQ(std::memcmp(local_, remote_, kLength), 0);
    EXPECT_EQ(fake_->host_to_device + fake_->device_to_host +
                  fake_->host_to_host + fake_->device_to_device,
              copies);
}

TEST_F(TcpStagingTest, AFailedStagingCopyFailsTheTask) {
    start("cuda:0", "cuda:0");
    fill(local_, kLength, 1);
    fake_->fail_copies = 1;
    EXPECT_EQ(runOne(*initiator_, request(Request::WRITE)).s, FAILED);
    // The connection and the pool recover: the next transfer completes.
    EXPECT_EQ(runOne(*initiator_, request(Request::WRITE)).s, COMPLETED);
    EXPECT_EQ(std::memcmp(local_, remote_, kLength), 0);
}

TEST(TcpStagingKeys, StagingKeysAreCheckedAndNamedWhenBad) {
    EXPECT_EQ(TcpTransport::Settings().staging_slice_bytes, 1 << 20);
    EXPECT_EQ(TcpTransport::Settings().staging_pool_bytes, 64 << 20);
    EXPECT_EQ(
        testing::installWithKey("transports/tcp/staging_slice_bytes", 4096),
        Status::InvalidArgument("transports/tcp/staging_slice_bytes must be "
                                "in [65536, 16777216], got 4096"));
    EXPECT_EQ(
        testing::installWithKey("transports/tcp/staging_pool_bytes", 1000),
        Status::InvalidArgument("transports/tcp/staging_pool_bytes must be "
                                "in [1048576, 68719476736], got 1000"));
}

}  // namespace
}  // namespace mooncake::tent
