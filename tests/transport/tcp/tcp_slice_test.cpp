// TcpTransport cutting one request into slices: shared among idle workers
// (transports/tcp/min_slice_bytes) or in frames of at most 16 MiB: which
// frames reach the peer, on how many connections at once, what a refused
// slice does to the rest of its request, and that a request with bytes
// still queued fails whole when the transport is uninstalled. The peer is
// written by hand, so every frame it receives is on record.
#include <glog/logging.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "fake_tcp_peer.h"
#include "kit/log_capture.h"
#include "net/socket_io.h"
#include "tcp_test_support.h"
#include "tent/transport/tcp/tcp_transport.h"
#include "transport/tcp/tcp_task.h"
#include "transport/tcp/tcp_wire.h"

namespace mooncake::tent {
namespace {

// Only turns a hang into a failure.
constexpr int kBoundMs = 30000;

// Serves the TCP transport's frames from its own memory, at addresses that
// are offsets into it, on every connection the initiator opens. Each frame
// is recorded when it arrives, and no reply leaves before `gate` frames
// (of any connection) have arrived: a test that sets the gate to N learns
// that N slices were in flight at once, since otherwise none is answered.
// A frame at `refused_addr` gets the "bad range" reply.
class RecordingPeer : public testing::FakeTcpPeer {
 public:
    struct Frame {
        uint32_t op;
        uint64_t addr;
        uint64_t length;
        int connection;  // in the order they were accepted
    };
    static constexpr uint64_t kNoRefusal = ~0ull;

    RecordingPeer(size_t memory_bytes, size_t gate,
                  uint64_t refused_addr = kNoRefusal)
        : memory_(memory_bytes, 0), gate_(gate), refused_addr_(refused_addr) {
        start();
    }
    ~RecordingPeer() override { stop(); }

    std::vector<unsigned char> memory() {
        std::lock_guard<std::mutex> lock(mu_);
        return memory_;
    }
    void poke(size_t addr, unsigned char value) {
        std::lock_guard<std::mutex> lock(mu_);
        memory_[addr] = value;
    }
    std::vector<Frame> frames() {
        std::lock_guard<std::mutex> lock(mu_);
        return frames_;
    }
    // False when the bound passed before `n` frames arrived.
    bool waitForFrames(size_t n) {
        std::unique_lock<std::mutex> lock(mu_);
        return cv_.wait_for(lock, std::chrono::milliseconds(kBoundMs),
                            [&] { return frames_.size() >= n; });
    }

 private:
    // Frames until the connection ends or the peer stops; leaving closes
    // nothing (the destructor does), it only stops answering.
    void serve(int fd, int index) override {
        for (;;) {
            unsigned char head[tcp_wire::kRequestHeaderBytes];
            if (!net::recvAll(fd, head, sizeof(head), net::deadlineIn(kBoundMs))
                     .ok()) {
                return;
            }
            tcp_wire::RequestHeader req;
            if (!tcp_wire::decode(head, req).ok()) return;
            std::vector<unsigned char> payload;
            if (req.op == tcp_wire::kOpWrite) {
                payload.resize(req.length);
                if (!net::recvAll(fd, payload.data(), req.length,
                                  net::deadlineIn(kBoundMs))
                         .ok()) {
                    return;
                }
            }
            tcp_wire::ReplyHeader reply;
            std::vector<unsigned char> data;
            {
                std::unique_lock<std::mutex> lock(mu_);
                frames_.push_back({req.op, req.addr, req.length, index});
                cv_.notify_all();
                bool open = cv_.wait_for(
                    lock, std::chrono::milliseconds(kBoundMs),
                    [&] { return stopping_ || frames_.size() >= gate_; });
                if (!open || stopping_) return;
                apply(req, payload, reply, data);
            }
            unsigned char buf[tcp_wire::kReplyHeaderBytes];
            tcp_wire::encode(reply, buf);
            if (!net::sendAll(fd, buf, sizeof(buf), net::deadlineIn(kBoundMs))
                     .ok() ||
                !net::sendAll(fd, data.data(), data.size(),
                              net::deadlineIn(kBoundMs))
                     .ok()) {
                return;
            }
        }
    }

    // The reply to `req`, and what a WRITE stores; the caller holds mu_.
    void apply(const tcp_wire::RequestHeader& req,
               const std::vector<unsigned char>& payload,
               tcp_wire::ReplyHeader& reply, std::vector<unsigned char>& data) {
        const bool in_range = req.addr <= memory_.size() &&
                              req.length <= memory_.size() - req.addr;
        if (req.addr == refused_addr_ || !in_range) {
            reply.code = tcp_wire::kReplyBadRange;
        } else if (req.op == tcp_wire::kOpWrite) {
            std::memcpy(&memory_[req.addr], payload.data(), req.length);
        } else {
            reply.length = req.length;
            data.assign(memory_.begin() + req.addr,
                        memory_.begin() + req.addr + req.length);
        }
    }

