// The p2p metadata RPC server against hostile clients: oversized,
// truncated and garbage frames, a client trickling one byte at a time, and
// a flood of idle connections, each while a well-behaved client keeps
// fetching the descriptor byte-exact; the process's resident memory stays
// bounded throughout.
#include <gtest/gtest.h>
#include <unistd.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kit/hostile_peer_support.h"
#include "kit/log_capture.h"
#include "rpc/rpc_frame.h"
#include "tent/runtime/control_plane.h"

namespace mooncake::tent::testing {
namespace {

// Short deadlines so the suite sees them fire; the defaults are minutes.
constexpr int kIdleMs = 300;
constexpr int kFrameMs = 300;
constexpr int kMaxConnections = 32;

// A frame header written by hand: version 1, then the length.
std::string lengthPrefix(uint32_t n) {
    std::string s(5, '\0');
    s[0] = 1;
    for (int i = 0; i < 4; ++i) s[1 + i] = static_cast<char>(n >> (24 - 8 * i));
    return s;
}

class RpcHostileTest : public ::testing::Test {
 protected:
    void SetUp() override {
        manager_ = std::make_shared<SegmentManager>("", nullptr);
        service_ = std::make_unique<ControlService>(manager_);
        Config conf;
        conf.set("rpc/idle_timeout_ms", kIdleMs);
        conf.set("rpc/frame_timeout_ms", kFrameMs);
        conf.set("rpc/max_connections", kMaxConnections);
        ASSERT_TRUE(service_->configure(conf).ok());
        ASSERT_TRUE(service_->start(0).ok());
        name_ = "127.0.0.1:" + std::to_string(service_->port());
        ASSERT_TRUE(manager_
                        ->updateLocal([&](SegmentDesc& d) {
                            d.name = name_;
                            for (uint64_t i = 1; i <= 64; ++i) {
                                BufferDesc b;
                                b.addr = i << 32;
                                b.length = i << 20;
                                b.transports = {TCP};
                                d.getMemory().buffers.push_back(b);
                            }
                            d.getMemory().transport_attrs[TCP] =
                                "127.0.0.1:4000";
                            return Status::OK();
                        })
                        .ok());
        expected_ = encodeJson(segmentToJson(*manager_->getLocal()));
        rss_before_ = residentBytes();
        client_ = std::make_unique<WellBehavedClient>(
            [this](uint64_t) {
                P2PSegmentFetcher fetcher(kHostileBoundMs);
                SegmentDesc desc;
                Status s = fetcher.fetch(name_, desc);
                if (!s.ok()) return std::string(s.message());
                std::string got = encodeJson(segmentToJson(desc));
                return got == expected_ ? std::string()
                                        : "descriptor differs: " + got;
            },
            std::chrono::milliseconds(5));
        ASSERT_TRUE(client_->waitForMore(3));
    }

    void TearDown() override {
        // The RSS growth allowed is thread stacks and allocator slack, far
        // below one 64 MiB frame.
        expectWellBehavedClientUnharmed(client_, rss_before_);
        service_->stop();
    }

    uint16_t port() const { return service_->port(); }

