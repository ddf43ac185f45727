// tent_mpcomm_recovery_test, silent peers: a stopped peer fails only its
// own tasks within its bound, and a handshake that never answers (a
// stopped peer, a listener that accepts and stays silent) fails within the
// transport's bound and does not hold up the engine's teardown.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <thread>

#include "kit/log_capture.h"
#include "kit/scoped_env.h"
#include "kit/wait_until.h"
#include "mpcomm_recovery_fixture.h"
#include "tent/runtime/control_plane.h"

namespace mooncake::tent::testing {
namespace {

TEST_F(MpcommRecoveryTest, AStoppedPeerFailsOnlyItsTasksMidTransfer) {
    TargetProcess a, b;
    ASSERT_NO_FATAL_FAILURE(startTarget(a, basePort(), basePort() + 1));
    ASSERT_NO_FATAL_FAILURE(startTarget(b, 0, basePort() + 2));
    const uint64_t base_a = a.base(), base_b = b.base();
    ASSERT_NO_FATAL_FAILURE(startInitiator());
    SegmentID id_a = 0, id_b = 0;
    ASSERT_TRUE(engine_->openSegment(id_a, a.name()).ok());
    ASSERT_TRUE(engine_->openSegment(id_b, b.name()).ok());
    ASSERT_TRUE(roundTrip(id_a, base_a, 1));  // both connected
    ASSERT_TRUE(roundTrip(id_b, base_b, 2));

    // 64 WRITEs of 4 MiB to `a` (256 MiB) and one to `b` in one batch; `a`
    // is stopped once its first task has completed, so bytes were moving
    // to it and most of its tasks are still to come when it stops.
    constexpr int kTasksA = 64;
    std::vector<Request> requests;
    for (int i = 0; i < kTasksA; ++i) {
        requests.push_back(
            request(Request::WRITE, id_a, base_a, 0, kBufferSize));
    }
    requests.push_back(request(Request::WRITE, id_b, base_b, 0, 1u << 20));
    BatchID batch = engine_->allocateBatch(requests.size());
    ASSERT_NE(batch, 0u);
    ASSERT_TRUE(engine_->submitTransfer(batch, requests).ok());
    auto state = [&](int task) {
        TransferStatus st;
        EXPECT_TRUE(engine_->getTransferStatus(batch, task, st).ok());
        return st.s;
    };
    const bool started = waitUntil([&] {
        for (int i = 0; i < kTasksA; ++i) {
            if (state(i) == COMPLETED) return true;
        }
        return false;
    });
    EXPECT_TRUE(a.stop()) << "the peer was not seen stopped";
    auto stopped = Clock::now();
    EXPECT_TRUE(started) << "no WRITE to the peer completed before the stop";
    const bool settled = waitUntil(
        [&] {
            for (size_t i = 0; i < requests.size(); ++i) {
                if (state(i) == PENDING || state(i) == INITIAL) return false;
            }
            return true;
        },
        std::chrono::duration_cast<std::chrono::milliseconds>(kDeadline));
    auto took = Clock::now() - stopped;
    EXPECT_TRUE(settled) << "tasks still pending after the stop";
    int completed = 0, failed = 0;
    for (int i = 0; i < kTasksA; ++i) {
        completed += state(i) == COMPLETED;
        failed += state(i) == FAILED;
    }
    // Some of the stopped peer's tasks completed before the stop, the rest
    // failed: nothing else, and the other peer's task was not held up.
    EXPECT_GE(completed, 1);
    EXPECT_GE(failed, 1) << "every WRITE completed before the stop took";
    EXPECT_EQ(completed + failed, kTasksA);
    EXPECT_EQ(state(kTasksA), COMPLETED);
    // softmpcomm's no-progress bound (1000 ms here) plus scheduling.
    EXPECT_LT(took, std::chrono::milliseconds(1000 + 4000));
    EXPECT_TRUE(engine_->freeBatch(batch).ok());
    EXPECT_TRUE(a.resume());
}

// What a handshake that never answers may cost: the WRITE fails within the
// transport's connect bound, and so does the engine's teardown after it.
void expectFailsWithinTheConnectBound(const TransferStatus& state,
                                      Clock::duration took) {
    EXPECT_EQ(state.s, FAILED);
    EXPECT_GE(took, std::chrono::milliseconds(kConnectTimeoutMs));
    EXPECT_LT(took, std::chrono::milliseconds(kConnectTimeoutMs + 3000));
}

TEST_F(MpcommRecoveryTest, AStoppedPeersHandshakeIsBoundedAndSoIsTeardown) {
    // The provider's own handshake bound is far above ours, so it is the
    // transport's bound that must fire.
    ScopedEnv handshake("SOFTMPCOMM_HANDSHAKE_TIMEOUT_MS", "30000");
    TargetProcess a, b;
    ASSERT_NO_FATAL_FAILURE(startTarget(a, basePort(), basePort() + 1));
    ASSERT_NO_FATAL_FAILURE(startTarget(b, 0, basePort() + 2));
    ASSERT_NO_FATAL_FAILURE(
        startInitiator(/*preconnect=*/false, /*cache_ttl_ms=*/60000));
    SegmentID id_a = 0, id_b = 0;
    ASSERT_TRUE(engine_->openSegment(id_a, a.name()).ok());
    ASSERT_TRUE(engine_->openSegment(id_b, b.name()).ok());

    ASSERT_TRUE(a.stop());
    LogCapture logs;
    auto started = Clock::now();
    auto states = run({request(Request::WRITE, id_a, a.base(), 0, 4096),
                       request(Request::WRITE, id_b, b.base(), 4096, 4096)});
    expectFailsWithinTheConnectBound(states[0], Clock::now() - started);
    EXPECT_EQ(states[1].s, COMPLETED);
    EXPECT_EQ(logs.countContaining("did not finish within "
                                   "transports/mpcomm/connect_timeout_ms=1500"),
              1);

    // The handshake with the stopped peer is still inside softmpcomm.
    started = Clock::now();
    stopInitiator();
    EXPECT_LT(Clock::now() - started,
              std::chrono::milliseconds(kConnectTimeoutMs + 3000));
    EXPECT_EQ(logs.countContaining("uninstall abandons 1 MPComm handshake(s)"),
              1);
    EXPECT_TRUE(a.resume());
}

// A listener that accepts and never answers, advertised by a descriptor
// this process serves itself.
TEST_F(MpcommRecoveryTest, AListenerThatNeverAnswersFailsWithinTheBound) {
    ScopedEnv handshake("SOFTMPCOMM_HANDSHAKE_TIMEOUT_MS", "30000");
    int silent = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(bind(silent, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)),
              0);
    ASSERT_EQ(listen(silent, 8), 0);
    socklen_t len = sizeof(addr);
    getsockname(silent, reinterpret_cast<sockaddr*>(&addr), &len);
    std::vector<int> accepted;
    std::thread acceptor([&] {
        // Bounded, so a test that fails early cannot hang on the join.
        pollfd pfd{silent, POLLIN, 0};
        if (poll(&pfd, 1, 20000) != 1) return;
        int fd = accept(silent, nullptr, nullptr);
        if (fd >= 0) accepted.push_back(fd);
    });

