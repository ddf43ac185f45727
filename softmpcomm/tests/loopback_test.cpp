// Two MPComm instances in one process exchanging bytes over real sockets.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "mpcomm.h"
#include "test_util.h"

namespace {

using namespace mpcomm;
using mpcomm_test::finish;
using mpcomm_test::initOnFreePort;
using mpcomm_test::pattern;
using mpcomm_test::ScopedEnv;

constexpr size_t kGuard = 4096;
constexpr uint8_t kGuardByte = 0xEE;

// "target" publishes `window` bytes framed by unpublished (but registered)
// guard bytes; "initiator" has registered source and sink buffers.
class Loopback : public ::testing::Test {
 protected:
    static constexpr size_t kWindow = 8u << 20;

    void SetUp() override { start("r0,r1"); }

    void start(const std::string& devices) {
        target_ = std::make_unique<MPComm>();
        initiator_ = std::make_unique<MPComm>();
        target_port_ = initOnFreePort(*target_, "target", devices);
        ASSERT_GT(target_port_, 0);
        ASSERT_GT(initOnFreePort(*initiator_, "initiator", devices), 0);
        ASSERT_EQ(target_->startAcceptThread(), MPCOMM_SUCCESS);
        ASSERT_EQ(initiator_->startAcceptThread(), MPCOMM_SUCCESS);

        arena_.assign(kGuard + kWindow + kGuard, kGuardByte);
        std::fill(window(), window() + kWindow, 0);
        ASSERT_EQ(target_->registerMemory(arena_.data(), arena_.size()),
                  MPCOMM_SUCCESS);
        ASSERT_EQ(target_->publishBuffer(window(), kWindow, 1), MPCOMM_SUCCESS);

        source_ = pattern(kWindow, 7);
        sink_.assign(kWindow, 0);
        ASSERT_EQ(initiator_->registerMemory(source_.data(), source_.size()),
                  MPCOMM_SUCCESS);
        ASSERT_EQ(initiator_->registerMemory(sink_.data(), sink_.size()),
                  MPCOMM_SUCCESS);
    }

    void connectAndQuery() {
        ASSERT_EQ(initiator_->connect("target", "127.0.0.1", target_port_),
                  MPCOMM_SUCCESS);
        ASSERT_EQ(query(), MPCOMM_SUCCESS);
    }

    int query() {
        return initiator_->queryRemoteBuffer("target", "127.0.0.1",
                                             target_port_, info_);
    }

    uint8_t* window() { return arena_.data() + kGuard; }
    uintptr_t remote(size_t offset = 0) {
        return reinterpret_cast<uintptr_t>(window()) + offset;
    }
    uintptr_t src(size_t offset = 0) {
        return reinterpret_cast<uintptr_t>(source_.data()) + offset;
    }
    uintptr_t dst(size_t offset = 0) {
        return reinterpret_cast<uintptr_t>(sink_.data()) + offset;
    }
    bool guardsIntact() const {
        auto intact = [](const uint8_t* p) {
            return std::all_of(p, p + kGuard,
                               [](uint8_t b) { return b == kGuardByte; });
        };
        return intact(arena_.data()) &&
               intact(arena_.data() + kGuard + kWindow);
    }
    TransferResult put(size_t src_off, size_t remote_off, size_t length) {
        return finish(*initiator_,
                      initiator_->putAsync(src(src_off), "target",
                                           remote(remote_off), length));
    }
    TransferResult get(size_t dst_off, size_t remote_off, size_t length) {
        return finish(*initiator_,
                      initiator_->getAsync(dst(dst_off), "target",
                                           remote(remote_off), length));
    }