    std::shared_ptr<SegmentManager> manager_;
    std::unique_ptr<ControlService> service_;
    std::string name_;
    std::string expected_;
    uint64_t rss_before_ = 0;
    std::unique_ptr<WellBehavedClient> client_;
};

TEST_F(RpcHostileTest, OversizedFramesAreRefusedBeforeAllocating) {
    // Each announces far more than GetSegmentDesc's 1 KiB and then holds
    // its connection open: under the old 64 MiB request cap, the eight of
    // 60 and 64 MiB made the server allocate ~500 MiB between them. (Only
    // the prefix is sent: a byte left unread when the server closes would
    // turn its FIN into a reset that can discard the error reply.)
    // The peak from here on covers the whole time the sockets are held,
    // not just the moment of a sample.
    const bool peak_reset = resetPeakResident();
    std::vector<int> fds;
    for (uint32_t n : {1025u, 60u << 20, 64u << 20, 0xFFFFFFFFu}) {
        for (int i = 0; i < 4; ++i) {
            int fd = rawConnect(port());
            ASSERT_TRUE(rawSend(fd, lengthPrefix(n)));
            fds.push_back(fd);
        }
    }
    ASSERT_TRUE(client_->waitForMore(3));
    // Every refusal is read while all sixteen sockets are still open.
    for (size_t i = 0; i < fds.size(); ++i) {
        std::string payload;
        ASSERT_TRUE(readFrame(fds[i], payload, kHostileBoundMs, 1 << 20).ok());
        Json::Value reply;
        ASSERT_TRUE(decodeJsonObject(payload, reply).ok()) << payload;
        EXPECT_EQ(reply["message"].asString(),
                  "frame length " +
                      std::to_string(std::vector<uint32_t>{
                          1025u, 60u << 20, 64u << 20, 0xFFFFFFFFu}[i / 4]) +
                      " exceeds the limit of 1024 bytes");
    }
    // Sampled while they are held: nothing the frames announced was
    // allocated (~500 MiB between the eight of 60 and 64 MiB).
    const uint64_t held = residentBytes(peak_reset ? "VmHWM:" : "VmRSS:");
    EXPECT_LT(held, rss_before_ + kRssSlackBytes)
        << (peak_reset ? "peak " : "") << "VmRSS grew from " << rss_before_
        << " to " << held << " while the oversized frames were held";
    for (int fd : fds) {
        bool closed = false;
        drainUntilClosed(fd, closed);
        EXPECT_TRUE(closed);
        ::close(fd);
    }
}

TEST_F(RpcHostileTest, TruncatedFramesAreDropped) {
    for (int i = 0; i < 16; ++i) {
        int fd = rawConnect(port());
        ASSERT_TRUE(rawSend(fd, lengthPrefix(100) + "{\"op\":\"Get"));
        ::shutdown(fd, SHUT_WR);
        bool closed = false;
        EXPECT_EQ(drainUntilClosed(fd, closed), "");
        EXPECT_TRUE(closed);
        ::close(fd);
    }
    // Half a header, then gone.
    int fd = rawConnect(port());
    ASSERT_TRUE(rawSend(fd, std::string("\0\0", 2)));
    ::close(fd);
    ASSERT_TRUE(client_->waitForMore(3));
}

TEST_F(RpcHostileTest, GarbageFramesGetAnErrorOrAClose) {
    std::mt19937_64 rng(20261201);
    for (int i = 0; i < 64; ++i) {
        int fd = rawConnect(port());
        // A plausible length with random bytes, or random bytes throughout.
        std::string bytes =
            i % 2 ? lengthPrefix(1 + rng() % 1024) + randomBytes(rng, 1024)
                  : randomBytes(rng, 1 + rng() % 64);
        rawSend(fd, bytes);
        ::shutdown(fd, SHUT_WR);
        bool closed = false;
        std::string answer = drainUntilClosed(fd, closed);
        EXPECT_TRUE(closed) << "garbage #" << i;
        // Whatever came back is one error frame, never a descriptor.
        EXPECT_EQ(answer.find("\"segment\""), std::string::npos);
        ::close(fd);
    }
    ASSERT_TRUE(client_->waitForMore(3));
}

TEST_F(RpcHostileTest, ATricklingClientIsCutOffAtTheFrameDeadline) {
    const std::string request =
        lengthPrefix(23) + std::string(R"({"op":"GetSegmentDesc"})");
    LogCapture log;
    int fd = rawConnect(port());
    // Taken before the first byte: the server's frame clock starts after.
    auto started = net::Clock::now();
    // One byte every 50 ms: 27 bytes would take 1.35 s against a 300 ms
    // deadline for the whole request.
    Trickler trickler(fd, request, std::chrono::milliseconds(50));
    bool closed = false;
    std::string answer = drainUntilClosed(fd, closed);
    auto took = net::Clock::now() - started;
    trickler.stop();
    EXPECT_TRUE(closed);
    EXPECT_EQ(answer, "");  // nobody reads an answer to a request never done
    EXPECT_LT(trickler.sent(), request.size());
    EXPECT_GE(took, std::chrono::milliseconds(kFrameMs));
    // The bound that fired is logged with its key and value.
    EXPECT_EQ(log.countContaining(
                  "request not complete within rpc/frame_timeout_ms=300 ms; "
                  "closing the connection"),
              1);
    ::close(fd);
    ASSERT_TRUE(client_->waitForMore(3));
}

TEST_F(RpcHostileTest, AFloodOfIdleConnectionsNeitherLocksOutNorLingers) {
    // The server holds at most kMaxConnections at once (plus the client's
    // own), evicting the longest-idle to admit newcomers.
    floodWithIdleConnections(port(), 8 * kMaxConnections, *client_);
}

}  // namespace
}  // namespace mooncake::tent::testing
