// TcpTransport's admission limits (transports/tcp/max_inflight_tasks and
// max_inflight_bytes): process-wide counts of submitted, unsettled tasks
// and their bytes. A hand-written peer holds every reply until the test
// opens its gate, so the tasks it serves stay in flight exactly as long as
// the test says.
#include "transport/tcp/tcp_admission.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "fake_tcp_peer.h"
#include "kit/wait_until.h"
#include "net/socket_io.h"
#include "tcp_test_support.h"
#include "tent/transport/tcp/tcp_transport.h"

namespace mooncake::tent {
namespace {

constexpr int kBoundMs = 30000;
constexpr size_t kReadBytes = 8;

// Answers every READ (with bytes 'r') once the gate is open; until then
// it reads the request and holds the reply back.
class GatedPeer : public testing::FakeTcpPeer {
 public:
    GatedPeer() { start(); }
    ~GatedPeer() override { stop(); }
    void open() {
        {
            std::lock_guard<std::mutex> lock(mu_);
            open_ = true;
        }
        cv_.notify_all();
    }
    size_t requests() {
        std::lock_guard<std::mutex> lock(mu_);
        return requests_;
    }

 private:
    void serve(int fd, int) override {
        for (;;) {
            unsigned char head[24];
            if (!net::recvAll(fd, head, sizeof(head), net::deadlineIn(kBoundMs))
                     .ok()) {
                return;
            }
            uint64_t len = 0;
            for (int i = 16; i < 24; ++i) len = (len << 8) | head[i];
            std::unique_lock<std::mutex> lock(mu_);
            ++requests_;
            cv_.wait(lock, [&] { return open_ || stopping_; });
            if (stopping_) return;
            lock.unlock();
            std::string reply =
                testing::tcpReply(0, len) + std::string(len, 'r');
            if (!net::sendAll(fd, reply.data(), reply.size(),
                              net::deadlineIn(kBoundMs))
                     .ok()) {
                return;
            }
        }
    }

    bool open_ = false;
    size_t requests_ = 0;
};

class TcpAdmissionTest : public ::testing::Test {
 protected:
    void SetUp() override {
        manager_ = std::make_shared<SegmentManager>(
            "127.0.0.1:1",
            testing::DescriptorFetcher::fixedEndpoint(TCP, peer_.endpoint()));
        ASSERT_TRUE(manager_->openRemote(target_, "peer:1").ok());
        ASSERT_EQ(TcpAdmission::inflightTasks(), 0u);
        ASSERT_EQ(TcpAdmission::inflightBytes(), 0u);
    }
    void TearDown() override {
        peer_.open();
        for (auto& t : transports_) t->uninstall();
        // Whatever a test left in flight was settled by then.
        EXPECT_EQ(TcpAdmission::inflightTasks(), 0u);
        EXPECT_EQ(TcpAdmission::inflightBytes(), 0u);
    }

    TcpTransport& install(int64_t max_tasks, int64_t max_bytes,
                          int workers = 4) {
        auto conf = std::make_shared<Config>();
        conf->set("transports/tcp/workers", workers);
        conf->set("transports/tcp/lanes_per_peer", workers);
        conf->set("transports/tcp/timeout_ms", kBoundMs);
        conf->set("transports/tcp/max_inflight_tasks", max_tasks);
        conf->set("transports/tcp/max_inflight_bytes", max_bytes);
        transports_.push_back(std::make_unique<TcpTransport>());
        EXPECT_TRUE(
            testing::installTcp(*transports_.back(), manager_, conf).ok());
        return *transports_.back();
    }

    std::vector<Request> reads(size_t n, size_t bytes = kReadBytes) {
        buffers_.emplace_back(n * bytes, 0);
        std::vector<Request> out;
        for (size_t i = 0; i < n; ++i) {
            out.push_back(testing::requestTo(target_, Request::READ,
                                             &buffers_.back()[i * bytes],
                                             i * bytes, bytes));
        }
        return out;
    }

    void expectAll(TcpTransport& t, Transport::SubBatchRef batch, int from,
                   int to, TransferStatusEnum want) {
        for (int i = from; i < to; ++i) {
            EXPECT_EQ(testing::waitWhilePending(t, batch, i, kBoundMs).s, want)
                << "task " << i;
        }
    }

