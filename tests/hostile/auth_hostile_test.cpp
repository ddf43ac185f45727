// The cluster token between two processes: a target engine (TargetProcess)
// started with MC_TENT_AUTH_TOKEN, and in this process an initiator with
// the same token in rpc/auth_token, initiators with none or a wrong one,
// and raw sockets that skip the handshake. The right token opens the
// segment over RPC and moves bytes over tcp byte-exact; everyone else is
// refused with the named error, and a hostile frame sent without the
// handshake is closed unanswered on both ports, while the same frame after
// the handshake is parsed (and answered): the refusal comes before any
// frame is read. The target keeps serving the good initiator throughout.
#include <gtest/gtest.h>

#include <cstring>

#include "kit/scoped_env.h"
#include "kit/two_process_fixture.h"
#include "net/auth_handshake.h"
#include "net/socket_io.h"
#include "rpc/rpc_frame.h"
#include "tent/runtime/control_plane.h"
#include "transport/tcp/tcp_wire.h"

namespace mooncake::tent::testing {
namespace {

const std::string kToken = "hostile-suite-token-1c9e";
const std::string kRefusedOurToken =
    "auth handshake: the server refused our token: rpc/auth_token (or "
    "MC_TENT_AUTH_TOKEN) differs between the two engines";
constexpr int kBoundMs = 20000;
constexpr size_t kSpan = 1 << 20;

// Everything that arrives on `fd` until the peer closes or resets it (then
// `closed`), or until the bound.
std::string readUntilClosed(int fd, bool& closed) {
    std::string got;
    char buf[4096];
    closed = false;
    for (;;) {
        size_t n = 0;
        bool eof = false;
        Status s = net::recvAll(fd, buf, sizeof(buf), net::deadlineIn(kBoundMs),
                                &n, &eof);
        got.append(buf, n);
        if (s.ok()) continue;
        closed = eof || s.message() == "recv failed: Connection reset by peer";
        return got;
    }
}

class AuthHostileTest : public TwoProcessTest {
 protected:
    void SetUp() override {
        // The target takes its token from the environment, which the child
        // inherits; the initiators below take theirs from the config.
        {
            ScopedEnv env(net::kAuthTokenEnv, kToken.c_str());
            TargetOptions options;
            options.xport = TCP;
            ASSERT_NO_FATAL_FAILURE(startTargetWith(options));
        }
        ASSERT_FALSE(IsSkipped());
        ASSERT_TRUE(net::parseHostPort(target_name_, "segment name", rpc_host_,
                                       rpc_port_)
                        .ok());
    }

    std::unique_ptr<TransferEngine> initiator(const std::string& token) {
        auto conf = onlyTransport(TCP);
        if (!token.empty()) conf->set("rpc/auth_token", token);
        auto engine = std::make_unique<TransferEngine>(conf);
        EXPECT_TRUE(engine->available());
        return engine;
    }

    // The good initiator writes `seed`'s pattern into the target's first
    // kSpan bytes and reads them back, and reads the next kSpan (the
    // target's own seed 7), byte-exact.
    void roundTripBytes(uint8_t seed) {
        uint8_t* local = localBytes();
        for (size_t i = 0; i < kSpan; ++i) local[i] = patternByte(i, seed);
        std::memset(local + kSpan, 0, 2 * kSpan);
        auto states = run({makeRequest(Request::WRITE, local, target_,
                                       target_base_, kSpan, TCP)});
        ASSERT_EQ(states[0].s, COMPLETED);
        states = run({makeRequest(Request::READ, local + kSpan, target_,
                                  target_base_, kSpan, TCP),
                      makeRequest(Request::READ, local + 2 * kSpan, target_,
                                  target_base_ + kSpan, kSpan, TCP)});
        ASSERT_EQ(states[0].s, COMPLETED);
        ASSERT_EQ(states[1].s, COMPLETED);
        for (size_t i = 0; i < kSpan; ++i) {
            ASSERT_EQ(local[kSpan + i], patternByte(i, seed)) << "byte " << i;
            ASSERT_EQ(local[2 * kSpan + i], patternByte(kSpan + i, 7))
                << "byte " << kSpan + i;
        }
    }