    // Declared first so they outlive both instances: a target may still be
    // placing bytes of an abandoned put until its shutdown joins its threads.
    std::vector<uint8_t> arena_;
    std::vector<uint8_t> source_;
    std::vector<uint8_t> sink_;
    std::unique_ptr<MPComm> target_;
    std::unique_ptr<MPComm> initiator_;
    int target_port_ = 0;
    RemoteBufferInfo info_;
};

// Run with softmpcomm's default slots per data connection and with one:
// then of an 8 MiB transfer's 32 slices, four are on connections and the
// rest wait for a slot (peer_link.h).
class SlicedLoopback : public Loopback,
                       public ::testing::WithParamInterface<const char*> {
 protected:
    // 8 MiB at 256 KiB per slice is 32 slices over 2 rails x 2 QPs.
    ScopedEnv slice_{"MPCOMM_MAX_RDMA_TRANSFER_SIZE", "262144"};
    ScopedEnv qps_{"MPCOMM_QPS_PER_CONNECTION", "2"};
    ScopedEnv filter_{"MPCOMM_NIC_FILTER", nullptr};
    ScopedEnv slots_{"MPCOMM_MAX_OUTSTANDING_PER_QP", GetParam()};

    void expectShutdownFailsWaitingSlices(bool put);
};

// Names the instances of the suites run with both slot settings.
std::string slotsName(const ::testing::TestParamInfo<const char*>& info) {
    return std::string(info.param ? "One" : "Default") + "SlotPerQp";
}

INSTANTIATE_TEST_SUITE_P(Slots, SlicedLoopback, ::testing::Values(nullptr, "1"),
                         slotsName);

// Eight transfers of 32 slices each, at most 8 slices on connections and
// the rest waiting when the target goes; the last transfer cannot have
// finished before the shutdown that its slices queued behind. For writes
// the readers hand freed slots to waiting PUT slices and send them
// themselves, so the target's end also meets some of those sends half
// done.
void SlicedLoopback::expectShutdownFailsWaitingSlices(bool put) {
    connectAndQuery();
    std::vector<TransferHandle> handles;
    for (int i = 0; i < 8; ++i)
        handles.push_back(
            put ? initiator_->putAsync(src(), "target", remote(), kWindow)
                : initiator_->getAsync(dst(), "target", remote(), kWindow));
    target_->shutdown();
    int lost = 0;
    for (TransferHandle h : handles) {
        int code = finish(*initiator_, h).error_code;
        EXPECT_TRUE(code == MPCOMM_SUCCESS ||
                    code == MPCOMM_ERR_CONNECTION_LOST)
            << code;
        lost += code == MPCOMM_ERR_CONNECTION_LOST;
    }
    EXPECT_GT(lost, 0) << (put ? "writes" : "reads");
}

TEST_P(SlicedLoopback, PeerShutdownFailsWaitingSlicesToo) {
    expectShutdownFailsWaitingSlices(false);
}

TEST_P(SlicedLoopback, PeerShutdownFailsWaitingPutSlicesToo) {
    expectShutdownFailsWaitingSlices(true);
}

TEST_P(SlicedLoopback, QueryReportsThePublishedBufferWithOneKeyPerRail) {
    connectAndQuery();
    EXPECT_EQ(info_.host_id, "target");
    ASSERT_EQ(info_.entries.size(), 1u);
    EXPECT_EQ(info_.entries[0].addr, remote());
    EXPECT_EQ(info_.entries[0].length, kWindow);
    EXPECT_EQ(info_.entries[0].numa_node, 1);
    EXPECT_EQ(info_.entries[0].rkeys.size(), 2u);
}

TEST_P(SlicedLoopback, PutThenGetIsByteExact) {
    connectAndQuery();
    // An odd length leaves a short last slice.
    const size_t length = kWindow - 3;
    TransferResult wrote = put(0, 0, length);
    EXPECT_EQ(wrote.error_code, MPCOMM_SUCCESS);
    EXPECT_EQ(wrote.bytes_transferred, length);
    EXPECT_EQ(std::memcmp(window(), source_.data(), length), 0);
    EXPECT_EQ(window()[length], 0);
    EXPECT_TRUE(guardsIntact());

    TransferResult read = get(0, 0, length);
    EXPECT_EQ(read.error_code, MPCOMM_SUCCESS);
    EXPECT_EQ(read.bytes_transferred, length);
    EXPECT_EQ(std::memcmp(sink_.data(), source_.data(), length), 0);
    EXPECT_EQ(sink_[length], 0);
}

TEST_P(SlicedLoopback, ConcurrentThreadsEachMoveTheirOwnRange) {
    connectAndQuery();
    constexpr int kThreads = 8;
    const size_t part = kWindow / kThreads;
    std::vector<int> put_codes(kThreads, -100), get_codes(kThreads, -100);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
        threads.emplace_back([&, t] {
            put_codes[t] = put(t * part, t * part, part).error_code;
            get_codes[t] = get(t * part, t * part, part).error_code;
        });
    }
    for (auto& thread : threads) thread.join();
    for (int t = 0; t < kThreads; ++t) {
        EXPECT_EQ(put_codes[t], MPCOMM_SUCCESS) << t;
        EXPECT_EQ(get_codes[t], MPCOMM_SUCCESS) << t;
    }
    EXPECT_EQ(std::memcmp(sink_.data(), source_.data(), kWindow), 0);
    EXPECT_TRUE(guardsIntact());
}