    GatedPeer peer_;
    std::shared_ptr<SegmentManager> manager_;
    SegmentID target_ = 0;
    std::vector<std::unique_ptr<TcpTransport>> transports_;
    std::vector<std::vector<char>> buffers_;
};

TEST(TcpAdmissionKeys, LimitsAreCheckedAndNamedWhenBad) {
    EXPECT_EQ(TcpTransport::Settings().max_inflight_tasks, 65536);
    EXPECT_EQ(TcpTransport::Settings().max_inflight_bytes, 4ll << 30);
    testing::expectKeyRefused("transports/tcp/max_inflight_tasks", {0, -1},
                              "must be in [1, 1073741824]");
    testing::expectKeyRefused("transports/tcp/max_inflight_bytes", {0, -1},
                              "must be in [1, 1125899906842624]");
}

TEST_F(TcpAdmissionTest, TheFifthTaskIsRefusedUntilOneSettles) {
    TcpTransport& t = install(4, 1 << 20);
    Transport::SubBatchRef batch = nullptr;
    ASSERT_TRUE(t.allocateSubBatch(batch, 16).ok());
    // A list that does not fit is refused whole: no task of it exists.
    EXPECT_EQ(t.submitTransferTasks(batch, reads(5)),
              Status::TooManyRequests(
                  "transports/tcp/max_inflight_tasks=4 reached: 0 tasks in "
                  "flight in this process, 5 more submitted"));
    EXPECT_EQ(batch->size(), 0u);
    for (int i = 0; i < 4; ++i) {
        ASSERT_TRUE(t.submitTransferTasks(batch, reads(1)).ok()) << i;
    }
    EXPECT_EQ(TcpAdmission::inflightTasks(), 4u);
    EXPECT_EQ(TcpAdmission::inflightBytes(), 4 * kReadBytes);
    EXPECT_EQ(t.submitTransferTasks(batch, reads(1)),
              Status::TooManyRequests(
                  "transports/tcp/max_inflight_tasks=4 reached: 4 tasks in "
                  "flight in this process, 1 more submitted"));
    EXPECT_EQ(batch->size(), 4u);
    // Every one of the four reached the peer: they are really in flight.
    EXPECT_TRUE(testing::waitUntil([&] { return peer_.requests() == 4; }));

    peer_.open();
    expectAll(t, batch, 0, 4, COMPLETED);
    // Seen COMPLETED means released: the next submit is admitted at once.
    EXPECT_EQ(TcpAdmission::inflightTasks(), 0u);
    EXPECT_EQ(TcpAdmission::inflightBytes(), 0u);
    ASSERT_TRUE(t.submitTransferTasks(batch, reads(4)).ok());
    expectAll(t, batch, 4, 8, COMPLETED);
    EXPECT_EQ(TcpAdmission::inflightTasks(), 0u);
    ASSERT_TRUE(t.freeSubBatch(batch).ok());
}

TEST_F(TcpAdmissionTest, BytesInFlightAreBoundedToo) {
    TcpTransport& t = install(64, 100);
    Transport::SubBatchRef batch = nullptr;
    ASSERT_TRUE(t.allocateSubBatch(batch, 4).ok());
    ASSERT_TRUE(t.submitTransferTasks(batch, reads(1, 64)).ok());
    EXPECT_EQ(t.submitTransferTasks(batch, reads(1, 64)),
              Status::TooManyRequests(
                  "transports/tcp/max_inflight_bytes=100 reached: 64 bytes "
                  "in flight in this process, 64 more submitted"));
    // The refused list took no task either.
    EXPECT_EQ(TcpAdmission::inflightTasks(), 1u);
    ASSERT_TRUE(t.submitTransferTasks(batch, reads(1, 36)).ok());
    EXPECT_EQ(TcpAdmission::inflightBytes(), 100u);
    peer_.open();
    expectAll(t, batch, 0, 2, COMPLETED);
    EXPECT_EQ(TcpAdmission::inflightBytes(), 0u);
    ASSERT_TRUE(t.freeSubBatch(batch).ok());
}

TEST_F(TcpAdmissionTest, ASubBatchFreedWithTasksInFlightReleasesThemOnce) {
    TcpTransport& t = install(4, 1 << 20);
    Transport::SubBatchRef batch = nullptr;
    ASSERT_TRUE(t.allocateSubBatch(batch, 4).ok());
    ASSERT_TRUE(t.submitTransferTasks(batch, reads(4)).ok());
    EXPECT_TRUE(testing::waitUntil([&] { return peer_.requests() == 4; }));
    ASSERT_TRUE(t.freeSubBatch(batch).ok());
    // Freed, but still on the wire: still counted.
    EXPECT_EQ(TcpAdmission::inflightTasks(), 4u);
    peer_.open();
    EXPECT_TRUE(
        testing::waitUntil([] { return TcpAdmission::inflightTasks() == 0; }));
    EXPECT_EQ(TcpAdmission::inflightBytes(), 0u);
    // Exactly four came back (twice would wrap the count): the refusal of
    // five reads zero in flight, and four fit again.
    ASSERT_TRUE(t.allocateSubBatch(batch, 8).ok());
    EXPECT_EQ(t.submitTransferTasks(batch, reads(5)),
              Status::TooManyRequests(
                  "transports/tcp/max_inflight_tasks=4 reached: 0 tasks in "
                  "flight in this process, 5 more submitted"));
    ASSERT_TRUE(t.submitTransferTasks(batch, reads(4)).ok());
    expectAll(t, batch, 0, 4, COMPLETED);
    ASSERT_TRUE(t.freeSubBatch(batch).ok());
}

TEST_F(TcpAdmissionTest, CancelledFailedAndUninstalledTasksAreReleased) {
    // One worker: the first task is on the wire, the rest queued.
    TcpTransport& t = install(4, 1 << 20, 1);
    Transport::SubBatchRef batch = nullptr;
    ASSERT_TRUE(t.allocateSubBatch(batch, 8).ok());
    ASSERT_TRUE(t.submitTransferTasks(batch, reads(4)).ok());
    EXPECT_TRUE(testing::waitUntil([&] { return peer_.requests() == 1; }));
    ASSERT_TRUE(t.cancelTransferTask(batch, 3).ok());
    EXPECT_EQ(testing::waitWhilePending(t, batch, 3, kBoundMs).s, CANCELED);
    EXPECT_EQ(TcpAdmission::inflightTasks(), 3u);
    // A request that fails its checks at submission is released at once.
    std::vector<Request> bad = reads(1);
    bad[0].length = 0;
    bad[0].source = nullptr;
    bad[0].opcode = static_cast<Request::OpCode>(7);
    ASSERT_TRUE(t.submitTransferTasks(batch, bad).ok());
    EXPECT_EQ(testing::waitWhilePending(t, batch, 4, kBoundMs).s, FAILED);
    EXPECT_EQ(TcpAdmission::inflightTasks(), 3u);
    // uninstall() fails the queued two and the one on the wire.
    ASSERT_TRUE(t.uninstall().ok());
    expectAll(t, batch, 0, 3, FAILED);
    EXPECT_EQ(TcpAdmission::inflightTasks(), 0u);
    EXPECT_EQ(TcpAdmission::inflightBytes(), 0u);
    ASSERT_TRUE(t.freeSubBatch(batch).ok());
}

TEST_F(TcpAdmissionTest, TheCountsAreSharedByEveryTransportOfTheProcess) {
    TcpTransport& first = install(4, 1 << 20);
    TcpTransport& second = install(4, 1 << 20);
    Transport::SubBatchRef a = nullptr, b = nullptr;
    ASSERT_TRUE(first.allocateSubBatch(a, 4).ok());
    ASSERT_TRUE(second.allocateSubBatch(b, 4).ok());
    ASSERT_TRUE(first.submitTransferTasks(a, reads(3)).ok());
    EXPECT_EQ(second.submitTransferTasks(b, reads(2)),
              Status::TooManyRequests(
                  "transports/tcp/max_inflight_tasks=4 reached: 3 tasks in "
                  "flight in this process, 2 more submitted"));
    ASSERT_TRUE(second.submitTransferTasks(b, reads(1)).ok());
    peer_.open();
    expectAll(first, a, 0, 3, COMPLETED);
    expectAll(second, b, 0, 1, COMPLETED);
    ASSERT_TRUE(first.freeSubBatch(a).ok());
    ASSERT_TRUE(second.freeSubBatch(b).ok());
}

}  // namespace
}  // namespace mooncake::tent