    auto fake = std::make_shared<SegmentManager>("", nullptr);
    ControlService service(fake);
    ASSERT_TRUE(service.start(0).ok());
    const std::string fake_name = "127.0.0.1:" + std::to_string(service.port());
    ASSERT_TRUE(fake->updateLocal([&](SegmentDesc& desc) {
                        desc.name = fake_name;
                        BufferDesc b;
                        b.addr = 0x10000;
                        b.length = 0x10000;
                        b.transports = {MPCOMM};
                        desc.getMemory().buffers.push_back(b);
                        desc.getMemory().transport_attrs[MPCOMM] =
                            "v1:127.0.0.1:" +
                            std::to_string(ntohs(addr.sin_port));
                        return Status::OK();
                    })
                    .ok());

    ASSERT_NO_FATAL_FAILURE(startInitiator(/*preconnect=*/false));
    SegmentID id = 0;
    ASSERT_TRUE(engine_->openSegment(id, fake_name).ok());
    auto started = Clock::now();
    auto states = run({request(Request::WRITE, id, 0x10000, 0, 4096)});
    expectFailsWithinTheConnectBound(states[0], Clock::now() - started);
    started = Clock::now();
    stopInitiator();
    EXPECT_LT(Clock::now() - started,
              std::chrono::milliseconds(kConnectTimeoutMs + 3000));
    acceptor.join();
    for (int fd : accepted) close(fd);
    close(silent);
}

}  // namespace
}  // namespace mooncake::tent::testing
