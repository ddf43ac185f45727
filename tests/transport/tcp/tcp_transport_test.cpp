// TcpTransport between two processes: a forked child runs the target
// engine, the parent drives WRITE/READ batches against it.
#include "tent/transport/tcp/tcp_transport.h"

#include <glog/logging.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>

#include "kit/wait_until.h"
#include "tcp_test_support.h"
#include "tent/transfer_engine.h"

namespace mooncake::tent {
namespace {

constexpr size_t kTargetBytes = 4 << 20;

// The child: one engine with one registered 4 MiB buffer. It reports
// "<segment name> <buffer address>\n" on `report_fd` and serves until
// `control_fd` reaches EOF (the parent closed it or died).
[[noreturn]] void runTarget(int report_fd, int control_fd) {
    ::unsetenv("MC_TENT_CONF");
    int rc = 1;
    {
        TransferEngine engine;
        void* buf = nullptr;
        if (engine.available() &&
            engine.allocateLocalMemory(&buf, kTargetBytes).ok()) {
            std::memset(buf, 0, kTargetBytes);
            if (engine.registerLocalMemory(buf, kTargetBytes).ok()) {
                std::ostringstream os;
                os << engine.getSegmentName() << " "
                   << reinterpret_cast<uint64_t>(buf) << "\n";
                std::string line = os.str();
                if (::write(report_fd, line.data(), line.size()) ==
                    static_cast<ssize_t>(line.size())) {
                    char c;
                    while (::read(control_fd, &c, 1) > 0) {
                    }
                    rc = 0;
                }
            }
        }
    }
    ::_exit(rc);
}

class TcpTransportTest : public ::testing::Test {
 protected:
    void SetUp() override {
        ::unsetenv("MC_TENT_CONF");
        // Forked before the parent starts any engine thread.
        int report[2], control[2];
        ASSERT_EQ(::pipe(report), 0);
        ASSERT_EQ(::pipe(control), 0);
        child_ = ::fork();
        ASSERT_GE(child_, 0);
        if (child_ == 0) {
            ::close(report[0]);
            ::close(control[1]);
            runTarget(report[1], control[0]);
        }
        ::close(report[1]);
        ::close(control[0]);
        control_fd_ = control[1];

        std::string line;
        auto deadline =
            std::chrono::steady_clock::now() + std::chrono::seconds(60);
        while (line.find('\n') == std::string::npos) {
            int left = static_cast<int>(
                std::chrono::duration_cast<std::chrono::milliseconds>(
                    deadline - std::chrono::steady_clock::now())
                    .count());
            ASSERT_GT(left, 0) << "target did not report within 60 s";
            struct pollfd pfd = {report[0], POLLIN, 0};
            if (::poll(&pfd, 1, left) <= 0) continue;
            char buf[256];
            ssize_t n = ::read(report[0], buf, sizeof(buf));
            ASSERT_GT(n, 0) << "target exited before reporting";
            line.append(buf, n);
        }
        ::close(report[0]);
        std::istringstream is(line);
        is >> target_name_ >> target_base_;
        ASSERT_FALSE(target_name_.empty());
        ASSERT_NE(target_base_, 0u);

        auto conf = std::make_shared<Config>();
        // Long enough that only a dropped connection can explain a quick
        // failure in the kill test.
        conf->set("transports/tcp/timeout_ms", 120000);
        // Small slices, so the last request of a batch, once the other
        // workers run out of work, is shared among them.
        conf->set("transports/tcp/min_slice_bytes", 65536);
        engine_ = std::make_unique<TransferEngine>(conf);
        ASSERT_TRUE(engine_->available());
        ASSERT_TRUE(engine_->openSegment(target_, target_name_).ok());
    }

    void TearDown() override {
        engine_.reset();
        if (control_fd_ >= 0) ::close(control_fd_);
        if (child_ > 0) {
            int status = 0;
            ::waitpid(child_, &status, 0);
            if (!killed_) {
                EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
            }
        }
    }

    Request request(Request::OpCode op, void* local, uint64_t offset,
                    size_t length) {
        return testing::requestTo(target_, op, local, target_base_ + offset,
                                  length);
    }

    // Polls until no task is PENDING; the bound turns a hang into a
    // failure and is far above what any case needs.
    std::vector<TransferStatus> wait(BatchID batch, int seconds = 60) {
        std::vector<TransferStatus> list;
        auto deadline =
            std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
        for (;;) {
            EXPECT_TRUE(engine_->getTransferStatus(batch, list).ok());
            bool pending = false;
            for (const TransferStatus& s : list) pending |= s.s == PENDING;
            if (!pending) return list;
            if (std::chrono::steady_clock::now() > deadline) {
                ADD_FAILURE()
                    << "tasks still PENDING after " << seconds << " s";
                return list;
            }
            std::this_thread::yield();
        }
    }

