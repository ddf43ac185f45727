// softmpcomm_hostile_client_test, slow and many clients: idle connections
// dropped at the idle timeout (data connections may idle), trickled frames
// dropped at the frame deadline, and newcomers at the connection cap.
#include <sys/socket.h>

#include <string>
#include <vector>

#include "hostile_client_fixture.h"

namespace mpcomm_test {
namespace {

class IdleClients : public HostileClients {
 protected:
    // Short, yet long enough for the well-behaved client's HELLO and query
    // on a loaded machine under a sanitizer.
    const char* idleTimeoutMs() const override { return "1000"; }
};

TEST_F(IdleClients, IdleConnectionsAreDroppedButIdleDataConnectionsStay) {
    auto start = std::chrono::steady_clock::now();
    int idle_data = openAs(ConnKind::kData);
    std::vector<int> idle;
    for (int i = 0; i < 100; ++i) idle.push_back(open());
    for (int i = 0; i < 4; ++i) idle.push_back(openAs(ConnKind::kControl));
    // Served while they sit there.
    EXPECT_TRUE(waitRounds(1));
    for (int fd : idle)
        EXPECT_EQ(peerActionWithin(fd, kIdleDropMs), PeerAction::kClosed);
    EXPECT_GE(msSince(start), 1000);
    // The data connection is older than every dropped one, yet still
    // served: a QP may idle.
    EXPECT_EQ(peerActionWithin(idle_data, 0), PeerAction::kNothing);
    EXPECT_EQ(rawPut(idle_data, rawAddr(), raw_keys_[0], 0x77, 64),
              MPCOMM_SUCCESS);
    EXPECT_EQ(rawWindow()[63], 0x77);
    EXPECT_TRUE(waitRounds(1));
}

// Sends `bytes` one at a time, kTrickleMs apart, until the peer closes.
// Returns how many went out and when (ms after `start`) the close was seen.
constexpr int kTrickleMs = 50;
size_t trickle(int fd, const std::vector<uint8_t>& bytes,
               std::chrono::steady_clock::time_point start,
               int64_t* closed_after_ms) {
    *closed_after_ms = -1;
    for (size_t sent = 0; sent < bytes.size(); ++sent) {
        if (peerActionWithin(fd, kTrickleMs) == PeerAction::kClosed ||
            ::send(fd, &bytes[sent], 1, MSG_NOSIGNAL) != 1) {
            *closed_after_ms = msSince(start);
            return sent;
        }
    }
    if (closedByPeer(fd)) *closed_after_ms = msSince(start);
    return bytes.size();
}

std::vector<uint8_t> frameBytes(const FrameHeader& header,
                                const std::string& payload) {
    std::vector<uint8_t> bytes(kHeaderSize);
    FrameHeader copy = header;
    copy.payload_len = payload.size();
    encodeHeader(copy, bytes.data());
    bytes.insert(bytes.end(), payload.begin(), payload.end());
    return bytes;
}

TEST_F(IdleClients, TricklingClientsAreDroppedAtTheFrameDeadline) {
    // Before HELLO: the whole HELLO must arrive within the idle timeout.
    auto start = std::chrono::steady_clock::now();
    int slow_hello = open();
    FrameHeader hello;
    hello.type = MsgType::kHello;
    auto hello_bytes = frameBytes(hello, "trickler");
    int64_t closed_ms = 0;
    size_t sent = trickle(slow_hello, hello_bytes, start, &closed_ms);
    EXPECT_LT(sent, hello_bytes.size());
    EXPECT_GE(closed_ms, 1000);

    // On a control connection: each query within the idle timeout. The
    // server's clock starts at the HELLO that openAs() sends, so the
    // test's clock must start before it for closed_ms to be a lower bound.
    start = std::chrono::steady_clock::now();
    int slow_query = openAs(ConnKind::kControl);
    FrameHeader query;
    query.type = MsgType::kQueryReq;
    sent = trickle(slow_query, frameBytes(query, ""), start, &closed_ms);
    EXPECT_LT(sent, kHeaderSize);
    EXPECT_GE(closed_ms, 1000);

    // On a data connection: a started payload chunk within the timeout.
    start = std::chrono::steady_clock::now();
    int slow_put = openAs(ConnKind::kData);
    ASSERT_TRUE(sendHeader(slow_put, rawPutHeader(kPage)));
    sent =
        trickle(slow_put, std::vector<uint8_t>(kPage, 0xEE), start, &closed_ms);
    EXPECT_LT(sent, kPage);
    EXPECT_GE(closed_ms, 1000);
    EXPECT_TRUE(onlyArrivedBytesPlaced(kPage, 0xEE, sent));
    EXPECT_TRUE(waitRounds(1));
}

class CappedClients : public HostileClients {
 protected:
    // The well-behaved client holds 4 data connections (2 rails x 2 QPs).
    const char* maxConnections() const override { return "24"; }
};

TEST_F(CappedClients, NewcomersDisplaceTheOldestIdleNeverADataConnection) {
    // The well-behaved client's connections must all be newer than the
    // flood's: at the cap an anonymous connection whose HELLO has not
    // arrived yet is as displaceable as any other (its client is then
    // told, and retries).
    ASSERT_TRUE(pauseMover());
    // Older than every anonymous connection below, and idle throughout.
    int data = openAs(ConnKind::kData);
    std::vector<int> anonymous;
    for (int i = 0; i < 27; ++i) anonymous.push_back(open());
    // 4 + 1 + 19 filled the cap; each later newcomer (the last 8) displaced
    // the oldest anonymous one, at once rather than at the 20 s idle
    // timeout.
    for (int i = 0; i < 8; ++i)
        EXPECT_EQ(peerActionWithin(anonymous[i], kDropMs), PeerAction::kClosed)
            << i;
    // Each query of the well-behaved client displaces one more.
    resumeMover();
    ASSERT_TRUE(waitRounds(2));
    // Oldest first: once one is seen closed, every older one is.
    bool newer_closed = false;
    for (int i = 26; i >= 0; --i) {
        if (newer_closed)
            EXPECT_EQ(peerActionWithin(anonymous[i], kDropMs),
                      PeerAction::kClosed)
                << i;
        else
            newer_closed =
                peerActionWithin(anonymous[i], 0) == PeerAction::kClosed;
    }
    EXPECT_EQ(peerActionWithin(data, 0), PeerAction::kNothing);
    EXPECT_EQ(rawPut(data, rawAddr(), raw_keys_[0], 0x5a, 64), MPCOMM_SUCCESS);
    EXPECT_EQ(rawWindow()[63], 0x5a);
}

}  // namespace
}  // namespace mpcomm_test
