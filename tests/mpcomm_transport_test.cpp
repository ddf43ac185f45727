// tent_mpcomm_transport_test: the MPComm data path over the real provider.
//
// Forks a target engine, then drives WRITE and READ over MPComm with
// transport_hint = MPCOMM and every other transport disabled, checking the
// payload byte for byte. Parent and child take distinct MPCOMM_TCP_PORTs
// derived from the pid (outside 15000-17000, where TENT's RPC server takes
// its ports). Skips only when an engine with MPComm cannot come up, unless
// TENT_MPCOMM_TEST_REQUIRE_PROVIDER=1 (set by scripts/run_tests.sh against
// softmpcomm), which turns that skip into a failure.
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tent/transfer_engine.h"

namespace mooncake::tent {
namespace {

constexpr size_t kBufferSize = 4u << 20;
constexpr auto kDeadline = std::chrono::seconds(30);

// Derived from the parent's pid before the fork, so both sides agree.
int basePort(pid_t parent) { return 18000 + (parent % 6000) * 2; }

std::shared_ptr<Config> mpcommOnlyConfig() {
    auto conf = std::make_shared<Config>();
    conf->set("rpc_server_hostname", std::string("127.0.0.1"));
    conf->set("transports/mpcomm/enable", true);
    for (const char* other :
         {"tcp", "rdma", "shm", "nvlink", "mnnvl", "gds", "io_uring"}) {
        conf->set(std::string("transports/") + other + "/enable", false);
    }
    return conf;
}

bool hasMpcomm(const TransferEngine& engine) {
    auto names = engine.getSupportedTransports();
    return std::find(names.begin(), names.end(), "mpcomm") != names.end();
}

uint8_t patternByte(size_t i, uint8_t seed) {
    return static_cast<uint8_t>((i * 131 + seed) ^ (i >> 11));
}

// Reads one '\n'-terminated line from fd, waiting at most until `deadline`.
bool readLine(int fd, std::string& line,
              std::chrono::steady_clock::time_point deadline) {
    line.clear();
    char c;
    while (true) {
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                        deadline - std::chrono::steady_clock::now())
                        .count();
        if (left <= 0) return false;
        pollfd pfd{fd, POLLIN, 0};
        if (poll(&pfd, 1, static_cast<int>(left)) <= 0) continue;
        ssize_t n = read(fd, &c, 1);
        if (n <= 0) return false;
        if (c == '\n') return true;
        line.push_back(c);
    }
}

// Child: serve a 4 MiB buffer holding pattern seed 7 until the parent
// closes its end of `release_fd`. Reports "<segment> <addr>" or "SKIP
// <reason>" on `report_fd`.
[[noreturn]] void runTarget(int report_fd, int release_fd, int port) {
    setenv("MPCOMM_TCP_PORT", std::to_string(port).c_str(), 1);
    auto report = [&](const std::string& text) {
        std::string line = text + "\n";
        (void)!write(report_fd, line.data(), line.size());
    };
    {
        TransferEngine engine(mpcommOnlyConfig());
        if (!engine.available() || !hasMpcomm(engine)) {
            report("SKIP target engine has no mpcomm transport");
            _exit(0);
        }
        void* buf = nullptr;
        if (!engine.allocateLocalMemory(&buf, kBufferSize).ok()) {
            report("SKIP allocateLocalMemory failed");
            _exit(1);
        }
        auto* bytes = static_cast<uint8_t*>(buf);
        for (size_t i = 0; i < kBufferSize; ++i) bytes[i] = patternByte(i, 7);
        Status s = engine.registerLocalMemory(buf, kBufferSize);
        if (!s.ok()) {
            report("SKIP registerLocalMemory: " + s.ToString());
            _exit(1);
        }
        std::ostringstream os;
        os << engine.getSegmentName() << " "
           << reinterpret_cast<uintptr_t>(buf);
        report(os.str());
        char c;
        while (read(release_fd, &c, 1) > 0) {
        }
        engine.unregisterLocalMemory(buf, kBufferSize);
        engine.freeLocalMemory(buf);
    }
    _exit(0);
}

class MpcommTransportTest : public ::testing::Test {
 protected:
    void SetUp() override {
        unsetenv("MC_TENT_CONF");
        unsetenv("MPCOMM_REMOTE_TCP_PORT");
        int report[2], release[2];
        ASSERT_EQ(pipe(report), 0);
        ASSERT_EQ(pipe(release), 0);
        const pid_t parent = getpid();
        child_ = fork();
        ASSERT_GE(child_, 0);
        if (child_ == 0) {
            close(report[0]);
            close(release[1]);
            runTarget(report[1], release[0], basePort(parent) + 1);
        }
        close(report[1]);
        close(release[0]);
        release_fd_ = release[1];

        std::string line;
        bool got = readLine(report[0], line,
                            std::chrono::steady_clock::now() + kDeadline);
        close(report[0]);
        ASSERT_TRUE(got) << "target did not report within the deadline";
        if (line.rfind("SKIP ", 0) == 0) {
            skipOrFail("target: " + line.substr(5));
            return;
        }
        std::istringstream is(line);
        is >> target_name_ >> target_base_;
        ASSERT_FALSE(target_name_.empty()) << line;

        setenv("MPCOMM_TCP_PORT", std::to_string(basePort(parent)).c_str(), 1);
        engine_ = std::make_unique<TransferEngine>(mpcommOnlyConfig());
        if (!engine_->available() || !hasMpcomm(*engine_)) {
            skipOrFail("initiator engine has no mpcomm transport");
            return;
        }
        ASSERT_TRUE(engine_->allocateLocalMemory(&local_, kBufferSize).ok());
        ASSERT_TRUE(engine_->registerLocalMemory(local_, kBufferSize).ok());
        ASSERT_TRUE(engine_->openSegment(target_, target_name_).ok());
    }