// A send buffer the size of one slice: with the put budget that follows
// from it (peer_link.h) each connection carries one PUT slice at a time,
// whatever its slots, and the others wait for room until the readers start
// them.
class BudgetedLoopback : public SlicedLoopback {
 protected:
    ScopedEnv send_buffer_{"SOFTMPCOMM_SEND_BUFFER_BYTES", "262144"};
};

INSTANTIATE_TEST_SUITE_P(Slots, BudgetedLoopback,
                         ::testing::Values(nullptr, "1"), slotsName);

TEST_P(BudgetedLoopback, PutsWaitingForTheBudgetArriveByteExact) {
    connectAndQuery();
    // Eight 1 MiB PUTs of four slices each, posted at once: four slices on
    // connections, 28 waiting.
    constexpr int kTransfers = 8;
    const size_t part = kWindow / kTransfers;
    std::vector<TransferHandle> handles;
    for (int i = 0; i < kTransfers; ++i)
        handles.push_back(initiator_->putAsync(src(i * part), "target",
                                               remote(i * part), part));
    for (TransferHandle h : handles) {
        TransferResult done = finish(*initiator_, h);
        EXPECT_EQ(done.error_code, MPCOMM_SUCCESS);
        EXPECT_EQ(done.bytes_transferred, part);
    }
    EXPECT_EQ(std::memcmp(window(), source_.data(), kWindow), 0);
    EXPECT_TRUE(guardsIntact());
}

TEST_F(Loopback, UnknownHostFails) {
    connectAndQuery();
    EXPECT_EQ(initiator_->putAsync(src(), "stranger", remote(), 8) ==
                  INVALID_TRANSFER_HANDLE,
              false);
    EXPECT_EQ(put(0, 0, 0).error_code, MPCOMM_ERR_INVALID_ARG);
    TransferResult r = finish(
        *initiator_, initiator_->getAsync(dst(), "stranger", remote(), 8));
    EXPECT_EQ(r.error_code, MPCOMM_ERR_UNKNOWN_HOST);
    EXPECT_EQ(r.bytes_transferred, 0u);
}

TEST_F(Loopback, RangeRunningPastTheBufferIsRefusedBeforeAnyByteMoves) {
    connectAndQuery();
    // One slice (default 1 GiB limit): the target refuses it whole, so even
    // the part inside the window stays untouched.
    TransferResult r = put(0, kWindow - 4096, 8192);
    EXPECT_EQ(r.error_code, MPCOMM_ERR_REMOTE_ACCESS);
    EXPECT_EQ(r.bytes_transferred, 8192u);  // posted, then refused
    EXPECT_TRUE(std::all_of(window() + kWindow - 4096, window() + kWindow,
                            [](uint8_t b) { return b == 0; }));
    EXPECT_TRUE(guardsIntact());

    std::fill(sink_.begin(), sink_.end(), 0x11);
    EXPECT_EQ(get(0, kWindow - 1, 2).error_code, MPCOMM_ERR_REMOTE_ACCESS);
    EXPECT_EQ(sink_[0], 0x11);
    // Starting in the guard: no queried entry covers it.
    TransferResult before = finish(
        *initiator_, initiator_->putAsync(src(), "target", remote() - 16, 8));
    EXPECT_EQ(before.error_code, MPCOMM_ERR_REMOTE_ACCESS);
    EXPECT_EQ(before.bytes_transferred, 0u);
    EXPECT_TRUE(guardsIntact());
    // The connection stays usable after refusals.
    EXPECT_EQ(put(0, 0, 4096).error_code, MPCOMM_SUCCESS);
}

