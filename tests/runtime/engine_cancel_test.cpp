// TransferEngine::cancelTransfer(), best effort and never waiting: over
// MPComm (a mock adapter whose transfers complete when the test says),
// which cannot stop a posted transfer, the call returns at once, the task
// reads PENDING until the provider completes it and CANCELED after, and
// the handle is released exactly once; and over TCP, which drops a task
// still queued at once and never touches its buffer, even when the caller
// frees it right after the task reads final (the ASan build checks that).
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "kit/engine_config.h"
#include "kit/mock_mpcomm_adapter.h"
#include "kit/request_builder.h"
#include "kit/wait_until.h"
#include "tent/transfer_engine.h"
#include "tent/transport/mpcomm/mpcomm_transport.h"

namespace mooncake::tent {
namespace {

using testing::MockMpcommAdapter;
using testing::onlyTransport;
using testing::waitUntil;

bool isFinal(TransferStatusEnum s) { return s != PENDING && s != INITIAL; }

// Two engines whose MPComm transports run over mock adapters; the
// initiator's adapter completes nothing on its own.
class MpcommCancelTest : public ::testing::Test {
 protected:
    void SetUp() override { ASSERT_NO_FATAL_FAILURE(start(10000)); }

    void start(int free_timeout_ms) {
        unsetenv("MC_TENT_CONF");
        setTransportFactoryOverride(MPCOMM, [this] {
            auto adapter = std::make_shared<MockMpcommAdapter>();
            adapters_.push_back(adapter);
            return std::make_unique<MpcommTransport>(adapter);
        });
        target_ = std::make_unique<TransferEngine>(onlyTransport(MPCOMM));
        auto conf = onlyTransport(MPCOMM);
        conf->set("batch/free_timeout_ms", free_timeout_ms);
        initiator_ = std::make_unique<TransferEngine>(conf);
        setTransportFactoryOverride(MPCOMM, nullptr);
        ASSERT_EQ(adapters_.size(), 2u);
        adapter_ = adapters_[1].get();
        adapter_->auto_complete = false;
        ASSERT_TRUE(target_->available() && initiator_->available());
        ASSERT_TRUE(
            target_->registerLocalMemory(remote_, sizeof(remote_)).ok());
        ASSERT_TRUE(
            initiator_->registerLocalMemory(local_, sizeof(local_)).ok());
        ASSERT_TRUE(
            initiator_->openSegment(target_id_, target_->getSegmentName())
                .ok());
    }

    void TearDown() override {
        if (initiator_) {
            initiator_->unregisterLocalMemory(local_, sizeof(local_));
        }
        initiator_.reset();
        target_.reset();
    }

    // One WRITE submitted into a fresh batch; its handle in `handle`.
    BatchID submitOne(uint64_t& handle) {
        BatchID batch = initiator_->allocateBatch(1);
        EXPECT_NE(batch, 0u);
        EXPECT_TRUE(
            initiator_
                ->submitTransfer(batch, {testing::makeRequest(
                                            Request::WRITE, local_, target_id_,
                                            reinterpret_cast<uint64_t>(remote_),
                                            sizeof(local_), MPCOMM)})
                .ok());
        auto transfers = adapter_->transfers();
        EXPECT_EQ(transfers.size(), 1u);
        handle = transfers.empty() ? 0 : transfers.back().handle;
        return batch;
    }

    TransferStatusEnum statusOf(BatchID batch) {
        TransferStatus status;
        EXPECT_TRUE(initiator_->getTransferStatus(batch, 0, status).ok());
        return status.s;
    }