    pid_t child_ = -1;
    bool killed_ = false;
    int control_fd_ = -1;
    std::string target_name_;
    uint64_t target_base_ = 0;
    std::unique_ptr<TransferEngine> engine_;
    SegmentID target_ = 0;
};

TEST_F(TcpTransportTest, WriteThenReadBackManyInFlight) {
    constexpr size_t kPieces = 16;
    constexpr size_t kPiece = kTargetBytes / kPieces;
    std::vector<unsigned char> src(kTargetBytes), back(kTargetBytes, 0);
    for (size_t i = 0; i < src.size(); ++i) {
        src[i] = static_cast<unsigned char>((i * 131) ^ (i >> 11));
    }
    BatchID batch = engine_->allocateBatch(2 * kPieces);
    ASSERT_NE(batch, 0u);
    std::vector<Request> writes, reads;
    for (size_t p = 0; p < kPieces; ++p) {
        writes.push_back(
            request(Request::WRITE, &src[p * kPiece], p * kPiece, kPiece));
        reads.push_back(
            request(Request::READ, &back[p * kPiece], p * kPiece, kPiece));
    }
    ASSERT_TRUE(engine_->submitTransfer(batch, writes).ok());
    for (const TransferStatus& s : wait(batch)) {
        EXPECT_EQ(s.s, COMPLETED);
        EXPECT_EQ(s.transferred_bytes, kPiece);
    }
    ASSERT_TRUE(engine_->submitTransfer(batch, reads).ok());
    std::vector<TransferStatus> list = wait(batch);
    ASSERT_EQ(list.size(), 2 * kPieces);
    for (const TransferStatus& s : list) EXPECT_EQ(s.s, COMPLETED);
    TransferStatus overall;
    ASSERT_TRUE(engine_->getTransferStatus(batch, overall).ok());
    EXPECT_EQ(overall.s, COMPLETED);
    EXPECT_EQ(overall.transferred_bytes, 2 * kTargetBytes);
    EXPECT_TRUE(back == src) << "read-back differs from what was written";
    EXPECT_TRUE(engine_->freeBatch(batch).ok());
}

TEST_F(TcpTransportTest, OutOfRangeTargetFailsItsTaskOnly) {
    std::vector<unsigned char> src(4096, 0xab), back(4096, 0);
    std::vector<unsigned char> edge(4096, 0);
    BatchID batch = engine_->allocateBatch(8);
    // The hint sends the bad requests to the target itself, so it is the
    // target's own range check that refuses them.
    Request past_end = request(Request::WRITE, src.data(), kTargetBytes, 16);
    past_end.transport_hint = TCP;
    Request straddle =
        request(Request::READ, back.data(), kTargetBytes - 2048, 4096);
    straddle.transport_hint = TCP;
    Request below = request(Request::WRITE, src.data(), 0, 4096);
    below.target_offset = target_base_ - 4096;
    below.transport_hint = TCP;
    ASSERT_TRUE(engine_
                    ->submitTransfer(
                        batch, {request(Request::WRITE, src.data(), 0, 4096),
                                past_end, straddle, below,
                                request(Request::WRITE, src.data(),
                                        kTargetBytes - 4096, 4096)})
                    .ok());
    std::vector<TransferStatus> list = wait(batch);
    ASSERT_EQ(list.size(), 5u);
    EXPECT_EQ(list[0].s, COMPLETED);
    EXPECT_EQ(list[1].s, FAILED);
    EXPECT_EQ(list[2].s, FAILED);
    EXPECT_EQ(list[3].s, FAILED);
    EXPECT_EQ(list[4].s, COMPLETED);
    EXPECT_EQ(list[1].transferred_bytes, 0u);
    TransferStatus overall;
    ASSERT_TRUE(engine_->getTransferStatus(batch, overall).ok());
    EXPECT_EQ(overall.s, FAILED);
    EXPECT_EQ(overall.transferred_bytes, 8192u);

    // The target kept serving, and the last page holds what the good
    // write put there, not what the refused ones carried.
    ASSERT_TRUE(
        engine_
            ->submitTransfer(batch, {request(Request::READ, edge.data(),
                                             kTargetBytes - 4096, 4096)})
            .ok());
    list = wait(batch);
    ASSERT_EQ(list.size(), 6u);
    EXPECT_EQ(list[5].s, COMPLETED);
    EXPECT_TRUE(edge == src);
    EXPECT_TRUE(back == std::vector<unsigned char>(4096, 0))
        << "a refused READ must not deliver data";
}

TEST_F(TcpTransportTest, KilledTargetFailsPendingTasks) {
    constexpr size_t kPieces = 8;
    constexpr size_t kPiece = kTargetBytes / kPieces;
    std::vector<unsigned char> src(kTargetBytes, 0x5a);
    // Stopped first, so no task can complete before the kill: every task
    // is still in flight when the connection drops. kill() returns before
    // the stop takes effect, and until then the target's server threads
    // may still answer frames: wait until waitpid() reports it stopped.
    ASSERT_EQ(::kill(child_, SIGSTOP), 0);
    int stop_status = 0;
    ASSERT_TRUE(testing::waitUntil([&] {
        return ::waitpid(child_, &stop_status, WUNTRACED | WNOHANG) == child_ &&
               WIFSTOPPED(stop_status);
    })) << "the target was not seen stopped";
    BatchID batch = engine_->allocateBatch(kPieces);
    std::vector<Request> writes;
    for (size_t p = 0; p < kPieces; ++p) {
        writes.push_back(
            request(Request::WRITE, &src[p * kPiece], p * kPiece, kPiece));
    }
    ASSERT_TRUE(engine_->submitTransfer(batch, writes).ok());
    TransferStatus overall;
    ASSERT_TRUE(engine_->getTransferStatus(batch, overall).ok());
    EXPECT_EQ(overall.s, PENDING);

    ASSERT_EQ(::kill(child_, SIGKILL), 0);
    killed_ = true;
    int status = 0;
    ASSERT_EQ(::waitpid(child_, &status, 0), child_);
    child_ = -1;
    // 30 s is far below the 120 s socket timeout: only the dropped
    // connection can end these tasks in time.
    std::vector<TransferStatus> list = wait(batch, 30);
    ASSERT_EQ(list.size(), kPieces);
    for (const TransferStatus& s : list) EXPECT_EQ(s.s, FAILED);
    ASSERT_TRUE(engine_->getTransferStatus(batch, overall).ok());
    EXPECT_EQ(overall.s, FAILED);
}

}  // namespace
}  // namespace mooncake::tent
