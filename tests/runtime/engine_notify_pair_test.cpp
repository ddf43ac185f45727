// Notifications between two processes, over tcp and over mpcomm: a forked
// target checks, the moment each notification arrives, that the bytes of
// the write it announces are all in its buffer, and answers with a
// notification of its own; several initiator threads run hundreds of
// rounds each. And a flood of notifications to a target that never
// receives is refused at the bound while the target's memory stays flat.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "kit/two_process_fixture.h"
#include "kit/wait_until.h"

namespace mooncake::tent::testing {
namespace {

constexpr int kThreads = 4;
constexpr int kRounds = 500;
constexpr size_t kRegion = kBufferSize / kThreads;
constexpr int kFloodBound = 256;

// "<VmRSS kB> <VmHWM kB>" of this process.
std::string memoryLine() {
    std::ifstream status("/proc/self/status");
    std::string line, rss = "0", hwm = "0";
    while (std::getline(status, line)) {
        std::istringstream is(line);
        std::string key, value;
        is >> key >> value;
        if (key == "VmRSS:") rss = value;
        if (key == "VmHWM:") hwm = value;
    }
    return rss + " " + hwm;
}

bool released(int fd) {
    pollfd pfd{fd, POLLIN, 0};
    return poll(&pfd, 1, 0) > 0;  // data or EOF: the parent is done
}

// The target: verifies each announced write ("<offset> <length> <seed>")
// in its buffer and answers "ok" or "bad <index>" under the same name.
void verifyLoop(TransferEngine& engine, const uint8_t* buf, int command_fd) {
    std::string initiator;
    if (!readLine(command_fd, initiator,
                  std::chrono::steady_clock::now() + kDeadline)) {
        return;
    }
    SegmentID peer = 0;
    if (!engine.openSegment(peer, initiator).ok()) return;
    std::vector<Notification> list;
    while (!released(command_fd)) {
        engine.receiveNotification(list);
        if (list.empty()) std::this_thread::yield();
        for (const Notification& n : list) {
            size_t offset = 0, length = 0;
            int seed = 0;
            std::istringstream(n.msg) >> offset >> length >> seed;
            std::string answer = "ok";
            for (size_t i = offset; i < offset + length; ++i) {
                if (buf[i] != patternByte(i, static_cast<uint8_t>(seed))) {
                    answer = "bad " + std::to_string(i);
                    break;
                }
            }
            engine.sendNotification(peer, {n.name, answer});
        }
    }
}

// The flood target never receives; "rss" on the command pipe answers its
// memory line.
void floodLoop(int command_fd, int report_fd) {
    std::string command;
    while (readLine(command_fd, command,
                    std::chrono::steady_clock::now() + kDeadline)) {
        std::string line = memoryLine() + "\n";
        (void)!write(report_fd, line.data(), line.size());
    }
}

[[noreturn]] void runTarget(TransportType xport, int port, bool flood,
                            int report_fd, int command_fd) {
    setenv("MPCOMM_TCP_PORT", std::to_string(port).c_str(), 1);
    auto report = [&](const std::string& text) {
        std::string line = text + "\n";
        (void)!write(report_fd, line.data(), line.size());
    };
    {
        auto conf = onlyTransport(xport);
        conf->set("notification/max_pending_per_peer", kFloodBound);
        TransferEngine engine(conf);
        if (!engine.available() || !hasTransport(engine, xport)) {
            report("SKIP target engine has no " +
                   std::string(transportTypeName(xport)) + " transport");
            _exit(0);
        }
        void* buf = nullptr;
        std::string error = publishPatternBuffer(engine, buf);
        if (!error.empty()) {
            report("SKIP " + error);
            _exit(1);
        }
        report(targetReport(engine, buf));
        if (flood) {
            floodLoop(command_fd, report_fd);
        } else {
            verifyLoop(engine, static_cast<uint8_t*>(buf), command_fd);
        }
        engine.unregisterLocalMemory(buf, kBufferSize);
        engine.freeLocalMemory(buf);
    }
    _exit(0);
}

class NotifyPairTest : public TwoProcessTest {
 protected:
    void startTarget(TransportType xport, bool flood) {
        xport_ = xport;
        unsetenv("MC_TENT_CONF");
        unsetenv("MPCOMM_REMOTE_TCP_PORT");
        int report[2], command[2];
        ASSERT_EQ(pipe(report), 0);
        ASSERT_EQ(pipe(command), 0);
        const int port = 18000 + (getpid() % 3000) * 2;
        child_ = fork();
        ASSERT_GE(child_, 0);
        if (child_ == 0) {
            close(report[0]);
            close(command[1]);
            runTarget(xport, port + 1, flood, report[1], command[0]);
        }
        close(report[1]);
        close(command[0]);
        release_fd_ = command[1];
        report_fd_ = report[0];
        std::string line;
        ASSERT_TRUE(readLine(report_fd_, line,
                             std::chrono::steady_clock::now() + kDeadline))
            << "target did not report within the deadline";
        if (line.rfind("SKIP ", 0) == 0) {
            skipOrFail("target: " + line.substr(5));
            return;
        }
        std::istringstream(line) >> target_name_ >> target_base_;
        setenv("MPCOMM_TCP_PORT", std::to_string(port).c_str(), 1);
        startInitiator();
    }

