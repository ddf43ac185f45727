// The TCP transport's target side against hostile peers: oversized,
// truncated and garbage frames, a peer trickling one byte at a time, and a
// flood of idle connections, each while a well-behaved initiator keeps
// writing and reading back byte-exact; the process's resident memory stays
// bounded throughout.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kit/hostile_peer_support.h"
#include "kit/log_capture.h"
#include "kit/wait_until.h"
#include "net/stream_server.h"
#include "tcp_test_support.h"
#include "tent/transport/tcp/tcp_transport.h"

namespace mooncake::tent::testing {
namespace {

constexpr int kIdleMs = 300;
constexpr int kFrameMs = 300;
constexpr int kMaxConnections = 32;
constexpr size_t kTargetBytes = 8 << 20;
// The well-behaved client uses the first MiB; hostile frames aim at the
// upper half, so a stray byte landing there could not fake a pass.
constexpr size_t kPiece = 256 << 10;
constexpr uint64_t kHostileOffset = 4 << 20;
constexpr size_t kTrickleBytes = 64;
// What the truncated WRITEs send before giving up: stored as it arrives,
// since a WRITE within a registered buffer lands straight in that memory.
constexpr size_t kTruncatedBytes = 1000;
// Every hostile payload is non-zero (the memory starts zeroed), so a byte
// that lands where it must not is seen.
constexpr char kTruncatedByte = 'h', kTrickleByte = 't', kRefusedByte = 'r',
               kOversizedByte = 'o';

class TcpHostileTest : public ::testing::Test {
 protected:
    void SetUp() override {
        target_mem_.assign(kTargetBytes, 0);
        auto conf = std::make_shared<Config>();
        conf->set("transports/tcp/idle_timeout_ms", kIdleMs);
        conf->set("transports/tcp/frame_timeout_ms", kFrameMs);
        conf->set("transports/tcp/max_connections", kMaxConnections);
        target_manager_ =
            std::make_shared<SegmentManager>("127.0.0.1:1", nullptr);
        std::string name = "127.0.0.1:1";
        ASSERT_TRUE(
            target_
                .install(name,
                         std::make_shared<ControlService>(target_manager_),
                         std::make_shared<Topology>(), conf)
                .ok());
        base_ = reinterpret_cast<uint64_t>(target_mem_.data());
        BufferDesc desc;
        desc.addr = base_;
        desc.length = kTargetBytes;
        ASSERT_TRUE(target_.addMemoryBuffer(desc, MemoryOptions()).ok());

        auto init_conf = std::make_shared<Config>();
        init_conf->set("transports/tcp/workers", 1);
        init_conf->set("transports/tcp/timeout_ms", kHostileBoundMs);
        init_manager_ = std::make_shared<SegmentManager>(
            "127.0.0.1:2",
            DescriptorFetcher::fixedEndpoint(TCP, target_.endpoint()));
        name = "127.0.0.1:2";
        ASSERT_TRUE(
            initiator_
                .install(name, std::make_shared<ControlService>(init_manager_),
                         std::make_shared<Topology>(), init_conf)
                .ok());
        ASSERT_TRUE(init_manager_->openRemote(target_id_, "target:1").ok());

        // The client's buffers live as long as the test: allocated per
        // round, freed ones pile up in ASan's quarantine (256 MiB) and the
        // VmRSS check below would measure how many rounds ran.
        client_src_.assign(kPiece, 0);
        client_back_.assign(kPiece, 0);
        rss_before_ = residentBytes();
        client_ = std::make_unique<WellBehavedClient>(
            [this](uint64_t round) { return writeAndReadBack(round); });
        ASSERT_TRUE(client_->waitForMore(3));
    }

    void TearDown() override {
        expectWellBehavedClientUnharmed(client_, rss_before_);
        // Joins every server thread, so the memory can be read here.
        initiator_.uninstall();
        target_.uninstall();
        // Exactly what may land in the upper half: a prefix of the
        // truncated WRITEs' bytes at its start, a prefix of the trickler's
        // bytes in its own last 64 bytes, zeros everywhere else. Refused
        // and oversized frames store nothing.
        const char* upper = target_mem_.data() + kHostileOffset;
        const char* trickle_at =
            target_mem_.data() + kTargetBytes - kTrickleBytes;
        expectPrefixThenZeros(upper, kTruncatedBytes, kTruncatedByte,
                              truncated_may_land_, "truncated WRITE");
        expectPrefixThenZeros(trickle_at, kTrickleBytes, kTrickleByte,
                              trickled_may_land_, "trickler");
        const char* rest = upper + kTruncatedBytes;
        EXPECT_EQ(std::count(rest, trickle_at, 0), trickle_at - rest)
            << "hostile bytes landed between the truncated WRITE's bytes "
               "and the trickler's";
    }

