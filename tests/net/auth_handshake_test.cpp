// src/net/auth_handshake: the cluster token's challenge-response, between
// real loopback sockets: a StreamServer with a token against clients with
// the right one, a wrong one, none, and hand-played hostile handshakes
// (truncated, oversized, silent, replayed, reflected); a client against a
// server without a token and one that does not know it; and the bytes a
// client sends, captured, never holding the token.
#include "net/auth_handshake.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "kit/log_capture.h"
#include "kit/scoped_env.h"
#include "net/net_test_support.h"

namespace mooncake::tent::net {
namespace {

const std::string kToken = "cluster-secret-7f3a9c";
const std::string kRefusedOurToken =
    "auth handshake: the server refused our token: rpc/auth_token (or "
    "MC_TENT_AUTH_TOKEN) differs between the two engines";
const std::string kNoTokenHint =
    " (has the server no cluster token, rpc/auth_token / "
    "MC_TENT_AUTH_TOKEN?)";

ServerLimits tokenLimits(int frame_timeout_ms = 10000) {
    ServerLimits limits;
    limits.auth_token = kToken;
    limits.frame_timeout_ms = frame_timeout_ms;
    return limits;
}

// The refusal line the server logs for `why`.
std::string refusalLine(uint16_t client_port, const std::string& why,
                        int frame_timeout_ms = 10000) {
    return "EchoServer: refused the connection from 127.0.0.1:" +
           std::to_string(client_port) + ": " + why +
           " (cluster token rpc/auth_token; handshake bounded by "
           "test/frame_timeout_ms=" +
           std::to_string(frame_timeout_ms) + " ms)";
}

uint16_t localPort(int fd) {
    sockaddr_in addr{};
    socklen_t len = sizeof(addr);
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
    return ntohs(addr.sin_port);
}

// An EchoServer with a token that records the connections whose requests
// the protocol handler could see: the idle hook runs only after the
// handshake (and again before each later request, hence a set).
struct TokenServer {
    explicit TokenServer(ServerLimits limits = tokenLimits())
        : echo(limits, [this](const StreamServer::Connection& c) {
              std::lock_guard<std::mutex> lock(mu);
              peers.insert(c.peer);
          }) {}
    size_t admitted() {
        std::lock_guard<std::mutex> lock(mu);
        return peers.size();
    }
    std::mutex mu;
    std::set<std::string> peers;
    EchoServer echo;
};

// The hello of a hand-played client with nonce `nonce`.
std::string helloWith(const std::string& nonce) {
    std::string hello(kAuthHelloMagic, kAuthMagicBytes);
    hello.push_back(static_cast<char>(kAuthVersion));
    return hello + nonce;
}

// Reads the challenge and returns the server nonce ("" on failure).
std::string readChallenge(int fd) {
    std::string challenge(kAuthGreetingBytes, '\0');
    if (!recvAll(fd, &challenge[0], challenge.size(), deadlineIn(kBoundMs))
             .ok()) {
        return "";
    }
    EXPECT_EQ(challenge.substr(0, 8), "AUTHCHAL");
    EXPECT_EQ(challenge[8], 1);
    return challenge.substr(9);
}

TEST(AuthHandshakeTest, TheRightTokenIsAdmittedAndServed) {
    TokenServer server;
    int fd = -1;
    ASSERT_TRUE(connectWithToken("127.0.0.1", server.echo.port(), kToken,
                                 deadlineIn(kBoundMs), fd)
                    .ok());
    EXPECT_EQ(roundTrip(fd, 'x'), "x");
    EXPECT_EQ(roundTrip(fd, 'y'), "y");
    EXPECT_EQ(server.admitted(), 1u);
    EXPECT_EQ(server.echo.server().stats().auth_refused, 0u);
    ::close(fd);
}

TEST(AuthHandshakeTest, AWrongTokenIsRefusedAndBothSidesSayWhy) {
    testing::LogCapture log;
    TokenServer server;
    int fd = -1;
    Status s = connectWithToken("127.0.0.1", server.echo.port(),
                                "another-token", deadlineIn(kBoundMs), fd);
    EXPECT_TRUE(s.IsRpcServiceError());
    EXPECT_EQ(s.message(), kRefusedOurToken);
    EXPECT_TRUE(server.echo.waitForStats(
        [](const StreamServer::Stats& st) { return st.auth_refused == 1; }));
    EXPECT_EQ(log.countContaining(
                  "wrong token: its proof does not match the cluster token"),
              1);
    EXPECT_EQ(server.admitted(), 0u);
}

TEST(AuthHandshakeTest, AClientWithoutTheTokenIsClosedBeforeItsFrameIsRead) {
    testing::LogCapture log;
    TokenServer server;
    int fd = connectLoopback(server.echo.port());
    const uint16_t port = localPort(fd);
    // A request of the plain protocol: the server reads 8 bytes of it, sees
    // no hello, and closes without answering.
    const std::string plain = "GET /segment HTTP/1.1\r\n";
    ASSERT_TRUE(
        sendAll(fd, plain.data(), plain.size(), deadlineIn(kBoundMs)).ok());
    EXPECT_TRUE(closedByServer(fd));
    EXPECT_TRUE(server.echo.waitForStats(
        [](const StreamServer::Stats& st) { return st.auth_refused == 1; }));
    EXPECT_EQ(log.count(refusalLine(
                  port,
                  "sent no auth hello (its first bytes are \"GET /seg\"): a "
                  "client without the cluster token?")),
              1);
    EXPECT_EQ(server.admitted(), 0u);
    ::close(fd);
}

TEST(AuthHandshakeTest, ASilentClientIsClosedAtTheFrameDeadline) {
    testing::LogCapture log;
    TokenServer server(tokenLimits(300));
    int fd = connectLoopback(server.echo.port());
    const uint16_t port = localPort(fd);
    const auto started = Clock::now();
    EXPECT_TRUE(closedByServer(fd));
    const auto took = Clock::now() - started;
    EXPECT_GE(took, std::chrono::milliseconds(290));
    EXPECT_LT(took, std::chrono::milliseconds(300 + 2000));
    EXPECT_TRUE(server.echo.waitForStats(
        [](const StreamServer::Stats& st) { return st.auth_refused == 1; }));
    EXPECT_EQ(log.count(refusalLine(
                  port, "auth hello: recv timed out after 0 of 8 bytes", 300)),
              1);
    ::close(fd);
}

TEST(AuthHandshakeTest, ATruncatedHelloIsNamedWithItsCount) {
    testing::LogCapture log;
    TokenServer server;
    int fd = connectLoopback(server.echo.port());
    const uint16_t port = localPort(fd);
    const std::string cut = helloWith(std::string(32, 'n')).substr(0, 19);
    ASSERT_TRUE(sendAll(fd, cut.data(), cut.size(), deadlineIn(kBoundMs)).ok());
    ::shutdown(fd, SHUT_WR);
    EXPECT_TRUE(closedByServer(fd));
    EXPECT_TRUE(server.echo.waitForStats(
        [](const StreamServer::Stats& st) { return st.auth_refused == 1; }));
    // 8 magic bytes taken, then 11 of the 33 that follow.
    EXPECT_EQ(log.count(refusalLine(port,
                                    "closed the connection after 11 of 33 "
                                    "bytes of the auth hello")),
              1);
    ::close(fd);
}

TEST(AuthHandshakeTest, AnOversizedHandshakeIsReadOnlyAsFarAsItsSize) {
    testing::LogCapture log;
    TokenServer server;
    int fd = connectLoopback(server.echo.port());
    // A well-formed hello followed by 1 MiB where the 32-byte proof goes:
    // the server takes 32 of it as the proof, refuses it, and closes.
    std::string flood = helloWith(std::string(32, 'n'));
    flood += std::string(1 << 20, 'P');
    std::thread sender([&] {
        (void)sendAll(fd, flood.data(), flood.size(), deadlineIn(kBoundMs));
    });
    EXPECT_TRUE(server.echo.waitForStats(
        [](const StreamServer::Stats& st) { return st.auth_refused == 1; }));
    sender.join();
    EXPECT_EQ(log.countContaining("wrong token: its proof does not match"), 1);
    EXPECT_EQ(server.admitted(), 0u);
    ::close(fd);
}

TEST(AuthHandshakeTest, AReplayedOrReflectedProofIsRefused) {
    TokenServer server;
    const std::string nonce(32, 'c');
    // A client that knows the token, playing by hand: admitted.
    int fd = connectLoopback(server.echo.port());
    const std::string hello = helloWith(nonce);
    ASSERT_TRUE(
        sendAll(fd, hello.data(), hello.size(), deadlineIn(kBoundMs)).ok());
    const std::string server_nonce = readChallenge(fd);
    ASSERT_EQ(server_nonce.size(), 32u);
    const std::string proof =
        authMac(kToken, kAuthClientLabel, nonce, server_nonce);
    ASSERT_TRUE(
        sendAll(fd, proof.data(), proof.size(), deadlineIn(kBoundMs)).ok());
    std::string verdict(33, '\0');
    ASSERT_TRUE(
        recvAll(fd, &verdict[0], verdict.size(), deadlineIn(kBoundMs)).ok());
    EXPECT_EQ(verdict[0], 'A');
    EXPECT_EQ(verdict.substr(1),
              authMac(kToken, kAuthServerLabel, nonce, server_nonce));
    EXPECT_EQ(roundTrip(fd, 'z'), "z");
    ::close(fd);

    // The same hello and the recorded proof on a new connection: the
    // server's nonce is fresh, so the proof no longer matches.
    fd = connectLoopback(server.echo.port());
    ASSERT_TRUE(
        sendAll(fd, hello.data(), hello.size(), deadlineIn(kBoundMs)).ok());
    const std::string fresh = readChallenge(fd);
    EXPECT_NE(fresh, server_nonce);
    ASSERT_TRUE(
        sendAll(fd, proof.data(), proof.size(), deadlineIn(kBoundMs)).ok());
    char byte = 0;
    ASSERT_TRUE(recvAll(fd, &byte, 1, deadlineIn(kBoundMs)).ok());
    EXPECT_EQ(byte, 'R');
    EXPECT_TRUE(closedByServer(fd));
    ::close(fd);

    // The server's own MAC sent back as the proof (the other direction).
    fd = connectLoopback(server.echo.port());
    ASSERT_TRUE(
        sendAll(fd, hello.data(), hello.size(), deadlineIn(kBoundMs)).ok());
    const std::string third = readChallenge(fd);
    const std::string reflected =
        authMac(kToken, kAuthServerLabel, nonce, third);
    ASSERT_TRUE(
        sendAll(fd, reflected.data(), reflected.size(), deadlineIn(kBoundMs))
            .ok());
    ASSERT_TRUE(recvAll(fd, &byte, 1, deadlineIn(kBoundMs)).ok());
    EXPECT_EQ(byte, 'R');
    ::close(fd);
    EXPECT_TRUE(server.echo.waitForStats(
        [](const StreamServer::Stats& st) { return st.auth_refused == 2; }));
    EXPECT_EQ(server.admitted(), 1u);
}

TEST(AuthHandshakeTest, AClientWithATokenNamesAServerWithoutOne) {
    ServerLimits plain;
    EchoServer echo(plain);  // echoes the hello back
    int fd = -1;
    Status s = connectWithToken("127.0.0.1", echo.port(), kToken,
                                deadlineIn(kBoundMs), fd);
    EXPECT_EQ(s.message(),
              "auth handshake: the server answered the hello with "
              "\"AUTHELLO\", not a challenge" +
                  kNoTokenHint);
}

// A hand-played server on a plain listener: accepts one connection, keeps
// every byte the client sends, and answers with `answer(hello)`.
class CapturingServer {
 public:
    using Answer = std::function<std::string(const std::string& hello)>;
    explicit CapturingServer(Answer answer) {
        EXPECT_TRUE(listenOn(0, listen_fd_, port_).ok());
        thread_ = std::thread([this, answer] {
            int fd = ::accept(listen_fd_, nullptr, nullptr);
            if (fd < 0) return;
            std::string hello(kAuthGreetingBytes, '\0');
            if (recvAll(fd, &hello[0], hello.size(), deadlineIn(kBoundMs))
                    .ok()) {
                captured_ = hello;
                const std::string reply = answer(hello);
                (void)sendAll(fd, reply.data(), reply.size(),
                              deadlineIn(kBoundMs));
            }
            // Everything else the client sends, until it closes.
            char buf[256];
            size_t got = 0;
            for (;;) {
                Status st =
                    recvAll(fd, buf, sizeof(buf), deadlineIn(kBoundMs), &got);
                captured_.append(buf, got);
                if (!st.ok()) break;
            }
            ::close(fd);
        });
    }
    ~CapturingServer() {
        if (thread_.joinable()) thread_.join();
        ::close(listen_fd_);
    }
    uint16_t port() const { return port_; }
    // After the client closed.
    const std::string& captured() {
        thread_.join();
        return captured_;
    }

