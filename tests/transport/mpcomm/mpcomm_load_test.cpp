// Load through MpcommTransport over an adapter that completes every
// transfer at post time: 8 threads x 100k requests, no completion lost, no
// handle released twice or never.
//
// The same count runs under ASan and TSan: the test spends its time in the
// transport, not in a shared lock, and the TSan build runs it in about ten
// seconds on two loaded cores.
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "kit/instant_mpcomm_adapter.h"
#include "mpcomm_transport_fixture.h"

namespace mooncake::tent {
namespace {

using testing::AuditedInstantMpcommAdapter;
using testing::MpcommTransportFixture;

constexpr int kThreads = 8;
constexpr int kPerThread = 100000;
constexpr int kBatch = 100;
constexpr int64_t kTotal = int64_t{kThreads} * kPerThread;
static_assert(kPerThread % kBatch == 0, "whole batches only");

class MpcommLoad : public MpcommTransportFixture {
 protected:
    void SetUp() override {
        MpcommTransportFixture::SetUp();
        publishDefaultPeer();
        instant_ = std::make_shared<AuditedInstantMpcommAdapter>(kTotal);
        transport_ = std::make_unique<MpcommTransport>(instant_);
        transport_->setModulesPath(no_peermem_.path());
    }

    std::shared_ptr<AuditedInstantMpcommAdapter> instant_;
};

// Each thread submits batches of 100 mixed WRITE/READ requests and polls
// every task twice: the first poll must see COMPLETED with the request's
// length, the second the same without asking the adapter again. The
// adapter counts per handle: each one posted is read once and released
// once, and nothing else touches it.
TEST_F(MpcommLoad, EightThreadsOfAHundredThousandRequestsLoseNothing) {
    ASSERT_TRUE(install().ok());
    SegmentID peer = openPeer();
    std::atomic<int64_t> completed{0};
    std::atomic<int64_t> wrong{0};
    std::atomic<int> ready{0};
    auto worker = [&](int id) {
        std::vector<Request> requests;
        for (int i = 0; i < kBatch; ++i) {
            requests.push_back(request(
                (id + i) % 2 ? Request::READ : Request::WRITE, peer, 8 + i));
        }
        // Every thread's first submission races for the first handshake.
        ++ready;
        while (ready.load() < kThreads) std::this_thread::yield();
        for (int sent = 0; sent < kPerThread; sent += kBatch) {
            Transport::SubBatchRef batch = nullptr;
            if (!transport_->allocateSubBatch(batch, kBatch).ok() ||
                !transport_->submitTransferTasks(batch, requests).ok()) {
                ++wrong;
                return;
            }
            for (int pass = 0; pass < 2; ++pass) {
                for (int i = 0; i < kBatch; ++i) {
                    TransferStatus status;
                    bool ok =
                        transport_->getTransferStatus(batch, i, status).ok();
                    if (!ok || status.s != COMPLETED ||
                        status.transferred_bytes != requests[i].length) {
                        ++wrong;
                    } else if (pass == 0) {
                        ++completed;
                    }
                }
            }
            if (!transport_->freeSubBatch(batch).ok()) ++wrong;
        }
    };
    std::vector<std::thread> threads;
    for (int id = 0; id < kThreads; ++id) threads.emplace_back(worker, id);
    for (auto& thread : threads) thread.join();

    EXPECT_EQ(wrong, 0);
    EXPECT_EQ(completed, kTotal);
    EXPECT_EQ(instant_->posts, kTotal);
    EXPECT_EQ(instant_->handlesIssued(), kTotal);
    EXPECT_EQ(instant_->result_calls, kTotal);
    EXPECT_EQ(instant_->is_complete_calls, kTotal);
    EXPECT_EQ(instant_->release_calls, kTotal);
    EXPECT_EQ(instant_->handlesNotReleasedOnce(), 0);
    EXPECT_EQ(instant_->misuse, 0);
    // Eight first submissions at once still made one handshake.
    EXPECT_EQ(instant_->connect_calls, 1);
    EXPECT_EQ(instant_->query_calls, 1);
}

}  // namespace
}  // namespace mooncake::tent