    // [at, at + n) holds `byte` repeated k times, k <= may_land, then zeros.
    static void expectPrefixThenZeros(const char* at, size_t n, char byte,
                                      size_t may_land, const char* who) {
        size_t k = 0;
        while (k < n && at[k] == byte) ++k;
        EXPECT_LE(k, may_land) << who << ": " << k << " bytes landed";
        EXPECT_EQ(static_cast<size_t>(std::count(at + k, at + n, 0)), n - k)
            << who << ": after " << k << " of its bytes, something else "
            << "landed";
    }

    // One round of the well-behaved initiator: WRITE a piece, READ it back.
    std::string writeAndReadBack(uint64_t round) {
        std::vector<char>& src = client_src_;
        std::vector<char>& back = client_back_;
        std::fill(back.begin(), back.end(), 0);
        for (size_t i = 0; i < kPiece; ++i) {
            src[i] = static_cast<char>((i * 131 + round) ^ (i >> 9));
        }
        const uint64_t at = base_ + (round % 4) * kPiece;
        for (auto [op, local] : {std::pair{Request::WRITE, src.data()},
                                 std::pair{Request::READ, back.data()}}) {
            Transport::SubBatchRef batch = nullptr;
            initiator_.allocateSubBatch(batch, 1);
            initiator_.submitTransferTasks(
                batch, {testing::requestTo(target_id_, op, local, at, kPiece)});
            TransferStatus st;
            net::Deadline deadline = net::deadlineIn(kHostileBoundMs);
            do {
                initiator_.getTransferStatus(batch, 0, st);
                std::this_thread::yield();
            } while (st.s == PENDING && net::Clock::now() < deadline);
            initiator_.freeSubBatch(batch);
            if (st.s != COMPLETED) {
                return "round " + std::to_string(round) + ": " +
                       (op == Request::WRITE ? "WRITE" : "READ") +
                       " ended in state " + std::to_string(st.s);
            }
        }
        return back == src
                   ? std::string()
                   : "round " + std::to_string(round) + ": read-back differs";
    }

    uint16_t port() const { return target_.listenPort(); }
    uint64_t hostileAddr() const { return base_ + kHostileOffset; }