    std::vector<unsigned char> memory_;
    const size_t gate_;
    const uint64_t refused_addr_;
    std::vector<Frame> frames_;
};

std::vector<unsigned char> pattern(size_t n) {
    std::vector<unsigned char> v(n);
    for (size_t i = 0; i < n; ++i) {
        v[i] = static_cast<unsigned char>((i * 167) ^ (i >> 9));
    }
    return v;
}

class TcpSliceTest : public ::testing::Test {
 protected:
    void install(const std::string& endpoint, int workers,
                 int min_slice_bytes) {
        manager_ = std::make_shared<SegmentManager>(
            "127.0.0.1:1",
            testing::DescriptorFetcher::fixedEndpoint(TCP, endpoint));
        auto conf = std::make_shared<Config>();
        conf->set("transports/tcp/workers", workers);
        // A lane per worker, so every worker can have a slice in flight to
        // the one peer.
        conf->set("transports/tcp/lanes_per_peer", workers);
        conf->set("transports/tcp/min_slice_bytes", min_slice_bytes);
        conf->set("transports/tcp/timeout_ms", kBoundMs);
        ASSERT_TRUE(testing::installTcp(transport_, manager_, conf).ok());
        ASSERT_TRUE(manager_->openRemote(peer_, "peer:1").ok());
        ASSERT_TRUE(transport_.allocateSubBatch(batch_, 8).ok());
    }
    void TearDown() override {
        if (batch_) {
            EXPECT_TRUE(transport_.freeSubBatch(batch_).ok());
        }
    }

    Request toPeer(Request::OpCode op, void* local, uint64_t offset,
                   size_t length) {
        return testing::requestTo(peer_, op, local, offset, length);
    }

    // Submits `r` as the next task and polls it until it leaves PENDING.
    TransferStatus run(const Request& r) {
        EXPECT_TRUE(transport_.submitTransferTasks(batch_, {r}).ok());
        return testing::waitWhilePending(transport_, batch_, next_task_++,
                                         2 * kBoundMs);
    }

