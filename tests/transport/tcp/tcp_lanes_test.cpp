// TcpTransport's lanes (transports/tcp/lanes_per_peer) against a target
// engine in a child process: many workers and many concurrent requests to
// one peer use at most lanes_per_peer sockets, every byte arrives, and
// lanes killed mid-run (the target killed and started again) are closed,
// never reused, and replaced by new ones. And the target's side: 10,000
// connections that send nothing cost it no thread, and at most
// max_connections sockets, while a real peer is still served.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "kit/descriptor_fetcher.h"
#include "kit/proc_probe.h"
#include "kit/target_process.h"
#include "kit/two_process_fixture.h"
#include "kit/wait_until.h"
#include "net/stream_server.h"
#include "tcp_test_support.h"
#include "tent/runtime/control_plane.h"
#include "tent/transport/tcp/tcp_transport.h"

namespace mooncake::tent {
namespace {

using testing::DescriptorFetcher;
using testing::TargetOptions;
using testing::TargetProcess;

constexpr int kWorkers = 8;
constexpr size_t kRequests = 64;
constexpr size_t kPiece = testing::kBufferSize / kRequests;  // 64 KiB
constexpr int kBoundMs = 30000;

// How many of this process's TCP sockets have remote port `port`; only
// ESTABLISHED ones (state 01 in /proc/net/tcp) when `established`.
size_t socketsTo(uint16_t port, bool established) {
    const std::set<unsigned long> own = testing::socketInodes();
    std::ifstream in("/proc/net/tcp");
    std::string line;
    std::getline(in, line);  // the column titles
    size_t count = 0;
    while (std::getline(in, line)) {
        std::istringstream is(line);
        std::string slot, local, remote, state, queues, timer, retr, uid,
            timeout;
        unsigned long inode = 0;
        is >> slot >> local >> remote >> state >> queues >> timer >> retr >>
            uid >> timeout >> inode;
        const size_t colon = remote.find(':');
        if (colon == std::string::npos) continue;
        const unsigned long rport =
            std::strtoul(remote.c_str() + colon + 1, nullptr, 16);
        if (rport != port || !own.count(inode)) continue;
        if (established && state != "01") continue;
        ++count;
    }
    return count;
}

uint16_t portOf(const std::string& endpoint) {
    return static_cast<uint16_t>(
        std::atoi(endpoint.c_str() + endpoint.rfind(':') + 1));
}

class TcpLanesTest : public ::testing::Test {
 protected:
    void SetUp() override {
        ::unsetenv("MC_TENT_CONF");
        // Every segment name resolves to the endpoint the test gave it.
        fetcher_ = std::make_shared<DescriptorFetcher>(
            [this](const std::string& name, int, SegmentDesc& out) {
                out.getMemory().transport_attrs[TCP] = endpoints_[name];
            });
        manager_ = std::make_shared<SegmentManager>("127.0.0.1:1", fetcher_);
    }
    void TearDown() override {
        if (batch_) {
            EXPECT_TRUE(transport_.freeSubBatch(batch_).ok());
        }
        transport_.uninstall();
        std::string why;
        if (target_.running()) {
            EXPECT_TRUE(target_.finish(why)) << why;
        }
    }

    // Starts (or restarts) the target and opens it as segment `alias`;
    // its TCP endpoint is read from its published descriptor.
    void startTarget(const std::string& alias, bool restart,
                     const std::string& int_conf = "") {
        std::string why;
        TargetOptions options;
        options.xport = TCP;
        options.int_conf = int_conf;
        const TargetProcess::Started started =
            restart ? target_.restart(why) : target_.start(options, why);
        ASSERT_EQ(started, TargetProcess::Started::kReady) << why;
        SegmentDesc desc;
        ASSERT_TRUE(P2PSegmentFetcher().fetch(target_.name(), desc).ok());
        endpoint_ = desc.getMemory().transport_attrs[TCP];
        ASSERT_FALSE(endpoint_.empty());
        endpoints_[alias] = endpoint_;
        ASSERT_TRUE(manager_->openRemote(peer_, alias).ok());
    }

    void install(int lanes_per_peer) {
        auto conf = std::make_shared<Config>();
        conf->set("transports/tcp/workers", kWorkers);
        conf->set("transports/tcp/lanes_per_peer", lanes_per_peer);
        // Far above what a round needs: only a dropped lane explains a
        // quick failure.
        conf->set("transports/tcp/timeout_ms", kBoundMs);
        ASSERT_TRUE(testing::installTcp(transport_, manager_, conf).ok());
        ASSERT_TRUE(transport_.allocateSubBatch(batch_, 8 * kRequests).ok());
        local_.assign(testing::kBufferSize, 0);
    }

