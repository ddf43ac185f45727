// TcpTransport's target side against raw peers the test drives byte by
// byte: buffer registration never waits behind a peer's network I/O, and
// unregistering a buffer fences the accesses in flight on it.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <future>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "kit/wait_until.h"
#include "net/socket_io.h"
#include "tcp_test_support.h"
#include "tent/transport/tcp/tcp_transport.h"

namespace mooncake::tent {
namespace {

// Only turns a hang into a failure.
constexpr int kBoundMs = 20000;

std::string header(uint32_t op, uint64_t addr, uint64_t len) {
    unsigned char b[24];
    const uint32_t magic = 0x54454e54;  // "TENT"
    for (int i = 0; i < 4; ++i) b[i] = magic >> (24 - 8 * i);
    b[4] = 1;  // the wire version
    b[5] = static_cast<unsigned char>(op);
    b[6] = b[7] = 0;
    for (int i = 0; i < 8; ++i) b[8 + i] = addr >> (56 - 8 * i);
    for (int i = 0; i < 8; ++i) b[16 + i] = len >> (56 - 8 * i);
    return std::string(reinterpret_cast<char*>(b), sizeof(b));
}

constexpr uint32_t kRead = 1, kWrite = 2;

class TcpTargetTest : public ::testing::Test {
 protected:
    void install(int unregister_wait_ms) {
        manager_ = std::make_shared<SegmentManager>("127.0.0.1:1", nullptr);
        auto conf = std::make_shared<Config>();
        // Long enough that only the unregister fence can end a stalled
        // request within these tests.
        conf->set("transports/tcp/frame_timeout_ms", 600000);
        conf->set("transports/tcp/unregister_wait_ms", unregister_wait_ms);
        ASSERT_TRUE(testing::installTcp(transport_, manager_, conf).ok());
    }

    BufferDesc registerBuffer(std::vector<char>& mem) {
        BufferDesc desc;
        desc.addr = reinterpret_cast<uint64_t>(mem.data());
        desc.length = mem.size();
        EXPECT_TRUE(transport_.addMemoryBuffer(desc, MemoryOptions()).ok());
        return desc;
    }

    int connectPeer() {
        int fd = -1;
        Status s = net::connectTo("127.0.0.1", transport_.listenPort(),
                                  net::deadlineIn(kBoundMs), fd);
        EXPECT_TRUE(s.ok()) << s;
        return fd;
    }

    // Polls until `n` peer accesses are in flight: the transport offers no
    // event for it, and the bound turns a miss into a failure.
    bool waitForAccesses(size_t n) {
        return testing::waitUntil(
            [&] { return transport_.activeAccesses() == n; },
            std::chrono::milliseconds(kBoundMs));
    }

    // A peer inside a WRITE of 1 MiB into `desc` whose payload stopped
    // after 100 bytes: the target is in the access, the 100 bytes are in
    // `desc`'s memory, and it waits for bytes that do not come. `peer` is
    // the peer's socket.
    void stalledWriteInto(const BufferDesc& desc, int& peer) {
        peer = connectPeer();
        std::string frame =
            header(kWrite, desc.addr, 1 << 20) + std::string(100, 'p');
        ASSERT_TRUE(net::sendAll(peer, frame.data(), frame.size(),
                                 net::deadlineIn(kBoundMs))
                        .ok());
        ASSERT_TRUE(waitForAccesses(1));
        // The pin is taken before the payload is read: on a busy host the
        // serving thread may not have received the 100 bytes yet, and an
        // unregister then would fence them out. The kernel copies them in
        // (recv), so they are polled like any state without an event.
        const char* mem = reinterpret_cast<const char*>(desc.addr);
        const std::string landed(100, 'p');
        ASSERT_TRUE(testing::waitUntil(
            [&] { return std::string(mem, landed.size()) == landed; },
            std::chrono::milliseconds(kBoundMs)))
            << "the 100 payload bytes never reached the buffer";
    }