    char local_[4096] = {};
    char remote_[4096] = {};
    std::vector<std::shared_ptr<MockMpcommAdapter>> adapters_;
    MockMpcommAdapter* adapter_ = nullptr;
    std::unique_ptr<TransferEngine> target_;
    std::unique_ptr<TransferEngine> initiator_;
    SegmentID target_id_ = 0;
};

TEST_F(MpcommCancelTest, AnInFlightCancelReturnsAtOnceAndEndsCanceledLater) {
    uint64_t handle = 0;
    BatchID batch = submitOne(handle);
    ASSERT_NE(handle, 0u);
    // The provider completes nothing until told: a call that waited for the
    // transfer would not return before the bound below.
    const auto began = std::chrono::steady_clock::now();
    ASSERT_TRUE(initiator_->cancelTransfer(batch, 0).ok());
    EXPECT_LT(std::chrono::steady_clock::now() - began,
              std::chrono::milliseconds(250));
    // Still the transport's: it reads PENDING and its handle is held.
    EXPECT_EQ(statusOf(batch), PENDING);
    EXPECT_EQ(adapter_->releasesOf(handle), 0);
    // Asked again while in flight: the same answer, nothing changes.
    ASSERT_TRUE(initiator_->cancelTransfer(batch, 0).ok());
    EXPECT_EQ(statusOf(batch), PENDING);
    adapter_->complete(handle, true, sizeof(local_));
    ASSERT_TRUE(waitUntil([&] { return isFinal(statusOf(batch)); }));
    EXPECT_EQ(statusOf(batch), CANCELED);
    EXPECT_EQ(statusOf(batch), CANCELED);  // and it stays so
    EXPECT_EQ(adapter_->releasesOf(handle), 1);
    ASSERT_TRUE(initiator_->freeBatch(batch).ok());
    EXPECT_EQ(adapter_->releasesOf(handle), 1);
    EXPECT_EQ(adapter_->handlesNotReleasedOnce(), 0);
    EXPECT_EQ(adapter_->misuse.load(), 0);
}

TEST_F(MpcommCancelTest, ACompletedTaskStaysCompleted) {
    uint64_t handle = 0;
    BatchID batch = submitOne(handle);
    adapter_->complete(handle, true, sizeof(local_));
    ASSERT_TRUE(waitUntil([&] { return isFinal(statusOf(batch)); }));
    ASSERT_EQ(statusOf(batch), COMPLETED);
    EXPECT_TRUE(initiator_->cancelTransfer(batch, 0).ok());
    EXPECT_EQ(statusOf(batch), COMPLETED);
    ASSERT_TRUE(initiator_->freeBatch(batch).ok());
    EXPECT_EQ(adapter_->releasesOf(handle), 1);
    EXPECT_EQ(adapter_->misuse.load(), 0);
}

TEST_F(MpcommCancelTest, FreeingABatchWhoseCancelledTaskIsInFlightIsRefused) {
    ASSERT_NO_FATAL_FAILURE(TearDown());
    adapters_.clear();
    ASSERT_NO_FATAL_FAILURE(start(0));
    uint64_t handle = 0;
    BatchID batch = submitOne(handle);
    ASSERT_TRUE(initiator_->cancelTransfer(batch, 0).ok());
    Status s = initiator_->freeBatch(batch);
    ASSERT_TRUE(s.IsInvalidArgument()) << s;
    EXPECT_EQ(s.message(),
              "freeBatch: batch " + std::to_string(batch) +
                  " still has 1 task(s) in flight after "
                  "batch/free_timeout_ms=0 ms; it stays allocated, free it "
                  "again once they finish");
    EXPECT_EQ(statusOf(batch), PENDING);
    EXPECT_EQ(adapter_->releasesOf(handle), 0);
    adapter_->complete(handle, true, sizeof(local_));
    ASSERT_TRUE(waitUntil([&] { return isFinal(statusOf(batch)); }));
    EXPECT_EQ(statusOf(batch), CANCELED);
    ASSERT_TRUE(initiator_->freeBatch(batch).ok());
    EXPECT_EQ(adapter_->releasesOf(handle), 1);
    EXPECT_EQ(adapter_->handlesNotReleasedOnce(), 0);
}

TEST_F(MpcommCancelTest, BadIdsAreNamed) {
    uint64_t handle = 0;
    BatchID batch = submitOne(handle);
    Status s = initiator_->cancelTransfer(batch, 1);
    EXPECT_EQ(s.message(), "cancelTransfer: task id 1 out of range (batch " +
                               std::to_string(batch) + " has 1 tasks)");
    s = initiator_->cancelTransfer(batch + 1, 0);
    EXPECT_EQ(s.message(),
              "cancelTransfer: unknown batch id " + std::to_string(batch + 1));
    adapter_->complete(handle, true, sizeof(local_));
    ASSERT_TRUE(initiator_->freeBatch(batch).ok());
}

// TCP with one worker: a large READ holds it while later tasks queue.
class TcpCancelTest : public ::testing::Test {
 protected:
    static constexpr size_t kBig = 64u << 20;
    static constexpr size_t kSmall = 1u << 20;

    void SetUp() override {
        unsetenv("MC_TENT_CONF");
        auto conf = onlyTransport(TCP);
        conf->set("transports/tcp/workers", 1);
        target_ = std::make_unique<TransferEngine>(onlyTransport(TCP));
        initiator_ = std::make_unique<TransferEngine>(conf);
        ASSERT_TRUE(target_->available() && initiator_->available());
        ASSERT_TRUE(target_->allocateLocalMemory(&remote_, kBig).ok());
        std::memset(remote_, 0x77, kBig);
        ASSERT_TRUE(target_->registerLocalMemory(remote_, kBig).ok());
        ASSERT_TRUE(
            initiator_->openSegment(target_id_, target_->getSegmentName())
                .ok());
    }

