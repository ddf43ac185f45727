// TwoProcessTest: a target engine in a child process (TargetProcess, see
// target_process.h; a suite using it links kit/target_main.cpp) and an
// initiator engine in this process, talking over one transport with every
// other one disabled.
//
// The child serves one kBufferSize buffer that starts with pattern seed 7.
// MPCOMM_TCP_PORTs are derived from the parent's pid (child = parent + 1)
// in 18000-23999: outside 15000-17000, where TENT's RPC server takes its
// ports, and tebench_test.py's 24000-31899, whose suite may run alongside.
//
// When an engine with the transport cannot come up the test skips, unless
// TENT_MPCOMM_TEST_REQUIRE_PROVIDER=1 (scripts/run_tests.sh sets it against
// softmpcomm), which turns the skip into a failure.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "kit/engine_config.h"
#include "kit/request_builder.h"
#include "kit/target_process.h"
#include "tent/transfer_engine.h"

namespace mooncake::tent::testing {

constexpr size_t kBufferSize = 4u << 20;
constexpr auto kDeadline = std::chrono::seconds(30);

inline uint8_t patternByte(size_t i, uint8_t seed) {
    return static_cast<uint8_t>((i * 131 + seed) ^ (i >> 11));
}

inline bool hasTransport(const TransferEngine& engine, TransportType xport) {
    auto names = engine.getSupportedTransports();
    return std::find(names.begin(), names.end(), transportTypeName(xport)) !=
           names.end();
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

class TwoProcessTest : public ::testing::Test {
 protected:
    // Starts the target and brings up the initiator; skips (or fails, see
    // above) when either has no `xport`.
    void startPair(TransportType xport) {
        TargetOptions options;
        options.xport = xport;
        ASSERT_NO_FATAL_FAILURE(startTargetWith(options));
        if (IsSkipped()) return;
        startInitiator();
    }

    // Starts the target with `options` (its mpcomm_port, when 0, the
    // pair's port + 1) and sets MPCOMM_TCP_PORT for the initiator's
    // engine, not yet built; skips (or fails, see above) when the target
    // has no `options.xport`.
    void startTargetWith(TargetOptions options) {
        xport_ = options.xport;
        unsetenv("MC_TENT_CONF");
        unsetenv("MPCOMM_REMOTE_TCP_PORT");
        const int port = 18000 + (getpid() % 3000) * 2;  // 18000-23999
        if (options.mpcomm_port == 0) options.mpcomm_port = port + 1;
        std::string why;
        switch (target_process_.start(options, why)) {
            case TargetProcess::Started::kReady:
                break;
            case TargetProcess::Started::kSkipped:
                skipOrFail("target: " + why);
                return;
            case TargetProcess::Started::kFailed:
                FAIL() << "target: " << why;
        }
        target_name_ = target_process_.name();
        target_base_ = target_process_.base();
        setenv("MPCOMM_TCP_PORT", std::to_string(port).c_str(), 1);
    }

    void startInitiator() { startInitiatorWithConfig(onlyTransport(xport_)); }

    // The initiator from `conf` (onlyTransport(xport_) with a test's keys
    // set), its buffer registered and the target's segment opened.
    void startInitiatorWithConfig(std::shared_ptr<Config> conf) {
        engine_ = std::make_unique<TransferEngine>(std::move(conf));
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
        ASSERT_TRUE(target_process_.running());
        target_process_.kill();
    }

    void TearDown() override {
        if (engine_ && local_) {
            engine_->unregisterLocalMemory(local_, kBufferSize);
            engine_->freeLocalMemory(local_);
        }
        engine_.reset();
        // The target, released, must clean up and exit 0 within the bound.
        std::string why;
        if (target_process_.running()) {
            EXPECT_TRUE(target_process_.finish(why)) << why;
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
        // The target's own bytes, not only what a read over the same
        // transport returns (which a copy into a private mapping passes).
        expectTargetHolds(0, kBufferSize, seed);
        std::memset(localBytes(), 0, kBufferSize);
        for (const auto& st : run(reads)) ASSERT_EQ(st.s, COMPLETED);
        for (size_t i = 0; i < kBufferSize; ++i) {
            ASSERT_EQ(localBytes()[i], patternByte(i, seed)) << "byte " << i;
        }
    }

    // Asks the target whether its buffer holds pattern `seed` over
    // [offset, offset + length) (its "check" command).
    void expectTargetHolds(size_t offset, size_t length, uint8_t seed) {
        EXPECT_EQ(target_process_.ask("check " + std::to_string(offset) + " " +
                                      std::to_string(length) + " " +
                                      std::to_string(seed)),
                  "ok");
    }

    TransportType xport_ = UNSPEC;
    TargetProcess target_process_;
    std::string target_name_;
    uint64_t target_base_ = 0;
    std::unique_ptr<TransferEngine> engine_;
    void* local_ = nullptr;
    SegmentID target_ = 0;
};

// `always`, then MPCOMM where this build has it: the transports a
// parameterised two-process suite runs over.
inline std::vector<TransportType> withMpcommIfBuilt(
    std::vector<TransportType> always) {
#ifdef TENT_HAVE_MPCOMM
    always.push_back(MPCOMM);
#endif
    return always;
}

// "tcp", "mpcomm", ...: the test name suffix of a transport parameter.
inline std::string transportParamName(
    const ::testing::TestParamInfo<TransportType>& info) {
    return transportTypeName(info.param);
}

}  // namespace mooncake::tent::testing
