// tent_failover_test: cross-transport failover (docs/failover.md) between
// two engines in two processes. The target (kit/target_main.cpp) serves its
// pattern buffer over mpcomm and tcp; the initiator's mpcomm is broken, so
// every request hinted to mpcomm must complete over tcp, byte-exact.
// MPComm is broken two ways: FaultyMpcommAdapter refuses every issue (the
// task fails at completion, nothing reaches the provider), or the
// transport refuses the submission as an unreachable endpoint does.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "kit/batch_wait.h"
#include "kit/faulty_mpcomm_adapter.h"
#include "kit/log_capture.h"
#include "kit/two_process_fixture.h"
#include "kit/wait_until.h"
#include "tent/runtime/transport.h"
#include "tent/transport/mpcomm/mpcomm_transport.h"
#include "tent/transport/shm/shm_transport.h"

namespace mooncake::tent {
namespace {

using testing::FaultyMpcommAdapter;
using testing::kBufferSize;
using testing::LogCapture;
using testing::patternByte;

constexpr size_t kChunk = 64 << 10;
constexpr size_t kTasks = 8;

// MPComm whose submissions are refused the way an endpoint that refuses
// the connection is: a retryable error, before anything is posted.
class RefusingMpcomm : public MpcommTransport {
 public:
    explicit RefusingMpcomm(bool permanent) : permanent_(permanent) {}
    Status submitTransferTasks(SubBatchRef,
                               const std::vector<Request>&) override {
        // A bad request fails alike on every transport: never retried.
        if (permanent_) return Status::AddressNotRegistered("not registered");
        return Status::RpcServiceError("mpcomm endpoint refused");
    }

 private:
    bool permanent_;
};

// SHM refusing every submission with a retryable error.
class RefusingShm : public ShmTransport {
 public:
    Status submitTransferTasks(SubBatchRef,
                               const std::vector<Request>&) override {
        return Status::InternalError("shm mapping refused");
    }
};

class ScopedOverride {
 public:
    ScopedOverride(TransportType type, TransportFactory factory) : type_(type) {
        setTransportFactoryOverride(type, std::move(factory));
    }
    ~ScopedOverride() { setTransportFactoryOverride(type_, {}); }

 private:
    TransportType type_;
};

enum class Break { kIssue, kSubmit, kSubmitPermanent };

class FailoverTest : public testing::TwoProcessTest {
 protected:
    // `tune`, when given, adjusts the initiator's configuration.
    void start(Break how, int max_attempts,
               std::function<void(Config&)> tune = {}) {
        testing::TargetOptions options;
        options.xport = MPCOMM;
        options.with_tcp = true;
        ASSERT_NO_FATAL_FAILURE(startTargetWith(options));
        if (IsSkipped()) return;
        faulty_ =
            std::make_shared<FaultyMpcommAdapter>(createDefaultMpcommAdapter());
        faulty_->issue_refusals = 1 << 30;
        auto faulty = faulty_;
        if (how == Break::kIssue) {
            override_ = std::make_unique<ScopedOverride>(MPCOMM, [faulty] {
                return std::make_unique<MpcommTransport>(faulty);
            });
        } else {
            const bool permanent = how == Break::kSubmitPermanent;
            override_ = std::make_unique<ScopedOverride>(MPCOMM, [permanent] {
                return std::make_unique<RefusingMpcomm>(permanent);
            });
        }
        auto conf = testing::onlyTransport(TCP);
        conf->set("transports/mpcomm/enable", true);
        conf->set("max_failover_attempts", max_attempts);
        if (tune) tune(*conf);
        engine_ = std::make_unique<TransferEngine>(conf);
        ASSERT_TRUE(engine_->available());
        if (!testing::hasTransport(*engine_, MPCOMM)) {
            skipOrFail("initiator engine has no mpcomm transport");
            return;
        }
        xport_ = MPCOMM;
        ASSERT_TRUE(engine_->allocateLocalMemory(&local_, kBufferSize).ok());
        ASSERT_TRUE(engine_->registerLocalMemory(local_, kBufferSize).ok());
        ASSERT_TRUE(engine_->openSegment(target_, target_name_).ok());
    }