    void TearDown() override {
        if (engine_ && local_) {
            engine_->unregisterLocalMemory(local_, kBufferSize);
            engine_->freeLocalMemory(local_);
        }
        engine_.reset();
        if (release_fd_ >= 0) close(release_fd_);
        if (child_ > 0) {
            int status = 0;
            waitpid(child_, &status, 0);
            EXPECT_TRUE(WIFEXITED(status)) << "target died: " << status;
        }
    }

    void skipOrFail(const std::string& why) {
        const char* req = getenv("TENT_MPCOMM_TEST_REQUIRE_PROVIDER");
        if (req && std::string(req) == "1") {
            FAIL() << "MPComm provider required but " << why;
        }
        GTEST_SKIP() << why;
    }

    Request request(Request::OpCode op, size_t offset, size_t length) {
        Request r;
        r.opcode = op;
        r.source = static_cast<uint8_t*>(local_) + offset;
        r.target_id = target_;
        r.target_offset = target_base_ + offset;
        r.length = length;
        r.transport_hint = MPCOMM;
        return r;
    }

    // Submits `requests` as one batch and waits for every task to leave
    // PENDING; returns the final states.
    std::vector<TransferStatus> run(const std::vector<Request>& requests) {
        BatchID batch = engine_->allocateBatch(requests.size());
        EXPECT_NE(batch, 0u);
        Status s = engine_->submitTransfer(batch, requests);
        EXPECT_TRUE(s.ok()) << s.ToString();
        std::vector<TransferStatus> states(requests.size());
        auto deadline = std::chrono::steady_clock::now() + kDeadline;
        for (size_t i = 0; i < requests.size(); ++i) {
            while (true) {
                EXPECT_TRUE(
                    engine_->getTransferStatus(batch, i, states[i]).ok());
                if (states[i].s != PENDING && states[i].s != INITIAL) break;
                if (std::chrono::steady_clock::now() > deadline) {
                    ADD_FAILURE() << "task " << i << " still pending";
                    break;
                }
                std::this_thread::yield();
            }
        }
        EXPECT_TRUE(engine_->freeBatch(batch).ok());
        return states;
    }

    pid_t child_ = -1;
    int release_fd_ = -1;
    std::string target_name_;
    uint64_t target_base_ = 0;
    std::unique_ptr<TransferEngine> engine_;
    void* local_ = nullptr;
    SegmentID target_ = 0;
};

TEST_F(MpcommTransportTest, WriteThenReadBackIsByteExact) {
    auto* bytes = static_cast<uint8_t*>(local_);
    // The target starts with seed 7; reading it first proves READ moves the
    // target's bytes, not ours.
    std::memset(bytes, 0, kBufferSize);
    auto states = run({request(Request::READ, 0, kBufferSize)});
    ASSERT_EQ(states[0].s, COMPLETED);
    EXPECT_EQ(states[0].transferred_bytes, kBufferSize);
    for (size_t i = 0; i < kBufferSize; ++i) {
        ASSERT_EQ(bytes[i], patternByte(i, 7)) << "initial read, byte " << i;
    }

    for (size_t i = 0; i < kBufferSize; ++i) bytes[i] = patternByte(i, 42);
    states = run({request(Request::WRITE, 0, kBufferSize)});
    ASSERT_EQ(states[0].s, COMPLETED);
    EXPECT_EQ(states[0].transferred_bytes, kBufferSize);

    std::memset(bytes, 0, kBufferSize);
    states = run({request(Request::READ, 0, kBufferSize)});
    ASSERT_EQ(states[0].s, COMPLETED);
    for (size_t i = 0; i < kBufferSize; ++i) {
        ASSERT_EQ(bytes[i], patternByte(i, 42)) << "read back, byte " << i;
    }
}

TEST_F(MpcommTransportTest, ManyRequestsInFlightAndABadRangeFailsAlone) {
    constexpr size_t kChunk = 256u << 10;
    constexpr size_t kChunks = kBufferSize / kChunk;
    auto* bytes = static_cast<uint8_t*>(local_);
    for (size_t i = 0; i < kBufferSize; ++i) bytes[i] = patternByte(i, 99);
    std::vector<Request> writes;
    for (size_t c = 0; c < kChunks; ++c) {
        writes.push_back(request(Request::WRITE, c * kChunk, kChunk));
    }
    // Past the end of the target's only buffer: must fail on its own.
    Request bad = request(Request::WRITE, 0, kChunk);
    bad.target_offset = target_base_ + kBufferSize - kChunk / 2;
    writes.push_back(bad);
    auto states = run(writes);
    for (size_t c = 0; c < kChunks; ++c) {
        EXPECT_EQ(states[c].s, COMPLETED) << "chunk " << c;
    }
    EXPECT_EQ(states[kChunks].s, FAILED);

    std::memset(bytes, 0, kBufferSize);
    std::vector<Request> reads;
    for (size_t c = 0; c < kChunks; ++c) {
        reads.push_back(request(Request::READ, c * kChunk, kChunk));
    }
    states = run(reads);
    for (size_t c = 0; c < kChunks; ++c) {
        ASSERT_EQ(states[c].s, COMPLETED) << "chunk " << c;
    }
    for (size_t i = 0; i < kBufferSize; ++i) {
        ASSERT_EQ(bytes[i], patternByte(i, 99)) << "byte " << i;
    }
}

}  // namespace
}  // namespace mooncake::tent