    // True when the target closed `fd`.
    // A peer that never reads: its receive buffer is pinned small, since
    // the kernel would otherwise grow it (tcp_rmem allows 32 MiB here) and
    // could take a whole READ without the target ever blocking in send().
    int connectNonReadingPeer() {
        int fd = connectPeer();
        int bytes = 64 << 10;
        EXPECT_EQ(
            ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof(bytes)), 0);
        return fd;
    }

    // Reads until the target closes the connection; what it still sends
    // first is discarded.
    static ::testing::AssertionResult closedByTarget(int fd) {
        char buf[64 << 10];
        uint64_t drained = 0;
        for (;;) {
            size_t got = 0;
            bool closed = false;
            Status s = net::recvAll(fd, buf, sizeof(buf),
                                    net::deadlineIn(kBoundMs), &got, &closed);
            drained += got;
            if (closed) return ::testing::AssertionSuccess();
            if (!s.ok()) {
                if (s.message() == "recv failed: Connection reset by peer") {
                    return ::testing::AssertionSuccess();
                }
                return ::testing::AssertionFailure()
                       << "connection still open after " << drained
                       << " bytes: " << s.message();
            }
        }
    }

    TcpTransport transport_;
    std::shared_ptr<SegmentManager> manager_;
};

TEST_F(TcpTargetTest, AReadIsOneReplyHeaderThenExactlyItsBytes) {
    // The reply header leaves with the first 1 MiB slice of the payload;
    // the later slices carry none. Byte-exact on the wire: one header,
    // the bytes asked for, and the connection in step for the next frame.
    install(1000);
    std::vector<char> mem((3 << 20) + 4096);
    for (size_t i = 0; i < mem.size(); ++i) mem[i] = char(i * 13 % 253);
    BufferDesc desc = registerBuffer(mem);
    int peer = connectPeer();
    for (uint64_t len : {(3ull << 20) + 5, 1ull << 20, 7ull}) {
        SCOPED_TRACE("READ of " + std::to_string(len) + " bytes");
        const uint64_t offset = 3;
        std::string frame = header(kRead, desc.addr + offset, len);
        ASSERT_TRUE(net::sendAll(peer, frame.data(), frame.size(),
                                 net::deadlineIn(kBoundMs))
                        .ok());
        unsigned char reply[16];
        ASSERT_TRUE(
            net::recvAll(peer, reply, sizeof(reply), net::deadlineIn(kBoundMs))
                .ok());
        // "TREP", version 1, reserved 0, code 0 (OK), then the length.
        const unsigned char expect[8] = {'T', 'R', 'E', 'P', 1, 0, 0, 0};
        EXPECT_TRUE(std::equal(expect, expect + 8, reply));
        uint64_t announced = 0;
        for (int i = 8; i < 16; ++i) announced = (announced << 8) | reply[i];
        EXPECT_EQ(announced, len);
        std::vector<char> got(len);
        ASSERT_TRUE(
            net::recvAll(peer, got.data(), len, net::deadlineIn(kBoundMs))
                .ok());
        EXPECT_TRUE(std::equal(got.begin(), got.end(), mem.begin() + offset));
    }
    // Nothing beyond the three replies.
    char extra;
    EXPECT_EQ(::recv(peer, &extra, 1, MSG_DONTWAIT), -1);
    ::close(peer);
}

TEST_F(TcpTargetTest, RegistrationDoesNotWaitBehindAStalledPeer) {
    install(600000);
    std::vector<char> a(4 << 20, 0), b(4096, 0);
    BufferDesc desc_a = registerBuffer(a);
    int peer = -1;
    ASSERT_NO_FATAL_FAILURE(stalledWriteInto(desc_a, peer));

    // Registering and unregistering another buffer, and registering while
    // the peer stalls, all return at once.
    auto other = std::async(std::launch::async, [&] {
        BufferDesc desc_b;
        desc_b.addr = reinterpret_cast<uint64_t>(b.data());
        desc_b.length = b.size();
        Status s = transport_.addMemoryBuffer(desc_b, MemoryOptions());
        if (s.ok()) s = transport_.removeMemoryBuffer(desc_b);
        return s;
    });
    ASSERT_EQ(other.wait_for(std::chrono::seconds(5)),
              std::future_status::ready)
        << "register/unregister of another buffer waited behind the peer";
    EXPECT_TRUE(other.get().ok());
    EXPECT_EQ(transport_.activeAccesses(), 1u);
    ::close(peer);
    ASSERT_TRUE(waitForAccesses(0));
}

TEST_F(TcpTargetTest, UnregisterFencesAStalledWriteAndNothingLandsAfter) {
    install(200);
    std::vector<char> a(4 << 20, 0);
    BufferDesc desc_a = registerBuffer(a);
    int peer = -1;
    ASSERT_NO_FATAL_FAILURE(stalledWriteInto(desc_a, peer));

    auto started = net::Clock::now();
    ASSERT_TRUE(transport_.removeMemoryBuffer(desc_a).ok());
    auto took = net::Clock::now() - started;
    EXPECT_GE(took, std::chrono::milliseconds(200));
    EXPECT_LT(took, std::chrono::milliseconds(kBoundMs));
    EXPECT_EQ(transport_.activeAccesses(), 0u);
    // The rest of the payload finds the connection gone; A holds the 100
    // bytes that arrived before the unregister and nothing else.
    std::string rest((1 << 20) - 100, 'q');
    net::sendAll(peer, rest.data(), rest.size(), net::deadlineIn(kBoundMs));
    EXPECT_TRUE(closedByTarget(peer));
    EXPECT_EQ(std::string(a.data(), 100), std::string(100, 'p'));
    EXPECT_EQ(std::count(a.begin() + 100, a.end(), 0),
              static_cast<long>(a.size() - 100));
    ::close(peer);
}

TEST_F(TcpTargetTest, UnregisterFencesAReadWhoseReaderStalled) {
    install(200);
    std::vector<char> a(16 << 20, 'r');
    BufferDesc desc_a = registerBuffer(a);
    // The peer asks for 16 MiB and never reads: the target blocks in
    // send() once the socket buffers fill.
    int peer = connectNonReadingPeer();
    std::string frame = header(kRead, desc_a.addr, a.size());
    ASSERT_TRUE(net::sendAll(peer, frame.data(), frame.size(),
                             net::deadlineIn(kBoundMs))
                    .ok());
    ASSERT_TRUE(waitForAccesses(1));
    ASSERT_TRUE(transport_.removeMemoryBuffer(desc_a).ok());
    EXPECT_EQ(transport_.activeAccesses(), 0u);
    EXPECT_TRUE(closedByTarget(peer));
    ::close(peer);
}

TEST_F(TcpTargetTest, AnUnregisteredRangeIsRefusedAndOthersStayServed) {
    install(1000);
    std::vector<char> a(4096, 0), b(4096, 0);
    BufferDesc desc_a = registerBuffer(a);
    BufferDesc desc_b = registerBuffer(b);
    ASSERT_TRUE(transport_.removeMemoryBuffer(desc_a).ok());
    std::ostringstream range;
    range << "[0x" << std::hex << desc_a.addr << ", +0x1000)";
    EXPECT_EQ(transport_.removeMemoryBuffer(desc_a),
              Status::InvalidArgument("tcp transport has no buffer at " +
                                      range.str()));
    int peer = connectPeer();
    for (BufferDesc* d : {&desc_a, &desc_b}) {
        std::string frame = header(kWrite, d->addr, 4) + "abcd";
        ASSERT_TRUE(net::sendAll(peer, frame.data(), frame.size(),
                                 net::deadlineIn(kBoundMs))
                        .ok());
        char reply[16];
        ASSERT_TRUE(
            net::recvAll(peer, reply, sizeof(reply), net::deadlineIn(kBoundMs))
                .ok());
        // Reply code: 1 (bad range) for A, 0 for B.
        EXPECT_EQ(reply[7], d == &desc_a ? 1 : 0);
    }
    EXPECT_EQ(std::string(a.data(), 4), std::string(4, '\0'));
    EXPECT_EQ(std::string(b.data(), 4), "abcd");
    ::close(peer);
}

}  // namespace
}  // namespace mooncake::tent
