// TwoProcessTest: a forked target engine and an initiator engine in this
// process, talking over one transport with every other one disabled.
//
// The child serves one kBufferSize buffer that starts with pattern seed 7,
// and reports "<segment> <address>" through a pipe; it exits when the
// parent closes its end of the release pipe. MPCOMM_TCP_PORTs are derived
// from the parent's pid before the fork (child = parent + 1) in
// 18000-23999: outside 15000-17000, where TENT's RPC server takes its
// ports, and tebench_test.py's 24000-31899, whose suite may run alongside.
//
// When an engine with the transport cannot come up the test skips, unless
// TENT_MPCOMM_TEST_REQUIRE_PROVIDER=1 (scripts/run_tests.sh sets it against
// softmpcomm), which turns the skip into a failure.
#pragma once

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

#include "kit/request_builder.h"
#include "tent/transfer_engine.h"

namespace mooncake::tent::testing {

constexpr size_t kBufferSize = 4u << 20;
constexpr auto kDeadline = std::chrono::seconds(30);

inline uint8_t patternByte(size_t i, uint8_t seed) {
    return static_cast<uint8_t>((i * 131 + seed) ^ (i >> 11));
}

inline std::shared_ptr<Config> onlyTransport(TransportType xport) {
    auto conf = std::make_shared<Config>();
    conf->set("rpc_server_hostname", std::string("127.0.0.1"));
    for (const char* name : {"tcp", "mpcomm", "rdma", "shm", "nvlink", "mnnvl",
                             "gds", "io_uring"}) {
        conf->set(std::string("transports/") + name + "/enable",
                  parseTransportType(name) == xport);
    }
    return conf;
}

inline bool hasTransport(const TransferEngine& engine, TransportType xport) {
    auto names = engine.getSupportedTransports();
    return std::find(names.begin(), names.end(), transportTypeName(xport)) !=
           names.end();
}

// Reads one '\n'-terminated line from fd, waiting at most until `deadline`.
inline bool readLine(int fd, std::string& line,
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
        if (read(fd, &c, 1) <= 0) return false;
        if (c == '\n') return true;
        line.push_back(c);
    }
}

// Submits `requests` as one batch and waits (bounded) for every task to
// leave PENDING; returns the final states.
inline std::vector<TransferStatus> runBatch(
    TransferEngine& engine, const std::vector<Request>& requests) {
    BatchID batch = engine.allocateBatch(requests.size());
    EXPECT_NE(batch, 0u);
    Status s = engine.submitTransfer(batch, requests);
    EXPECT_TRUE(s.ok()) << s.ToString();
    std::vector<TransferStatus> states(requests.size());
    auto deadline = std::chrono::steady_clock::now() + kDeadline;
    for (size_t i = 0; i < requests.size(); ++i) {
        while (true) {
            EXPECT_TRUE(engine.getTransferStatus(batch, i, states[i]).ok());
            if (states[i].s != PENDING && states[i].s != INITIAL) break;
            if (std::chrono::steady_clock::now() > deadline) {
                ADD_FAILURE() << "task " << i << " still pending";
                break;
            }
            std::this_thread::yield();
        }
    }
    EXPECT_TRUE(engine.freeBatch(batch).ok());
    return states;
}

// In a target child: allocates one kBufferSize buffer on `engine`, fills
// it with pattern seed 7 and registers it. "" with `buf` set, else what
// failed.
inline std::string publishPatternBuffer(TransferEngine& engine, void*& buf) {
    if (!engine.allocateLocalMemory(&buf, kBufferSize).ok()) {
        return "allocateLocalMemory failed";
    }
    auto* bytes = static_cast<uint8_t*>(buf);
    for (size_t i = 0; i < kBufferSize; ++i) bytes[i] = patternByte(i, 7);
    Status s = engine.registerLocalMemory(buf, kBufferSize);
    if (!s.ok()) return "registerLocalMemory: " + s.ToString();
    return "";
}

// The line a target child reports once its buffer is published: its
// segment name and the buffer's address, which the parent reads back with
// `std::istringstream(line) >> name >> base`.
inline std::string targetReport(const TransferEngine& engine, void* buf) {
    std::ostringstream os;
    os << engine.getSegmentName() << " " << reinterpret_cast<uintptr_t>(buf);
    return os.str();
}

[[noreturn]] inline void serveTarget(TransportType xport, int port,
                                     int report_fd, int release_fd) {
    setenv("MPCOMM_TCP_PORT", std::to_string(port).c_str(), 1);
    auto report = [&](const std::string& text) {
        std::string line = text + "\n";
        (void)!write(report_fd, line.data(), line.size());
    };
    {
        TransferEngine engine(onlyTransport(xport));
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
        char c;
        while (read(release_fd, &c, 1) > 0) {
        }
        engine.unregisterLocalMemory(buf, kBufferSize);
        engine.freeLocalMemory(buf);
    }
    _exit(0);
}