    void TearDown() override {
        TwoProcessTest::TearDown();
        override_.reset();
    }

    // kTasks reads of the target's pattern, hinted to mpcomm.
    std::vector<Request> reads() {
        std::vector<Request> list;
        for (size_t k = 0; k < kTasks; ++k) {
            list.push_back(request(Request::READ, k * kChunk, kChunk));
        }
        return list;
    }

    void expectPatternRead() {
        for (size_t i = 0; i < kTasks * kChunk; ++i) {
            ASSERT_EQ(localBytes()[i], patternByte(i, 7)) << "byte " << i;
        }
    }

    std::shared_ptr<FaultyMpcommAdapter> faulty_;
    std::unique_ptr<ScopedOverride> override_;
};

TEST_F(FailoverTest, FailedMpcommTasksCompleteOverTcpByteExact) {
    ASSERT_NO_FATAL_FAILURE(start(Break::kIssue, 3));
    if (IsSkipped()) return;
    LogCapture logs;
    std::memset(localBytes(), 0, kBufferSize);
    for (const auto& st : run(reads())) {
        ASSERT_EQ(st.s, COMPLETED);
        EXPECT_EQ(st.transferred_bytes, kChunk);
    }
    expectPatternRead();
    EXPECT_EQ(logs.count("Transport failover: mpcomm -> tcp (attempt 1/3)"),
              int(kTasks));
    EXPECT_EQ(engine_->getFailoverCount(MPCOMM, TCP), kTasks);
    EXPECT_EQ(engine_->getFailoverCount(), kTasks);
    // Nothing reached the provider: tcp moved every byte.
    EXPECT_EQ(faulty_->forwarded_posts.load(), 0);
}

TEST_F(FailoverTest, RefusedSubmissionsAreCarriedOverTcp) {
    ASSERT_NO_FATAL_FAILURE(start(Break::kSubmit, 3));
    if (IsSkipped()) return;
    LogCapture logs;
    std::memset(localBytes(), 0, kBufferSize);
    for (const auto& st : run(reads())) ASSERT_EQ(st.s, COMPLETED);
    expectPatternRead();
    EXPECT_EQ(logs.count("Transport failover: mpcomm -> tcp (attempt 1/3)"),
              int(kTasks));
    EXPECT_EQ(engine_->getFailoverCount(MPCOMM, TCP), kTasks);
}

TEST_F(FailoverTest, ZeroAttemptsFailsAsWithoutFailover) {
    ASSERT_NO_FATAL_FAILURE(start(Break::kIssue, 0));
    if (IsSkipped()) return;
    LogCapture logs;
    for (const auto& st : run(reads())) EXPECT_EQ(st.s, FAILED);
    EXPECT_TRUE(logs.linesStartingWith("Transport failover:").empty());
    // 0 turns failover off: no limit is reached either.
    EXPECT_TRUE(logs.linesStartingWith("Task failover limit").empty());
    EXPECT_EQ(engine_->getFailoverCount(), 0u);
}

TEST_F(FailoverTest, PermanentSubmitErrorsAreNeverRetried) {
    ASSERT_NO_FATAL_FAILURE(start(Break::kSubmitPermanent, 3));
    if (IsSkipped()) return;
    LogCapture logs;
    for (const auto& st : run(reads())) EXPECT_EQ(st.s, FAILED);
    EXPECT_TRUE(logs.linesStartingWith("Transport failover:").empty());
    EXPECT_EQ(engine_->getFailoverCount(), 0u);
}

TEST_F(FailoverTest, UnknownSegmentIsNeverRetried) {
    ASSERT_NO_FATAL_FAILURE(start(Break::kIssue, 3));
    if (IsSkipped()) return;
    LogCapture logs;
    auto states = run({testing::makeRequest(Request::READ, local_, 424242,
                                            target_base_, kChunk, MPCOMM)});
    EXPECT_EQ(states[0].s, FAILED);
    EXPECT_TRUE(logs.linesStartingWith("Transport failover:").empty());
    EXPECT_EQ(engine_->getFailoverCount(), 0u);
}

TEST_F(FailoverTest, TargetDownOnEveryPathFailsWithinBound) {
    // docs/failover.md's bound, from the keys set here, plus scheduling.
    static constexpr int kConnectMs = 1500, kRpcMs = 1000, kTcpMs = 1500;
    constexpr int64_t kBoundMs = kConnectMs + kRpcMs + kTcpMs + 1500;
    ASSERT_NO_FATAL_FAILURE(start(Break::kIssue, 3, [](Config& conf) {
        conf.set("transports/mpcomm/connect_timeout_ms", kConnectMs);
        conf.set("rpc/timeout_ms", kRpcMs);
        conf.set("transports/tcp/timeout_ms", kTcpMs);
    }));
    if (IsSkipped()) return;
    // The descriptor is cached; then the target goes away.
    killTarget();
    LogCapture logs;
    const auto t0 = std::chrono::steady_clock::now();
    for (const auto& st : run(reads())) EXPECT_EQ(st.s, FAILED);
    // mpcomm fails at once; tcp's connect is refused at once.
    EXPECT_LT(std::chrono::duration_cast<std::chrono::milliseconds>(
                  std::chrono::steady_clock::now() - t0)
                  .count(),
              kBoundMs);
    EXPECT_EQ(logs.count("Transport failover: mpcomm -> tcp (attempt 1/3)"),
              int(kTasks));
    EXPECT_EQ(logs.count("No more transports available after tcp failed"),
              int(kTasks));
}

TEST_F(FailoverTest, LimitReachedIsLoggedWithTheLastTransport) {
    ASSERT_NO_FATAL_FAILURE(start(Break::kIssue, 1));
    if (IsSkipped()) return;
    killTarget();
    LogCapture logs;
    for (const auto& st : run(reads())) EXPECT_EQ(st.s, FAILED);
    EXPECT_EQ(logs.count("Transport failover: mpcomm -> tcp (attempt 1/1)"),
              int(kTasks));
    EXPECT_EQ(logs.count("Task failover limit reached (1), last transport=tcp"),
              int(kTasks));
}

// Status readers, a canceller and the free race the failovers: every task
// ends COMPLETED (moved bytes exact) or CANCELED, none is failed over after
// its cancel, and the batch frees.
TEST_F(FailoverTest, FailoverUnderConcurrentCancelAndFree) {
    ASSERT_NO_FATAL_FAILURE(start(Break::kIssue, 3));
    if (IsSkipped()) return;
    std::memset(localBytes(), 0, kBufferSize);
    BatchID batch = engine_->allocateBatch(kTasks);
    ASSERT_TRUE(engine_->submitTransfer(batch, reads()).ok());
    std::vector<TransferStatus> states(kTasks);
    ASSERT_TRUE(testing::cancelEvenTasksWhilePolling(*engine_, batch, states,
                                                     testing::kDeadline));
    for (size_t k = 0; k < kTasks; ++k) {
        ASSERT_TRUE(states[k].s == COMPLETED || states[k].s == CANCELED)
            << "task " << k << " " << states[k].s;
        if (states[k].s != COMPLETED) continue;
        for (size_t i = k * kChunk; i < (k + 1) * kChunk; ++i) {
            ASSERT_EQ(localBytes()[i], patternByte(i, 7)) << "byte " << i;
        }
    }
    // Odd tasks were never canceled: they completed over tcp.
    for (size_t k = 1; k < kTasks; k += 2) EXPECT_EQ(states[k].s, COMPLETED);
    EXPECT_TRUE(engine_->freeBatch(batch).ok());
}

// With polling failover off, status reads leave a FAILED task failed over
// to nobody; progressBatch() drives it, and never a task canceled first.
TEST_F(FailoverTest, CanceledTasksAreNeverFailedOver) {
    ASSERT_NO_FATAL_FAILURE(start(Break::kIssue, 3, [](Config& conf) {
        conf.set("enable_auto_failover_on_poll", false);
    }));
    if (IsSkipped()) return;
    std::memset(localBytes(), 0, kBufferSize);
    BatchID batch = engine_->allocateBatch(kTasks);
    ASSERT_TRUE(engine_->submitTransfer(batch, reads()).ok());
    for (size_t k = 0; k < kTasks; k += 2) {
        ASSERT_TRUE(engine_->cancelTransfer(batch, k).ok());
    }
    TransferStatus overall;
    ASSERT_TRUE(testing::waitUntil(
        [&] {
            return engine_->progressBatch(batch, overall).ok() &&
                   overall.s != PENDING;
        },
        testing::kDeadline));
    for (size_t k = 0; k < kTasks; ++k) {
        TransferStatus st;
        ASSERT_TRUE(engine_->getTransferStatus(batch, k, st).ok());
        if (k % 2 == 1) {
            EXPECT_EQ(st.s, COMPLETED) << "task " << k;
        } else {
            // CANCELED; or FAILED when mpcomm had failed it before the
            // cancel's own status read (which, polling failover off,
            // leaves it FAILED).
            EXPECT_TRUE(st.s == CANCELED || st.s == FAILED)
                << "task " << k << " " << st.s;
        }
    }
    EXPECT_EQ(engine_->getFailoverCount(MPCOMM, TCP), kTasks / 2);
    EXPECT_TRUE(engine_->freeBatch(batch).ok());
}

// enable_progress_worker: the tasks are failed over and complete while
// nobody polls (polling failover is off, so no status read does it).
TEST_F(FailoverTest, ProgressWorkerFailsOverWithoutPolling) {
    LogCapture logs;
    ASSERT_NO_FATAL_FAILURE(start(Break::kIssue, 3, [](Config& conf) {
        conf.set("enable_auto_failover_on_poll", false);
        conf.set("enable_progress_worker", true);
    }));
    if (IsSkipped()) return;
    EXPECT_EQ(logs.count("ProgressWorker started"), 1);
    std::memset(localBytes(), 0, kBufferSize);
    BatchID batch = engine_->allocateBatch(kTasks);
    ASSERT_TRUE(engine_->submitTransfer(batch, reads()).ok());
    ASSERT_TRUE(testing::waitUntil(
        [&] { return engine_->getFailoverCount(MPCOMM, TCP) == kTasks; },
        testing::kDeadline));
    TransferStatus overall;
    ASSERT_TRUE(testing::waitUntil(
        [&] {
            return engine_->getTransferStatus(batch, overall).ok() &&
                   overall.s != PENDING;
        },
        testing::kDeadline));
    EXPECT_EQ(overall.s, COMPLETED);
    expectPatternRead();
    EXPECT_TRUE(engine_->freeBatch(batch).ok());
}

// With polling failover off, a task mpcomm failed belongs to the progress
// worker: the application's polls read it PENDING until the worker has
// moved it, never FAILED (which would be final while its bytes still
// arrive over tcp). The worker's pass comes only every second, so the
// polls from the submission on see mpcomm's failure before it acts.
TEST_F(FailoverTest, PollsLeaveAFailedTaskToTheProgressWorker) {
    ASSERT_NO_FATAL_FAILURE(start(Break::kIssue, 3, [](Config& conf) {
        conf.set("enable_auto_failover_on_poll", false);
        conf.set("enable_progress_worker", true);
        conf.set("progress_worker/interval_us", 1000000);
    }));
    if (IsSkipped()) return;
    std::memset(localBytes(), 0, kBufferSize);
    BatchID batch = engine_->allocateBatch(kTasks);
    ASSERT_TRUE(engine_->submitTransfer(batch, reads()).ok());
    int failed_reads = 0;
    TransferStatus overall;
    ASSERT_TRUE(testing::waitUntil(
        [&] {
            std::vector<TransferStatus> list;
            if (!engine_->getTransferStatus(batch, list).ok()) return false;
            for (const TransferStatus& s : list) failed_reads += s.s == FAILED;
            return engine_->getTransferStatus(batch, overall).ok() &&
                   overall.s != PENDING;
        },
        testing::kDeadline));
    EXPECT_EQ(failed_reads, 0);
    EXPECT_EQ(overall.s, COMPLETED);
    EXPECT_EQ(engine_->getFailoverCount(MPCOMM, TCP), kTasks);
    expectPatternRead();
    EXPECT_TRUE(engine_->freeBatch(batch).ok());
}

// A notified submission whose task is failed over sends its notification
// once, after tcp completed it: the target checks, the moment it arrives,
// that the announced bytes are there (mpcomm moved none of them).
TEST_F(FailoverTest, NotificationGoesOnceAfterTheFailedOverWrite) {
    ASSERT_NO_FATAL_FAILURE(start(Break::kIssue, 3));
    if (IsSkipped()) return;
    ASSERT_TRUE(target_process_.tell("verify " + engine_->getSegmentName()));
    constexpr int kRounds = 4;
    std::map<std::string, std::vector<std::string>> answers;
    for (int r = 0; r < kRounds; ++r) {
        const auto seed = static_cast<uint8_t>(40 + r);
        const size_t offset = r * kChunk;
        for (size_t i = offset; i < offset + kChunk; ++i) {
            localBytes()[i] = patternByte(i, seed);
        }
        const std::string name = "r" + std::to_string(r);
        BatchID batch = engine_->allocateBatch(1);
        Notification notifi{name, std::to_string(offset) + " " +
                                      std::to_string(kChunk) + " " +
                                      std::to_string(seed)};
        ASSERT_TRUE(
            engine_
                ->submitTransfer(
                    batch, {request(Request::WRITE, offset, kChunk)}, notifi)
                .ok());
        TransferStatus overall;
        ASSERT_TRUE(testing::waitUntil(
            [&] {
                return engine_->getTransferStatus(batch, overall).ok() &&
                       overall.s != PENDING;
            },
            testing::kDeadline));
        ASSERT_EQ(overall.s, COMPLETED);
        ASSERT_TRUE(engine_->freeBatch(batch).ok());
        ASSERT_TRUE(testing::waitUntil(
            [&] {
                std::vector<Notification> list;
                EXPECT_TRUE(engine_->receiveNotification(list).ok());
                for (auto& n : list) answers[n.name].push_back(n.msg);
                return answers.count(name) != 0;
            },
            testing::kDeadline))
            << "no answer to " << name;
    }
    // Each answered once, "ok"; the later rounds' answers came after the
    // earlier ones', so a second copy of one would have been seen.
    ASSERT_EQ(answers.size(), size_t(kRounds));
    for (const auto& [name, list] : answers) {
        EXPECT_EQ(list, std::vector<std::string>{"ok"}) << name;
    }
    EXPECT_EQ(engine_->getFailoverCount(MPCOMM, TCP), size_t(kRounds));
}

// Four threads read every task's status at once while they fail over:
// each task moves exactly once and completes byte-exact.
TEST_F(FailoverTest, ConcurrentReadersMoveEachTaskOnce) {
    ASSERT_NO_FATAL_FAILURE(start(Break::kIssue, 3));
    if (IsSkipped()) return;
    LogCapture logs;
    constexpr size_t kMany = kBufferSize / kChunk;
    std::memset(localBytes(), 0, kBufferSize);
    std::vector<Request> list;
    for (size_t k = 0; k < kMany; ++k) {
        list.push_back(request(Request::READ, k * kChunk, kChunk));
    }
    BatchID batch = engine_->allocateBatch(kMany);
    ASSERT_TRUE(engine_->submitTransfer(batch, list).ok());
    std::vector<std::thread> readers;
    std::atomic<size_t> bad{0};
    for (int t = 0; t < 4; ++t) {
        readers.emplace_back([&, t] {
            EXPECT_TRUE(testing::waitUntil(
                [&] {
                    bool done = true;
                    for (size_t i = 0; i < kMany; ++i) {
                        const size_t k = (i + t * 7) % kMany;
                        TransferStatus st;
                        if (!engine_->getTransferStatus(batch, k, st).ok()) {
                            bad.fetch_add(1);
                        }
                        if (st.s == PENDING) done = false;
                        if (st.s != PENDING && st.s != COMPLETED) {
                            bad.fetch_add(1);
                        }
                    }
                    return done;
                },
                testing::kDeadline));
        });
    }
    for (auto& r : readers) r.join();
    EXPECT_EQ(bad.load(), 0u);
    EXPECT_EQ(engine_->getFailoverCount(MPCOMM, TCP), kMany);
    EXPECT_EQ(logs.count("Transport failover: mpcomm -> tcp (attempt 1/3)"),
              int(kMany));
    for (size_t i = 0; i < kBufferSize; ++i) {
        ASSERT_EQ(localBytes()[i], patternByte(i, 7)) << "byte " << i;
    }
    EXPECT_TRUE(engine_->freeBatch(batch).ok());
}

// SHM to TCP: the target on this host serves over shm and tcp; the
// initiator's shm refuses every request, tcp carries them byte-exact.
TEST_F(FailoverTest, RefusedShmRequestsAreCarriedOverTcp) {
    testing::TargetOptions options;
    options.xport = SHM;
    options.with_tcp = true;
    ASSERT_NO_FATAL_FAILURE(startTargetWith(options));
    if (IsSkipped()) return;
    override_ = std::make_unique<ScopedOverride>(
        SHM, [] { return std::make_unique<RefusingShm>(); });
    auto conf = testing::onlyTransport(TCP);
    conf->set("transports/shm/enable", true);
    engine_ = std::make_unique<TransferEngine>(conf);
    ASSERT_TRUE(engine_->available());
    ASSERT_TRUE(testing::hasTransport(*engine_, SHM));
    xport_ = SHM;
    ASSERT_TRUE(engine_->allocateLocalMemory(&local_, kBufferSize).ok());
    ASSERT_TRUE(engine_->registerLocalMemory(local_, kBufferSize).ok());
    ASSERT_TRUE(engine_->openSegment(target_, target_name_).ok());
    LogCapture logs;
    std::memset(localBytes(), 0, kBufferSize);
    for (const auto& st : run(reads())) {
        ASSERT_EQ(st.s, COMPLETED);
        EXPECT_EQ(st.transferred_bytes, kChunk);
    }
    expectPatternRead();
    EXPECT_EQ(logs.count("Transport failover: shm -> tcp (attempt 1/3)"),
              int(kTasks));
    EXPECT_EQ(engine_->getFailoverCount(SHM, TCP), kTasks);
}

TEST_F(FailoverTest, OutOfRangeKeysAreRefusedByName) {
    for (auto [key, value] :
         {std::pair<const char*, int>{"max_failover_attempts", -1},
          {"max_failover_attempts", 17},
          {"progress_worker/interval_us", 0}}) {
        LogCapture logs;
        auto conf = testing::onlyTransport(TCP);
        conf->set("enable_progress_worker", true);
        conf->set(key, value);
        TransferEngine engine(conf);
        EXPECT_FALSE(engine.available()) << key;
        bool named = false;
        for (const auto& line : logs.lines()) {
            named |=
                line.find(std::string(key) + " must be in") !=
                    std::string::npos &&
                line.find("got " + std::to_string(value)) != std::string::npos;
        }
        EXPECT_TRUE(named) << key;
    }
}

}  // namespace
}  // namespace mooncake::tent