    // Submits kRequests requests of kPiece bytes covering the target's
    // buffer, all at once; their final states.
    std::vector<TransferStatus> round(Request::OpCode op) {
        std::vector<Request> list;
        for (size_t i = 0; i < kRequests; ++i) {
            list.push_back(testing::requestTo(peer_, op, &local_[i * kPiece],
                                              target_.base() + i * kPiece,
                                              kPiece));
        }
        EXPECT_TRUE(transport_.submitTransferTasks(batch_, list).ok());
        std::vector<TransferStatus> out;
        for (size_t i = 0; i < kRequests; ++i) {
            out.push_back(testing::waitWhilePending(
                transport_, batch_, static_cast<int>(next_task_ + i),
                kBoundMs));
        }
        next_task_ += kRequests;
        return out;
    }

    // WRITEs pattern `seed` over the whole buffer, checks the target's own
    // bytes, READs them back into a cleared local buffer and checks them.
    void roundTrip(uint8_t seed) {
        for (size_t i = 0; i < local_.size(); ++i) {
            local_[i] = testing::patternByte(i, seed);
        }
        for (const TransferStatus& st : round(Request::WRITE)) {
            ASSERT_EQ(st.s, COMPLETED);
            ASSERT_EQ(st.transferred_bytes, kPiece);
        }
        EXPECT_EQ(target_.ask("check 0 " + std::to_string(local_.size()) + " " +
                              std::to_string(seed)),
                  "ok");
        std::fill(local_.begin(), local_.end(), 0);
        for (const TransferStatus& st : round(Request::READ)) {
            ASSERT_EQ(st.s, COMPLETED);
            ASSERT_EQ(st.transferred_bytes, kPiece);
        }
        for (size_t i = 0; i < local_.size(); ++i) {
            ASSERT_EQ(local_[i], testing::patternByte(i, seed)) << "byte " << i;
        }
    }