    Request readInto(void* buf, size_t length) {
        return testing::makeRequest(Request::READ, buf, target_id_,
                                    reinterpret_cast<uint64_t>(remote_), length,
                                    TCP);
    }

    std::unique_ptr<TransferEngine> target_;
    std::unique_ptr<TransferEngine> initiator_;
    void* remote_ = nullptr;
    SegmentID target_id_ = 0;
};

TEST_F(TcpCancelTest,
       AQueuedTaskIsCanceledAtOnceAndItsFreedBufferNeverTouched) {
    std::vector<char> big(kBig);
    auto* queued = new char[kSmall];
    std::memset(queued, 0, kSmall);
    ASSERT_TRUE(initiator_->registerLocalMemory(big.data(), kBig).ok());
    ASSERT_TRUE(initiator_->registerLocalMemory(queued, kSmall).ok());
    BatchID batch = initiator_->allocateBatch(2);
    ASSERT_TRUE(initiator_
                    ->submitTransfer(batch, {readInto(big.data(), kBig),
                                             readInto(queued, kSmall)})
                    .ok());
    ASSERT_TRUE(initiator_->cancelTransfer(batch, 1).ok());
    TransferStatus status;
    ASSERT_TRUE(initiator_->getTransferStatus(batch, 1, status).ok());
    EXPECT_EQ(status.s, CANCELED);
    // Nothing was read into it, and nothing will be: the buffer goes now,
    // while the worker still has the first task's bytes to move.
    for (size_t i = 0; i < kSmall; ++i) ASSERT_EQ(queued[i], 0) << i;
    ASSERT_TRUE(initiator_->unregisterLocalMemory(queued, kSmall).ok());
    delete[] queued;
    TransferStatus overall;
    ASSERT_TRUE(waitUntil([&] {
        EXPECT_TRUE(initiator_->getTransferStatus(batch, 0, status).ok());
        return isFinal(status.s);
    }));
    EXPECT_EQ(status.s, COMPLETED);
    ASSERT_TRUE(initiator_->progressBatch(batch, overall).ok());
    EXPECT_EQ(overall.s, FAILED);  // one task did not complete
    ASSERT_TRUE(initiator_->freeBatch(batch).ok());
    EXPECT_EQ(big[kBig - 1], 0x77);
    ASSERT_TRUE(initiator_->unregisterLocalMemory(big.data(), kBig).ok());
}

TEST_F(TcpCancelTest, AnInFlightTaskEndsCanceledAndItsFreedBufferNeverTouched) {
    auto* buf = new char[kBig];
    ASSERT_TRUE(initiator_->registerLocalMemory(buf, kBig).ok());
    BatchID batch = initiator_->allocateBatch(1);
    ASSERT_TRUE(initiator_->submitTransfer(batch, {readInto(buf, kBig)}).ok());
    // Whatever the worker has claimed by now gets no further slice; the
    // call does not wait for the slices on the wire, the task's final
    // status does, and after it the buffer can go.
    ASSERT_TRUE(initiator_->cancelTransfer(batch, 0).ok());
    TransferStatus status;
    ASSERT_TRUE(waitUntil([&] {
        EXPECT_TRUE(initiator_->getTransferStatus(batch, 0, status).ok());
        return isFinal(status.s);
    }));
    EXPECT_EQ(status.s, CANCELED);
    ASSERT_TRUE(initiator_->unregisterLocalMemory(buf, kBig).ok());
    delete[] buf;
    // A later transfer on the same single worker: anything left of the
    // cancelled task would have run before it.
    std::vector<char> probe(kSmall);
    ASSERT_TRUE(initiator_->registerLocalMemory(probe.data(), kSmall).ok());
    BatchID next = initiator_->allocateBatch(1);
    ASSERT_TRUE(
        initiator_->submitTransfer(next, {readInto(probe.data(), kSmall)})
            .ok());
    ASSERT_TRUE(waitUntil([&] {
        EXPECT_TRUE(initiator_->getTransferStatus(next, 0, status).ok());
        return isFinal(status.s);
    }));
    EXPECT_EQ(status.s, COMPLETED);
    EXPECT_EQ(probe[kSmall - 1], 0x77);
    ASSERT_TRUE(initiator_->freeBatch(next).ok());
    ASSERT_TRUE(initiator_->freeBatch(batch).ok());
    ASSERT_TRUE(initiator_->unregisterLocalMemory(probe.data(), kSmall).ok());
}

}  // namespace
}  // namespace mooncake::tent