    void startGoodInitiator() {
        engine_ = initiator(kToken);
        ASSERT_TRUE(hasTransport(*engine_, TCP));
        ASSERT_TRUE(engine_->allocateLocalMemory(&local_, kBufferSize).ok());
        ASSERT_TRUE(engine_->registerLocalMemory(local_, kBufferSize).ok());
        Status s = engine_->openSegment(target_, target_name_);
        ASSERT_TRUE(s.ok()) << s;
    }

    // The target's TCP data endpoint, from its descriptor fetched with the
    // token.
    void tcpEndpoint(std::string& host, uint16_t& port) {
        SegmentDesc desc;
        Status s = P2PSegmentFetcher(5000, kToken).fetch(target_name_, desc);
        ASSERT_TRUE(s.ok()) << s;
        const std::string endpoint = desc.getMemory().transport_attrs[TCP];
        ASSERT_TRUE(
            net::parseHostPort(endpoint, "tcp endpoint", host, port).ok());
    }

    std::string rpc_host_;
    uint16_t rpc_port_ = 0;
};

TEST_F(AuthHostileTest, OnlyTheRightTokenOpensTheSegmentAndMovesBytes) {
    ASSERT_NO_FATAL_FAILURE(startGoodInitiator());
    ASSERT_NO_FATAL_FAILURE(roundTripBytes(42));

    const std::string prefix =
        "cannot fetch segment " + target_name_ + " (timeout 5000 ms): ";
    SegmentDesc desc;
    // A wrong token: refused by the handshake, and told so.
    Status s =
        P2PSegmentFetcher(5000, "not-the-token").fetch(target_name_, desc);
    EXPECT_TRUE(s.IsRpcServiceError());
    EXPECT_EQ(s.message(), prefix + kRefusedOurToken);
    // No token: its request is never read; the target closes on it.
    s = P2PSegmentFetcher(5000).fetch(target_name_, desc);
    EXPECT_TRUE(s.message() ==
                    prefix +
                        "peer closed the connection before replying to "
                        "GetSegmentDesc" ||
                s.message() == prefix + "recv failed: Connection reset by peer")
        << s.message();

    // The same through whole engines: neither can open the segment.
    auto wrong = initiator("not-the-token");
    SegmentID id = 0;
    s = wrong->openSegment(id, target_name_);
    EXPECT_FALSE(s.ok());
    EXPECT_NE(s.message().find(kRefusedOurToken), std::string::npos) << s;
    auto none = initiator("");
    s = none->openSegment(id, target_name_);
    EXPECT_FALSE(s.ok());
    EXPECT_NE(s.message().find(prefix), std::string::npos) << s;

    ASSERT_NO_FATAL_FAILURE(roundTripBytes(43));
}

// Notifications and probes dial the target's RPC port on connections of
// their own: they present the token as descriptor fetches do (without it
// the target refuses them; the fetch cases above show that refusal).
TEST_F(AuthHostileTest, NotificationsAndProbesPresentTheToken) {
    ASSERT_NO_FATAL_FAILURE(startGoodInitiator());
    Status s = engine_->probePeerAliveByID(target_);
    EXPECT_TRUE(s.ok()) << s;
    s = engine_->sendNotification(target_, Notification{"auth", "hello"});
    EXPECT_TRUE(s.ok()) << s;

    ASSERT_NO_FATAL_FAILURE(roundTripBytes(44));
}

TEST_F(AuthHostileTest, TheTcpDataPortServesOnlyAfterTheHandshake) {
    ASSERT_NO_FATAL_FAILURE(startGoodInitiator());
    std::string host;
    uint16_t port = 0;
    ASSERT_NO_FATAL_FAILURE(tcpEndpoint(host, port));

    // A READ of the target's first 64 bytes, the way the initiator asks.
    tcp_wire::RequestHeader read;
    read.op = tcp_wire::kOpRead;
    read.addr = target_base_ + kSpan;
    read.length = 64;
    unsigned char head[tcp_wire::kRequestHeaderBytes];
    tcp_wire::encode(read, head);

    // Without the handshake: closed, not one byte of memory sent.
    int fd = -1;
    ASSERT_TRUE(net::connectTo(host, port, net::deadlineIn(kBoundMs), fd).ok());
    ASSERT_TRUE(
        net::sendAll(fd, head, sizeof(head), net::deadlineIn(kBoundMs)).ok());
    bool closed = false;
    EXPECT_EQ(readUntilClosed(fd, closed), "");
    EXPECT_TRUE(closed);
    ::close(fd);

    // A wrong token: refused by name.
    Status s = net::connectWithToken(host, port, "not-the-token",
                                     net::deadlineIn(kBoundMs), fd);
    EXPECT_EQ(s.message(), kRefusedOurToken);

    // The right token, by hand: the same READ answered byte-exact.
    ASSERT_TRUE(
        net::connectWithToken(host, port, kToken, net::deadlineIn(kBoundMs), fd)
            .ok());
    ASSERT_TRUE(
        net::sendAll(fd, head, sizeof(head), net::deadlineIn(kBoundMs)).ok());
    unsigned char reply_head[tcp_wire::kReplyHeaderBytes];
    ASSERT_TRUE(net::recvAll(fd, reply_head, sizeof(reply_head),
                             net::deadlineIn(kBoundMs))
                    .ok());
    tcp_wire::ReplyHeader reply;
    ASSERT_TRUE(tcp_wire::decode(reply_head, reply).ok());
    EXPECT_EQ(reply.code, tcp_wire::kReplyOk);
    ASSERT_EQ(reply.length, 64u);
    uint8_t bytes[64];
    ASSERT_TRUE(
        net::recvAll(fd, bytes, sizeof(bytes), net::deadlineIn(kBoundMs)).ok());
    for (size_t i = 0; i < 64; ++i) {
        EXPECT_EQ(bytes[i], patternByte(kSpan + i, 7)) << "byte " << i;
    }
    ::close(fd);
    ASSERT_NO_FATAL_FAILURE(roundTripBytes(44));
}

TEST_F(AuthHostileTest, AHugeLengthPrefixWithoutTheHandshakeIsNeverParsed) {
    ASSERT_NO_FATAL_FAILURE(startGoodInitiator());
    // An RPC frame (version 1) announcing 4 GiB - 16 bytes, then some of
    // its "payload".
    std::string frame("\x01\xff\xff\xff\xf0", 5);
    frame += std::string(60, 'H');

    int fd = -1;
    ASSERT_TRUE(
        net::connectTo(rpc_host_, rpc_port_, net::deadlineIn(kBoundMs), fd)
            .ok());
    ASSERT_TRUE(
        net::sendAll(fd, frame.data(), frame.size(), net::deadlineIn(kBoundMs))
            .ok());
    bool closed = false;
    EXPECT_EQ(readUntilClosed(fd, closed), "");  // no error frame: unparsed
    EXPECT_TRUE(closed);
    ::close(fd);

    // The same frame after the handshake reaches the RPC parser, which
    // refuses its length in an error frame: the silence above is the
    // handshake's doing.
    ASSERT_TRUE(net::connectWithToken(rpc_host_, rpc_port_, kToken,
                                      net::deadlineIn(kBoundMs), fd)
                    .ok());
    ASSERT_TRUE(
        net::sendAll(fd, frame.data(), frame.size(), net::deadlineIn(kBoundMs))
            .ok());
    std::string payload;
    ASSERT_TRUE(
        readFrame(fd, payload, net::deadlineIn(kBoundMs), 1 << 20).ok());
    EXPECT_NE(payload.find("\"status\":\"error\""), std::string::npos)
        << payload;
    ::close(fd);

    ASSERT_NO_FATAL_FAILURE(roundTripBytes(45));
}

}  // namespace
}  // namespace mooncake::tent::testing