    std::vector<char> target_mem_;
    // Used only by the client's thread, in writeAndReadBack().
    std::vector<char> client_src_, client_back_;
    uint64_t base_ = 0;
    TcpTransport target_, initiator_;
    std::shared_ptr<SegmentManager> target_manager_, init_manager_;
    SegmentID target_id_ = 0;
    uint64_t rss_before_ = 0;
    std::unique_ptr<WellBehavedClient> client_;
    // How many hostile bytes a test allows to land (see TearDown).
    size_t truncated_may_land_ = 0, trickled_may_land_ = 0;
};

TEST_F(TcpHostileTest, OversizedFramesAreClosedAtOnceWithoutAllocating) {
    LogCapture log;
    // Above the 16 MiB frame cap: malformed, closed at once (long before
    // the frame deadline) and logged as such; the payload that follows is
    // never read, let alone stored.
    for (uint64_t len : {(16ull << 20) + 1, 1ull << 40, ~0ull}) {
        int fd = rawConnect(port());
        auto sent = net::Clock::now();
        ASSERT_TRUE(
            rawSend(fd, tcpHeader(kTcpMagic, kTcpWrite, hostileAddr(), len) +
                            std::string(4096, kOversizedByte)));
        bool closed = false;
        drainUntilClosed(fd, closed);
        auto took = net::Clock::now() - sent;
        EXPECT_TRUE(closed) << len;
        EXPECT_LT(took, std::chrono::milliseconds(kFrameMs))
            << len << ": closed after "
            << std::chrono::duration_cast<std::chrono::milliseconds>(took)
                   .count()
            << " ms";
        ::close(fd);
        const std::string why = "closing the connection: request length " +
                                std::to_string(len) +
                                " exceeds the frame cap 16777216";
        EXPECT_TRUE(testing::waitUntil([&] {
            return log.countContaining(why) == 1;
        })) << why;
    }
    // Within the cap but past the registered buffer's end, or not
    // registered at all: refused, its payload drained, never stored. The
    // rest of the payload never comes, so the frame deadline ends them.
    std::vector<int> held;
    for (uint64_t addr : {hostileAddr(), uint64_t{0x1000}}) {
        int fd = rawConnect(port());
        ASSERT_TRUE(
            rawSend(fd, tcpHeader(kTcpMagic, kTcpWrite, addr, 16ull << 20) +
                            std::string(4096, kRefusedByte)));
        held.push_back(fd);
    }
    ASSERT_TRUE(testing::waitUntil([&] {
        return log.countContaining("refused WRITE of 16777216 bytes") == 2;
    }));
    // Sampled while the server still holds both, draining their payloads:
    // a 16 MiB buffer for each would show here.
    const uint64_t rss_held = residentBytes();
    EXPECT_LT(rss_held, rss_before_ + kRssSlackBytes)
        << "VmRSS grew from " << rss_before_ << " to " << rss_held
        << " while two 16 MiB WRITEs were being refused";
    ASSERT_TRUE(client_->waitForMore(3));
    for (int fd : held) {
        bool closed = false;
        EXPECT_EQ(drainUntilClosed(fd, closed), "");
        EXPECT_TRUE(closed);
        ::close(fd);
    }
    EXPECT_TRUE(testing::waitUntil([&] {
        return log.countContaining(
                   "not complete within transports/tcp/frame_timeout_ms=300 "
                   "ms; closing the connection") == 2;
    }));
}

TEST_F(TcpHostileTest, TruncatedFramesAreDropped) {
    truncated_may_land_ = kTruncatedBytes;
    for (int i = 0; i < 16; ++i) {
        int fd = rawConnect(port());
        std::string frame =
            i % 2 ? tcpHeader(kTcpMagic, kTcpWrite, hostileAddr(), 1 << 20) +
                        std::string(kTruncatedBytes, kTruncatedByte)
                  : tcpHeader(kTcpMagic, kTcpRead, hostileAddr(), 64)
                        .substr(0, 13);
        ASSERT_TRUE(rawSend(fd, frame));
        ::shutdown(fd, SHUT_WR);
        bool closed = false;
        EXPECT_EQ(drainUntilClosed(fd, closed), "");
        EXPECT_TRUE(closed);
        ::close(fd);
    }
    ASSERT_TRUE(client_->waitForMore(3));
}

TEST_F(TcpHostileTest, GarbageFramesAreClosed) {
    std::mt19937_64 rng(20261201);
    for (int i = 0; i < 64; ++i) {
        int fd = rawConnect(port());
        rawSend(fd, randomBytes(rng, 24 + rng() % 1000));
        ::shutdown(fd, SHUT_WR);
        bool closed = false;
        drainUntilClosed(fd, closed);
        EXPECT_TRUE(closed) << "garbage #" << i;
        ::close(fd);
    }
    ASSERT_TRUE(client_->waitForMore(3));
}

TEST_F(TcpHostileTest, ATricklingPeerIsCutOffAtTheFrameDeadline) {
    int fd = rawConnect(port());
    // Taken before the first byte: the server's frame clock starts after.
    auto started = net::Clock::now();
    ASSERT_TRUE(rawSend(
        fd, tcpHeader(kTcpMagic, kTcpWrite,
                      base_ + kTargetBytes - kTrickleBytes, kTrickleBytes)));
    // 64 payload bytes at one per 50 ms would take 3.2 s; the deadline
    // for the whole request is 300 ms.
    Trickler trickler(fd, std::string(kTrickleBytes, kTrickleByte),
                      std::chrono::milliseconds(50));
    bool closed = false;
    EXPECT_EQ(drainUntilClosed(fd, closed), "");
    auto took = net::Clock::now() - started;
    trickler.stop();
    EXPECT_TRUE(closed);
    EXPECT_LT(trickler.sent(), kTrickleBytes);
    trickled_may_land_ = trickler.sent();
    EXPECT_GE(took, std::chrono::milliseconds(kFrameMs));
    ::close(fd);
    ASSERT_TRUE(client_->waitForMore(3));
}

TEST_F(TcpHostileTest, AFloodOfIdleConnectionsNeitherLocksOutNorLingers) {
    floodWithIdleConnections(port(), 8 * kMaxConnections, *client_);
    // The counters move on the server's threads, after the client saw its
    // connection close: waited for, with a bound.
    net::StreamServer::Stats stats;
    EXPECT_TRUE(testing::waitUntil([&] {
        stats = target_.server().stats();
        return stats.evicted + stats.idle_closed >
                   static_cast<uint64_t>(7 * kMaxConnections) &&
               stats.open <= 2u;  // at most the client's own connection
    })) << "evicted "
        << stats.evicted << ", idle_closed " << stats.idle_closed << ", open "
        << stats.open;
}

}  // namespace
}  // namespace mooncake::tent::testing