TEST_F(Loopback, UnpublishedBufferRefusesAccessUntilRepublishedAndRequeried) {
    connectAndQuery();
    target_->unpublishBuffer(window());
    EXPECT_EQ(put(0, 0, 4096).error_code, MPCOMM_ERR_REMOTE_ACCESS);
    EXPECT_EQ(get(0, 0, 4096).error_code, MPCOMM_ERR_REMOTE_ACCESS);
    EXPECT_TRUE(std::all_of(window(), window() + 4096,
                            [](uint8_t b) { return b == 0; }));
    // Republishing mints new keys: the stale ones stay refused.
    ASSERT_EQ(target_->publishBuffer(window(), kWindow, 0), MPCOMM_SUCCESS);
    EXPECT_EQ(put(0, 0, 4096).error_code, MPCOMM_ERR_REMOTE_ACCESS);
    ASSERT_EQ(query(), MPCOMM_SUCCESS);
    EXPECT_EQ(put(0, 0, 4096).error_code, MPCOMM_SUCCESS);
    EXPECT_EQ(std::memcmp(window(), source_.data(), 4096), 0);
}

TEST_F(Loopback, UnpublishStopsAccessesInFlightBeforeItReturns) {
    // Payloads move straight between sockets and the published window, so
    // unpublishBuffer() must wait out every socket call inside it: once it
    // returns, nothing writes the window and nothing read from it reaches a
    // GET that then succeeds.
    connectAndQuery();
    constexpr uint8_t kAfter = 0x5A;
    // So that kAfter in the sink can only have come from after the return.
    std::fill(source_.begin(), source_.end(), 0x11);
    for (int round = 0; round < 4; ++round) {
        std::fill(sink_.begin(), sink_.end(), 0);
        std::vector<TransferHandle> puts;
        for (int i = 0; i < 2; ++i)
            puts.push_back(
                initiator_->putAsync(src(), "target", remote(), kWindow));
        TransferHandle get =
            initiator_->getAsync(dst(), "target", remote(), kWindow);
        target_->unpublishBuffer(window());
        std::fill(window(), window() + kWindow, kAfter);
        for (TransferHandle put : puts) {
            int rc = finish(*initiator_, put).error_code;
            EXPECT_TRUE(rc == MPCOMM_SUCCESS || rc == MPCOMM_ERR_REMOTE_ACCESS)
                << rc;
        }
        TransferResult got = finish(*initiator_, get);
        EXPECT_TRUE(std::all_of(window(), window() + kWindow,
                                [](uint8_t b) { return b == kAfter; }))
            << "round " << round;
        if (got.error_code == MPCOMM_SUCCESS)
            EXPECT_TRUE(std::none_of(sink_.begin(), sink_.end(),
                                     [](uint8_t b) { return b == kAfter; }));
        EXPECT_TRUE(guardsIntact());
        std::fill(window(), window() + kWindow, 0);
        ASSERT_EQ(target_->publishBuffer(window(), kWindow, 0), MPCOMM_SUCCESS);
        ASSERT_EQ(query(), MPCOMM_SUCCESS);
    }
    EXPECT_EQ(put(0, 0, kWindow).error_code, MPCOMM_SUCCESS);
    EXPECT_EQ(std::memcmp(window(), source_.data(), kWindow), 0);
}

TEST_F(Loopback, UnregisteringPublishedMemoryWithdrawsIt) {
    connectAndQuery();
    target_->unregisterMemory(arena_.data());
    EXPECT_EQ(put(0, 0, 64).error_code, MPCOMM_ERR_REMOTE_ACCESS);
    ASSERT_EQ(query(), MPCOMM_SUCCESS);
    EXPECT_TRUE(info_.entries.empty());
}