class TwoProcessTest : public ::testing::Test {
 protected:
    // Forks the target and brings up the initiator; skips (or fails, see
    // above) when either has no `xport`.
    void startPair(TransportType xport) {
        xport_ = xport;
        unsetenv("MC_TENT_CONF");
        unsetenv("MPCOMM_REMOTE_TCP_PORT");
        int report[2], release[2];
        ASSERT_EQ(pipe(report), 0);
        ASSERT_EQ(pipe(release), 0);
        const int port = 18000 + (getpid() % 3000) * 2;  // 18000-23999
        child_ = fork();
        ASSERT_GE(child_, 0);
        if (child_ == 0) {
            close(report[0]);
            close(release[1]);
            serveTarget(xport, port + 1, report[1], release[0]);
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

        setenv("MPCOMM_TCP_PORT", std::to_string(port).c_str(), 1);
        startInitiator();
    }

    void startInitiator() {
        engine_ = std::make_unique<TransferEngine>(onlyTransport(xport_));
        if (!engine_->available() || !hasTransport(*engine_, xport_)) {
            skipOrFail("initiator engine has no " +
                       std::string(transportTypeName(xport_)) + " transport");
            return;
        }
        ASSERT_TRUE(engine_->allocateLocalMemory(&local_, kBufferSize).ok());
        ASSERT_TRUE(engine_->registerLocalMemory(local_, kBufferSize).ok());
        ASSERT_TRUE(engine_->openSegment(target_, target_name_).ok());
    }

    // Drops the initiator without unregistering or freeing batches first.
    void abandonInitiator() {
        engine_.reset();
        local_ = nullptr;
    }

    void killTarget() {
        ASSERT_GT(child_, 0);
        kill(child_, SIGKILL);
        int status = 0;
        waitpid(child_, &status, 0);
        child_ = -1;
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
            FAIL() << "transport " << transportTypeName(xport_)
                   << " required but " << why;
        }
        GTEST_SKIP() << why;
    }

    uint8_t* localBytes() { return static_cast<uint8_t*>(local_); }

    Request request(Request::OpCode op, size_t offset, size_t length) {
        return makeRequest(op, localBytes() + offset, target_,
                           target_base_ + offset, length, xport_);
    }

    std::vector<TransferStatus> run(const std::vector<Request>& requests) {
        return runBatch(*engine_, requests);
    }

    // Reads the whole target buffer into a zeroed local one and checks the
    // pattern the target started with (seed 7): READ moves their bytes.
    void expectTargetsInitialPattern() {
        std::memset(localBytes(), 0, kBufferSize);
        auto states = run({request(Request::READ, 0, kBufferSize)});
        ASSERT_EQ(states[0].s, COMPLETED);
        EXPECT_EQ(states[0].transferred_bytes, kBufferSize);
        for (size_t i = 0; i < kBufferSize; ++i) {
            ASSERT_EQ(localBytes()[i], patternByte(i, 7)) << "byte " << i;
        }
    }

    // Fills the local buffer with `seed`, writes it all, clears the local
    // buffer and reads it back; checks every byte.
    void expectRoundTrip(uint8_t seed, size_t chunk) {
        for (size_t i = 0; i < kBufferSize; ++i) {
            localBytes()[i] = patternByte(i, seed);
        }
        std::vector<Request> writes, reads;
        for (size_t off = 0; off < kBufferSize; off += chunk) {
            writes.push_back(request(Request::WRITE, off, chunk));
            reads.push_back(request(Request::READ, off, chunk));
        }
        for (const auto& st : run(writes)) {
            ASSERT_EQ(st.s, COMPLETED);
            ASSERT_EQ(st.transferred_bytes, chunk);
        }
        std::memset(localBytes(), 0, kBufferSize);
        for (const auto& st : run(reads)) ASSERT_EQ(st.s, COMPLETED);
        for (size_t i = 0; i < kBufferSize; ++i) {
            ASSERT_EQ(localBytes()[i], patternByte(i, seed)) << "byte " << i;
        }
    }

    TransportType xport_ = UNSPEC;
    pid_t child_ = -1;
    int release_fd_ = -1;
    std::string target_name_;
    uint64_t target_base_ = 0;
    std::unique_ptr<TransferEngine> engine_;
    void* local_ = nullptr;
    SegmentID target_ = 0;
};

}  // namespace mooncake::tent::testing