    TcpTransport transport_;
    std::shared_ptr<SegmentManager> manager_;
    SegmentID peer_ = 0;
    Transport::SubBatchRef batch_ = nullptr;
    int next_task_ = 0;
};

TEST(TcpSliceKey, MinSliceBytesIsCheckedAndNamedWhenBad) {
    EXPECT_EQ(TcpTransport::Settings().min_slice_bytes, 2 << 20);
    testing::expectKeyRefused("transports/tcp/min_slice_bytes",
                              {0, -1, 65535, (16 << 20) + 1},
                              "must be in [65536, 16777216]");
    for (int good : {65536, 16 << 20}) {
        EXPECT_TRUE(
            testing::installWithKey("transports/tcp/min_slice_bytes", good)
                .ok())
            << good;
    }
}

TEST(TcpClaimBytes, WholeUnlessIdleWorkersWouldHaveNothingElseToDo) {
    constexpr uint64_t kMiB = 1 << 20;
    // Nobody idle, or other requests queued: the whole, up to one frame.
    EXPECT_EQ(claimBytes(5 * kMiB, 0, false, kMiB), 5 * kMiB);
    EXPECT_EQ(claimBytes(5 * kMiB, 3, true, kMiB), 5 * kMiB);
    EXPECT_EQ(claimBytes(40 * kMiB, 0, false, kMiB), 16 * kMiB);
    // Three idle: a quarter each, rounded up, never under the minimum
    // nor over one frame.
    EXPECT_EQ(claimBytes(8 * kMiB, 3, false, kMiB), 2 * kMiB);
    EXPECT_EQ(claimBytes(8 * kMiB + 1, 3, false, kMiB), 2 * kMiB + 1);
    EXPECT_EQ(claimBytes(2 * kMiB, 3, false, kMiB), kMiB);
    EXPECT_EQ(claimBytes(kMiB / 2, 3, false, kMiB), kMiB / 2);
    EXPECT_EQ(claimBytes(128 * kMiB, 3, false, kMiB), 16 * kMiB);
    EXPECT_EQ(claimBytes(0, 3, false, kMiB), 0u);
}

TEST_F(TcpSliceTest, OneRequestIsSharedAmongIdleWorkersAtOnce) {
    constexpr size_t kSlice = 256 << 10;
    // No reply leaves the peer before four frames arrived: the request
    // completes only if four workers sent their shares side by side.
    RecordingPeer peer(4 << 20, 4);
    install(peer.endpoint(), 4, kSlice);
    std::vector<unsigned char> src = pattern(4 * kSlice);
    TransferStatus st = run(toPeer(Request::WRITE, src.data(), 0, src.size()));
    EXPECT_EQ(st.s, COMPLETED);
    EXPECT_EQ(st.transferred_bytes, src.size());
    std::vector<RecordingPeer::Frame> frames = peer.frames();
    ASSERT_EQ(frames.size(), 4u);
    std::sort(frames.begin(), frames.end(),
              [](const auto& a, const auto& b) { return a.addr < b.addr; });
    std::set<int> connections;
    for (size_t i = 0; i < frames.size(); ++i) {
        EXPECT_EQ(frames[i].op, tcp_wire::kOpWrite);
        EXPECT_EQ(frames[i].addr, i * kSlice);
        EXPECT_EQ(frames[i].length, kSlice);
        connections.insert(frames[i].connection);
    }
    EXPECT_EQ(connections.size(), 4u);
    std::vector<unsigned char> memory = peer.memory();
    EXPECT_TRUE(std::equal(src.begin(), src.end(), memory.begin()));

    // Back, at an odd length. How many workers are idle again by now is
    // up to the scheduler, so only the frames' sum is fixed, and their
    // count is bounded: one to five (each but the last at least 256 KiB).
    std::vector<unsigned char> back(4 * kSlice + 5, 0);
    peer.poke(4 * kSlice + 4, 0x7e);
    st = run(toPeer(Request::READ, back.data(), 0, back.size()));
    EXPECT_EQ(st.s, COMPLETED);
    EXPECT_EQ(st.transferred_bytes, back.size());
    EXPECT_TRUE(std::equal(src.begin(), src.end(), back.begin()));
    EXPECT_EQ(back[4 * kSlice + 4], 0x7e);
    frames = peer.frames();
    ASSERT_GE(frames.size(), 4u + 1u);
    ASSERT_LE(frames.size(), 4u + 5u);
    uint64_t read_bytes = 0;
    for (size_t i = 4; i < frames.size(); ++i) {
        EXPECT_EQ(frames[i].op, tcp_wire::kOpRead);
        read_bytes += frames[i].length;
    }
    EXPECT_EQ(read_bytes, back.size());
    EXPECT_EQ(peer.connections(), 4u);  // pooled, none dialled again
}

TEST_F(TcpSliceTest, ARefusedSliceFailsItsRequestAndTheRestIsNotSent) {
    constexpr size_t kFrame = 16 << 20;
    // One worker, so never an idle one: the request goes in frames of
    // 16 MiB, in order (16, 16 and 8 MiB); the second is refused.
    RecordingPeer peer(40 << 20, 0, kFrame);
    install(peer.endpoint(), 1, 64 << 10);
    std::vector<unsigned char> src = pattern(40 << 20);
    TransferStatus st;
    {
        testing::LogCapture sink;
        st = run(toPeer(Request::WRITE, src.data(), 0, src.size()));
        EXPECT_EQ(sink.lines(),
                  std::vector<std::string>{
                      "TcpTransport: WRITE of 16777216 bytes at 0x1000000 (a "
                      "slice of a 41943040-byte request) on segment peer:1 "
                      "failed: target refused the range (code 1): not within "
                      "one registered buffer"});
    }
    EXPECT_EQ(st.s, FAILED);
    EXPECT_EQ(st.transferred_bytes, kFrame);  // the first frame landed
    std::vector<RecordingPeer::Frame> frames = peer.frames();
    ASSERT_EQ(frames.size(), 2u);
    EXPECT_EQ(frames[0].addr, 0u);
    EXPECT_EQ(frames[0].length, kFrame);
    EXPECT_EQ(frames[1].addr, kFrame);
    std::vector<unsigned char> memory = peer.memory();
    EXPECT_TRUE(std::equal(src.begin(), src.begin() + kFrame, memory.begin()));
    EXPECT_EQ(std::count(memory.begin() + kFrame, memory.end(), 0),
              static_cast<long>(memory.size() - kFrame));

    // A refusal leaves the connection in step: the next request uses it.
    st = run(toPeer(Request::WRITE, src.data(), 2 * kFrame, 4096));
    EXPECT_EQ(st.s, COMPLETED);
    EXPECT_EQ(peer.connections(), 1u);
}

TEST_F(TcpSliceTest, UninstallFailsARequestWithBytesStillQueued) {
    constexpr size_t kFrame = 16 << 20;
    // Two workers take 16 MiB each of a 48 MiB READ; the peer never
    // answers, and the last 16 MiB stay queued.
    RecordingPeer peer(48 << 20, ~size_t{0});
    install(peer.endpoint(), 2, 64 << 10);
    std::vector<unsigned char> dst(3 * kFrame, 0);
    ASSERT_TRUE(
        transport_
            .submitTransferTasks(
                batch_, {toPeer(Request::READ, dst.data(), 0, dst.size())})
            .ok());
    ASSERT_TRUE(peer.waitForFrames(2));
    TransferStatus st;
    ASSERT_TRUE(transport_.getTransferStatus(batch_, 0, st).ok());
    EXPECT_EQ(st.s, PENDING);
    ASSERT_TRUE(transport_.uninstall().ok());
    ASSERT_TRUE(transport_.getTransferStatus(batch_, 0, st).ok());
    EXPECT_EQ(st.s, FAILED);
    EXPECT_EQ(st.transferred_bytes, 0u);
    std::vector<RecordingPeer::Frame> frames = peer.frames();
    ASSERT_EQ(frames.size(), 2u);
    EXPECT_EQ(frames[0].length + frames[1].length, 2 * kFrame);
}

}  // namespace
}  // namespace mooncake::tent