    void TearDown() override {
        TwoProcessTest::TearDown();
        if (report_fd_ >= 0) close(report_fd_);
    }

    void command(const std::string& text) {
        std::string line = text + "\n";
        ASSERT_EQ(write(release_fd_, line.data(), line.size()),
                  static_cast<ssize_t>(line.size()));
    }

    // The target's VmHWM in kB.
    long targetHighWater() {
        command("rss");
        std::string line;
        EXPECT_TRUE(readLine(report_fd_, line,
                             std::chrono::steady_clock::now() + kDeadline));
        long rss = 0, hwm = 0;
        std::istringstream(line) >> rss >> hwm;
        return hwm;
    }

    // One thread's rounds: write a fresh pattern into its region with a
    // notification, wait for the target's answer to it.
    void rounds(int t) {
        for (int r = 0; r < kRounds; ++r) {
            const size_t offset = t * kRegion;
            const size_t length =
                4096 + (static_cast<size_t>(r) * 7919) % (kRegion - 4096);
            const auto seed = static_cast<uint8_t>(1 + (r + t) % 250);
            for (size_t i = offset; i < offset + length; ++i) {
                localBytes()[i] = patternByte(i, seed);
            }
            const std::string name =
                "t" + std::to_string(t) + "r" + std::to_string(r);
            BatchID batch = engine_->allocateBatch(1);
            ASSERT_NE(batch, 0u);
            Notification notifi{name, std::to_string(offset) + " " +
                                          std::to_string(length) + " " +
                                          std::to_string(seed)};
            ASSERT_TRUE(
                engine_
                    ->submitTransfer(batch,
                                     {request(Request::WRITE, offset, length)},
                                     notifi)
                    .ok());
            TransferStatus overall;
            ASSERT_TRUE(waitUntil([&] {
                EXPECT_TRUE(engine_->progressBatch(batch, overall).ok());
                return overall.s != PENDING;
            }));
            ASSERT_EQ(overall.s, COMPLETED) << name;
            ASSERT_TRUE(engine_->freeBatch(batch).ok());
            std::string answer;
            ASSERT_TRUE(waitUntil([&] { return takeAnswer(name, answer); }))
                << "no answer to " << name;
            ASSERT_EQ(answer, "ok") << name << " length " << length;
        }
    }

    bool takeAnswer(const std::string& name, std::string& answer) {
        std::lock_guard<std::mutex> lock(answers_mu_);
        std::vector<Notification> list;
        EXPECT_TRUE(engine_->receiveNotification(list).ok());
        for (Notification& n : list) answers_[n.name] = n.msg;
        auto it = answers_.find(name);
        if (it == answers_.end()) return false;
        answer = it->second;
        answers_.erase(it);
        return true;
    }

    void runRounds(TransportType xport) {
        ASSERT_NO_FATAL_FAILURE(startTarget(xport, false));
        if (IsSkipped()) return;
        command(engine_->getSegmentName());
        std::vector<std::thread> threads;
        for (int t = 0; t < kThreads; ++t) {
            threads.emplace_back([this, t] { rounds(t); });
        }
        for (auto& thread : threads) thread.join();
    }

    void flood(TransportType xport) {
        ASSERT_NO_FATAL_FAILURE(startTarget(xport, true));
        if (IsSkipped()) return;
        const Notification big{"flood", std::string(4000, 'f')};
        for (int i = 0; i < kFloodBound; ++i) {
            ASSERT_TRUE(engine_->sendNotification(target_, big).ok()) << i;
        }
        const long filled = targetHighWater();
        std::atomic<int> refused{0};
        std::vector<std::thread> threads;
        for (int t = 0; t < kThreads; ++t) {
            threads.emplace_back([&] {
                for (int i = 0; i < 5000; ++i) {
                    Status s = engine_->sendNotification(target_, big);
                    if (s.IsTooManyRequests() &&
                        std::string(s.message())
                                .find(
                                    "notification/max_pending_per_peer=256") !=
                            std::string::npos) {
                        refused.fetch_add(1);
                    }
                }
            });
        }
        for (auto& thread : threads) thread.join();
        EXPECT_EQ(refused.load(), kThreads * 5000);
        // Unbounded, the 20000 refused messages (4000 bytes, twice that on
        // the wire) would have added some 80 MB.
        const long after = targetHighWater();
        EXPECT_LT(after - filled, 8 * 1024)
            << "VmHWM went from " << filled << " kB to " << after << " kB";
    }

    int report_fd_ = -1;
    std::mutex answers_mu_;
    std::map<std::string, std::string> answers_;
};

TEST_F(NotifyPairTest, EveryNotificationFindsItsDataOverTcp) { runRounds(TCP); }

TEST_F(NotifyPairTest, EveryNotificationFindsItsDataOverMpcomm) {
    runRounds(MPCOMM);
}

TEST_F(NotifyPairTest, AFloodIsRefusedAtTheBoundWithTheTargetsMemoryFlat) {
    flood(TCP);
}

}  // namespace
}  // namespace mooncake::tent::testing
