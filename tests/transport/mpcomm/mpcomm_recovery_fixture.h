// The fixture of tent_mpcomm_recovery_test: MPComm peers across a
// cluster's lifetime, with real processes and real signals over the real
// provider (softmpcomm in CI). Targets are TargetProcess children (kit/
// target_process.h) on fixed RPC ports, so that a restart keeps the
// segment name; the initiator engine lives in this process.
//
// Ports: each test derives its own from the pid in 2000-14999: below the
// RPC range (15000-17000), the other suites' ranges (18000-31999) and the
// kernel's ephemeral ports (32768 and up).
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kit/request_builder.h"
#include "kit/target_process.h"
#include "kit/two_process_fixture.h"
#include "kit/wait_until.h"
#include "tent/transport/mpcomm/mpcomm_peer_registry.h"

namespace mooncake::tent::testing {

using Clock = std::chrono::steady_clock;

constexpr int64_t kConnectTimeoutMs = 1500;
constexpr int64_t kCacheTtlMs = 1000;
// Recovery after a restart: descriptor TTL + handshake bound, plus what a
// loaded 2-core CI machine needs to schedule both processes.
constexpr auto kRecoveryBound =
    std::chrono::milliseconds(kCacheTtlMs + kConnectTimeoutMs + 3000);

// Four ports per test (RPC, two target MPComm ports, initiator MPComm), a
// fresh block for each test of this process: a test that abandons a stuck
// handshake leaves its MPComm instance, and its port, to the process.
inline int basePort() {
    static const int process_base = 2000 + (getpid() % 400) * 32;
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    static std::map<std::string, int> index;
    auto it = index.emplace(info ? info->name() : "", int(index.size())).first;
    return process_base + (it->second % 8) * 4;
}

class MpcommRecoveryTest : public ::testing::Test {
 protected:
    void SetUp() override {
        unsetenv("MC_TENT_CONF");
        unsetenv("MPCOMM_REMOTE_TCP_PORT");
        // A stopped peer must not keep a provider call from its bound.
        setenv("SOFTMPCOMM_PROGRESS_TIMEOUT_MS", "1000", 1);
    }

    // A target serving MPComm on `mpcomm_port`, its RPC server on
    // `rpc_port` (0: any).
    void startTarget(TargetProcess& target, int rpc_port, int mpcomm_port) {
        std::string why;
        TargetOptions options;
        options.rpc_port = rpc_port;
        options.mpcomm_port = mpcomm_port;
        ASSERT_EQ(target.start(options, why), TargetProcess::Started::kReady)
            << why;
    }

    void startInitiator(bool preconnect = true,
                        int64_t cache_ttl_ms = kCacheTtlMs) {
        auto conf = onlyTransport(MPCOMM);
        conf->set("transports/mpcomm/connect_timeout_ms", kConnectTimeoutMs);
        conf->set("transports/mpcomm/preconnect", preconnect);
        conf->set("metadata/cache_ttl_ms", cache_ttl_ms);
        setenv("MPCOMM_TCP_PORT", std::to_string(basePort() + 3).c_str(), 1);
        engine_ = std::make_unique<TransferEngine>(conf);
        ASSERT_TRUE(engine_->available());
        ASSERT_TRUE(hasTransport(*engine_, MPCOMM));
        ASSERT_TRUE(engine_->allocateLocalMemory(&local_, kBufferSize).ok());
        ASSERT_TRUE(engine_->registerLocalMemory(local_, kBufferSize).ok());
    }

    // Unregisters, frees and destroys the initiator engine.
    void stopInitiator() {
        if (engine_ && local_) {
            engine_->unregisterLocalMemory(local_, kBufferSize);
            engine_->freeLocalMemory(local_);
        }
        local_ = nullptr;
        engine_.reset();
    }

    // A handshake that teardown abandoned ends once its peer answers or
    // goes away, which each test arranges; the process must not exit under
    // it, since exit destroys the logging statics that thread still uses.
    void TearDown() override {
        stopInitiator();
        EXPECT_TRUE(waitUntil([] {
            return MpcommPeerRegistry::handshakeThreadsAlive() == 0;
        })) << MpcommPeerRegistry::handshakeThreadsAlive()
            << " MPComm handshake thread(s) still running";
    }

    uint8_t* local() { return static_cast<uint8_t*>(local_); }

    Request request(Request::OpCode op, SegmentID target, uint64_t base,
                    size_t offset, size_t length) {
        return makeRequest(op, local() + offset, target, base + offset, length,
                           MPCOMM);
    }

    std::vector<TransferStatus> run(const std::vector<Request>& requests) {
        return runBatch(*engine_, requests);
    }

    // WRITE `seed`'s pattern over the first `length` bytes of the target,
    // READ it back into a cleared buffer; true when both completed and
    // every byte matches.
    bool roundTrip(SegmentID target, uint64_t base, uint8_t seed,
                   size_t length = 1u << 20) {
        for (size_t i = 0; i < length; ++i) local()[i] = patternByte(i, seed);
        if (run({request(Request::WRITE, target, base, 0, length)})[0].s !=
            COMPLETED) {
            return false;
        }
        std::memset(local(), 0, length);
        if (run({request(Request::READ, target, base, 0, length)})[0].s !=
            COMPLETED) {
            return false;
        }
        for (size_t i = 0; i < length; ++i) {
            if (local()[i] != patternByte(i, seed)) {
                ADD_FAILURE() << "byte " << i << " differs after a completed "
                              << "WRITE+READ";
                return false;
            }
        }
        return true;
    }

    // One target on basePort() (MPComm on +1) and an initiator that has
    // opened it as `id`.
    void startOpenedPair(TargetProcess& target, SegmentID& id, bool preconnect,
                         int64_t cache_ttl_ms) {
        ASSERT_NO_FATAL_FAILURE(
            startTarget(target, basePort(), basePort() + 1));
        ASSERT_NO_FATAL_FAILURE(startInitiator(preconnect, cache_ttl_ms));
        ASSERT_TRUE(engine_->openSegment(id, target.name()).ok());
    }

    // Kills an opened target after a good round trip, restarts it under
    // the same segment name with MPComm on basePort() +
    // `restart_port_offset` (1: its own port again), and expects the same
    // initiator to move bytes again within kRecoveryBound.
    void expectRecoveryFromRestart(int restart_port_offset);

    // Round trips until one succeeds (bounded); how long that took.
    Clock::duration recover(SegmentID target, uint64_t base, uint8_t seed) {
        auto started = Clock::now();
        while (!roundTrip(target, base, seed) &&
               Clock::now() - started < kRecoveryBound * 2) {
        }
        return Clock::now() - started;
    }

    std::unique_ptr<TransferEngine> engine_;
    void* local_ = nullptr;
};

}  // namespace mooncake::tent::testing