 private:
    int listen_fd_ = -1;
    uint16_t port_ = 0;
    std::thread thread_;
    std::string captured_;
};

TEST(AuthHandshakeTest, TheTokenNeverCrossesTheWire) {
    const std::string server_nonce(32, 's');
    std::string client_nonce;
    CapturingServer server([&](const std::string& hello) {
        client_nonce = hello.substr(9);
        std::string challenge = "AUTHCHAL";
        challenge.push_back(1);
        challenge += server_nonce;
        // The verdict follows the proof unasked: this server accepts
        // whatever comes, to see what a client sends after.
        challenge.push_back('A');
        return challenge +
               authMac(kToken, kAuthServerLabel, hello.substr(9), server_nonce);
    });
    int fd = -1;
    ASSERT_TRUE(connectWithToken("127.0.0.1", server.port(), kToken,
                                 deadlineIn(kBoundMs), fd)
                    .ok());
    ::close(fd);
    const std::string& sent = server.captured();
    // Exactly the hello and the proof, and the token nowhere in them.
    ASSERT_EQ(sent.size(), kAuthGreetingBytes + kAuthMacBytes);
    EXPECT_EQ(sent.substr(0, 9), std::string("AUTHELLO\x01", 9));
    EXPECT_EQ(sent.substr(41),
              authMac(kToken, kAuthClientLabel, client_nonce, server_nonce));
    EXPECT_EQ(sent.find(kToken), std::string::npos);
    EXPECT_EQ(sent.find(kToken.substr(0, 8)), std::string::npos);
}

TEST(AuthHandshakeTest, WithoutATokenNotOneExtraByteIsSent) {
    CapturingServer server([](const std::string&) { return std::string(); });
    int fd = -1;
    ASSERT_TRUE(connectWithToken("127.0.0.1", server.port(), "",
                                 deadlineIn(kBoundMs), fd)
                    .ok());
    // The protocol's own 41 bytes, nothing before them.
    const std::string frame(kAuthGreetingBytes, 'q');
    ASSERT_TRUE(
        sendAll(fd, frame.data(), frame.size(), deadlineIn(kBoundMs)).ok());
    ::close(fd);
    EXPECT_EQ(server.captured(), frame);
}

TEST(AuthHandshakeTest, AServerThatCannotProveTheTokenIsNotTrusted) {
    CapturingServer server([](const std::string& hello) {
        std::string challenge = "AUTHCHAL";
        challenge.push_back(1);
        challenge += std::string(32, 's');
        challenge.push_back('A');  // "accepted", with a MAC it cannot make
        return challenge + authMac("guess", kAuthServerLabel, hello.substr(9),
                                   std::string(32, 's'));
    });
    int fd = -1;
    Status s = connectWithToken("127.0.0.1", server.port(), kToken,
                                deadlineIn(kBoundMs), fd);
    EXPECT_EQ(s.message(),
              "auth handshake: the server accepted us but could not prove it "
              "knows the cluster token: not an engine of this cluster");
}

TEST(AuthHandshakeTest, TheTokenComesFromTheEnvironmentOrTheKeyBounded) {
    Config conf;
    std::string token = "x";
    {
        testing::ScopedEnv env(kAuthTokenEnv, nullptr);
        ASSERT_TRUE(readAuthToken(conf, token).ok());
        EXPECT_EQ(token, "");  // none set: no token
        conf.set("rpc/auth_token", std::string("from-config"));
        ASSERT_TRUE(readAuthToken(conf, token).ok());
        EXPECT_EQ(token, "from-config");
        conf.set("rpc/auth_token", std::string(1025, 'k'));
        Status s = readAuthToken(conf, token);
        EXPECT_EQ(s.message(),
                  "rpc/auth_token holds a token of 1025 bytes; at most 1024 "
                  "are allowed");
        conf.set("rpc/auth_token", 12345);
        s = readAuthToken(conf, token);
        EXPECT_EQ(s.message(),
                  "rpc/auth_token must be a string (the cluster token), got "
                  "a JSON number");
    }
    testing::ScopedEnv env(kAuthTokenEnv, "from-env");
    conf.set("rpc/auth_token", std::string("from-config"));
    ASSERT_TRUE(readAuthToken(conf, token).ok());
    EXPECT_EQ(token, "from-env");
}

}  // namespace
}  // namespace mooncake::tent::net