TEST_F(Loopback, SecondConnectReplacesTheRecordAndDropsItsKeys) {
    connectAndQuery();
    ASSERT_EQ(put(0, 0, 1024).error_code, MPCOMM_SUCCESS);
    ASSERT_EQ(initiator_->connect("target", "127.0.0.1", target_port_),
              MPCOMM_SUCCESS);
    TransferResult no_keys = put(0, 0, 1024);
    EXPECT_EQ(no_keys.error_code, MPCOMM_ERR_REMOTE_ACCESS);
    EXPECT_EQ(no_keys.bytes_transferred, 0u);
    ASSERT_EQ(query(), MPCOMM_SUCCESS);
    EXPECT_EQ(get(0, 0, 1024).error_code, MPCOMM_SUCCESS);
    EXPECT_EQ(std::memcmp(sink_.data(), source_.data(), 1024), 0);
}

TEST_F(Loopback, ConnectChecksTheAnnouncedHostId) {
    EXPECT_EQ(initiator_->connect("someone-else", "127.0.0.1", target_port_),
              MPCOMM_ERR_CONNECT);
    EXPECT_EQ(initiator_->queryRemoteBuffer("target", "127.0.0.1", target_port_,
                                            info_),
              MPCOMM_ERR_UNKNOWN_HOST);
    EXPECT_EQ(initiator_->connect("target", "127.0.0.1", 0),
              MPCOMM_ERR_INVALID_ARG);
}

TEST_F(Loopback, ConnectToAPortNobodyListensOnFails) {
    MPComm gone;
    int port = initOnFreePort(gone, "gone", "");
    ASSERT_GT(port, 0);
    gone.shutdown();
    EXPECT_EQ(initiator_->connect("gone", "127.0.0.1", port),
              MPCOMM_ERR_CONNECT);
}

TEST_F(Loopback, StoppingTheAcceptThreadKeepsEstablishedConnections) {
    connectAndQuery();
    target_->stopAcceptThread();
    target_->stopAcceptThread();
    EXPECT_EQ(put(0, 0, 4096).error_code, MPCOMM_SUCCESS);
    ASSERT_EQ(target_->startAcceptThread(), MPCOMM_SUCCESS);
    EXPECT_EQ(initiator_->connect("target", "127.0.0.1", target_port_),
              MPCOMM_SUCCESS);
}

TEST_P(SlicedLoopback, PeerShutdownFailsOutstandingTransfersWithoutHanging) {
    connectAndQuery();
    // Sixteen disjoint 512 KiB reads (two slices each) in flight.
    const size_t part = kWindow / 16;
    std::vector<TransferHandle> handles;
    for (size_t i = 0; i < 16; ++i)
        handles.push_back(initiator_->getAsync(dst(i * part), "target",
                                               remote(i * part), part));
    target_->shutdown();
    TransferHandle after =
        initiator_->putAsync(src(), "target", remote(), kWindow);
    for (TransferHandle h : handles) {
        int code = finish(*initiator_, h).error_code;
        EXPECT_TRUE(code == MPCOMM_SUCCESS ||
                    code == MPCOMM_ERR_CONNECTION_LOST)
            << code;
    }
    TransferResult late = finish(*initiator_, after);
    EXPECT_EQ(late.error_code, MPCOMM_ERR_CONNECTION_LOST);
    target_->shutdown();
}

TEST_P(SlicedLoopback, LocalShutdownFailsOutstandingTransfersAndIsIdempotent) {
    connectAndQuery();
    std::vector<TransferHandle> handles;
    for (int i = 0; i < 8; ++i)
        handles.push_back(
            initiator_->putAsync(src(), "target", remote(), kWindow));
    initiator_->shutdown();
    initiator_->shutdown();
    for (TransferHandle h : handles) {
        // Complete already: shutdown joined the readers that fail slices.
        EXPECT_TRUE(initiator_->isTransferComplete(h));
        int code = finish(*initiator_, h).error_code;
        EXPECT_TRUE(code == MPCOMM_SUCCESS ||
                    code == MPCOMM_ERR_CONNECTION_LOST)
            << code;
    }
    EXPECT_EQ(put(0, 0, 8).error_code, MPCOMM_ERR_NOT_INITIALIZED);
    initiator_->stopAcceptThread();
}

}  // namespace