    TcpTransport transport_;
    std::shared_ptr<DescriptorFetcher> fetcher_;
    std::map<std::string, std::string> endpoints_;  // alias -> endpoint
    std::shared_ptr<SegmentManager> manager_;
    TargetProcess target_;
    std::string endpoint_;
    SegmentID peer_ = 0;
    Transport::SubBatchRef batch_ = nullptr;
    size_t next_task_ = 0;
    std::vector<uint8_t> local_;
};

TEST(TcpLanesKey, LanesPerPeerIsCheckedAndNamedWhenBad) {
    EXPECT_EQ(TcpTransport::Settings().lanes_per_peer, 4);
    testing::expectKeyRefused("transports/tcp/lanes_per_peer", {0, -1, 65},
                              "must be in [1, 64]");
}

class TcpLanesCountTest : public TcpLanesTest,
                          public ::testing::WithParamInterface<int> {};

TEST_P(TcpLanesCountTest, EightWorkersShareAtMostTheLanesOfAPeer) {
    const int lanes = GetParam();
    ASSERT_NO_FATAL_FAILURE(startTarget("peer:1", false));
    ASSERT_NO_FATAL_FAILURE(install(lanes));
    ASSERT_NO_FATAL_FAILURE(roundTrip(static_cast<uint8_t>(lanes)));
    // Idle lanes stay open between rounds, so the count now is every lane
    // the rounds opened.
    const size_t sockets = socketsTo(portOf(endpoint_), false);
    EXPECT_GE(sockets, 1u);
    EXPECT_LE(sockets, static_cast<size_t>(lanes));
    EXPECT_EQ(transport_.laneStats().open, sockets);
    EXPECT_GE(transport_.laneStats().peak_per_peer, 1);
    EXPECT_LE(transport_.laneStats().peak_per_peer, lanes);
    ASSERT_TRUE(transport_.freeSubBatch(batch_).ok());
    batch_ = nullptr;
    ASSERT_TRUE(transport_.uninstall().ok());
    // uninstall() closed every lane.
    EXPECT_EQ(socketsTo(portOf(endpoint_), false), 0u);
}

INSTANTIATE_TEST_SUITE_P(Lanes, TcpLanesCountTest, ::testing::Values(1, 2));

TEST_F(TcpLanesTest, LanesKilledMidRunAreClosedAndReplacedAfterRestart) {
    ASSERT_NO_FATAL_FAILURE(startTarget("peer:1", false));
    ASSERT_NO_FATAL_FAILURE(install(2));
    ASSERT_NO_FATAL_FAILURE(roundTrip(21));
    const uint16_t old_port = portOf(endpoint_);
    ASSERT_GE(socketsTo(old_port, true), 1u);

    // Stopped, so every request is still in flight on a lane when the
    // target dies under them.
    ASSERT_TRUE(target_.stop());
    std::vector<Request> list;
    for (size_t i = 0; i < kRequests; ++i) {
        list.push_back(testing::requestTo(peer_, Request::WRITE,
                                          &local_[i * kPiece],
                                          target_.base() + i * kPiece, kPiece));
    }
    ASSERT_TRUE(transport_.submitTransferTasks(batch_, list).ok());
    target_.kill();
    for (size_t i = 0; i < kRequests; ++i) {
        TransferStatus st = testing::waitWhilePending(
            transport_, batch_, static_cast<int>(next_task_ + i), kBoundMs);
        EXPECT_EQ(st.s, FAILED) << "task " << i;
    }
    next_task_ += kRequests;
    // The failed lanes were closed, not given back for reuse.
    EXPECT_EQ(socketsTo(old_port, false), 0u);
    EXPECT_EQ(transport_.laneStats().open, 0u);

    ASSERT_NO_FATAL_FAILURE(startTarget("peer:2", true));
    ASSERT_NE(portOf(endpoint_), old_port);
    ASSERT_NO_FATAL_FAILURE(roundTrip(22));
    const size_t sockets = socketsTo(portOf(endpoint_), false);
    EXPECT_GE(sockets, 1u);
    EXPECT_LE(sockets, 2u);
    EXPECT_EQ(socketsTo(old_port, false), 0u);
    EXPECT_LE(transport_.laneStats().peak_per_peer, 2);
}

// A peer opens 10,000 connections to the target's TCP listener and sends
// nothing. The target (max_connections 256, 2 server threads) accepts
// them, closing the longest-idle one for each newcomer: its thread count
// never moves, its sockets stay within the cap, and every connection but
// the last 256 is closed by it. A real peer's round trip meanwhile is
// byte-exact.
TEST_F(TcpLanesTest, TenThousandSilentConnectionsCostTheTargetNoThread) {
    constexpr int kSilent = 10000;
    constexpr int kCap = 256;
    rlimit files{};
    ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &files), 0);
    if (files.rlim_max != RLIM_INFINITY && files.rlim_max < kSilent + 1024) {
        GTEST_SKIP() << "RLIMIT_NOFILE hard limit " << files.rlim_max
                     << " is below the " << kSilent + 1024
                     << " descriptors this test opens";
    }
    const rlim_t old_soft = files.rlim_cur;
    files.rlim_cur = files.rlim_max;
    ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &files), 0);
    struct RestoreLimit {
        rlim_t soft;
        ~RestoreLimit() {
            rlimit l{};
            ::getrlimit(RLIMIT_NOFILE, &l);
            l.rlim_cur = soft;
            ::setrlimit(RLIMIT_NOFILE, &l);
        }
    } restore{old_soft};

    ASSERT_NO_FATAL_FAILURE(startTarget(
        "peer:1", false,
        "transports/tcp/max_connections=256,transports/tcp/server_threads=2"));
    ASSERT_NO_FATAL_FAILURE(install(2));
    ASSERT_NO_FATAL_FAILURE(roundTrip(31));
    const std::string pid = std::to_string(target_.pid());
    const size_t threads = testing::threadsOf(pid);
    ASSERT_GT(threads, 0u);
    // Its listeners, the RPC connections and our two lanes.
    const size_t handful = testing::socketInodes(pid).size();

    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(portOf(endpoint_));
    std::vector<int> silent;
    size_t most_threads = threads, most_sockets = handful;
    for (int i = 0; i < kSilent; ++i) {
        int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        ASSERT_GE(fd, 0) << "socket " << i;
        silent.push_back(fd);
        ASSERT_EQ(
            ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0)
            << "connection " << i << ": " << std::strerror(errno);
        if (i % 1000 == 999) {
            most_threads = std::max(most_threads, testing::threadsOf(pid));
            most_sockets =
                std::max(most_sockets, testing::socketInodes(pid).size());
        }
    }
    // A real peer is served meanwhile, on lanes that may have been evicted
    // for the flood and are dialled again.
    ASSERT_NO_FATAL_FAILURE(roundTrip(32));
    most_threads = std::max(most_threads, testing::threadsOf(pid));
    most_sockets = std::max(most_sockets, testing::socketInodes(pid).size());
    EXPECT_EQ(most_threads, threads) << "the target's threads moved";
    EXPECT_LE(most_sockets, handful + kCap + net::kClosingSlack)
        << "the target held more sockets than max_connections allows";

    // Every connection beyond the cap was closed by the target: its client
    // sees the end of the stream.
    auto closed = [&] {
        size_t n = 0;
        std::vector<pollfd> fds(silent.size());
        for (size_t i = 0; i < silent.size(); ++i) {
            fds[i] = {silent[i], POLLIN | POLLRDHUP, 0};
        }
        ::poll(fds.data(), fds.size(), 0);
        for (const pollfd& p : fds) {
            n += (p.revents & (POLLIN | POLLRDHUP | POLLHUP | POLLERR)) != 0;
        }
        return n;
    };
    EXPECT_TRUE(testing::waitUntil(
        [&] { return closed() >= static_cast<size_t>(kSilent - kCap); },
        std::chrono::milliseconds(kBoundMs)))
        << closed() << " of " << kSilent << " closed by the target";
    for (int fd : silent) ::close(fd);
    std::cout << "target threads " << threads << " (most " << most_threads
              << "), sockets " << handful << " before, most " << most_sockets
              << " with " << kSilent << " silent connections\n";
}

}  // namespace
}  // namespace mooncake::tent
