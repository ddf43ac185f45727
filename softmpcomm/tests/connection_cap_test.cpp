// SOFTMPCOMM_MAX_CONNECTIONS when nothing can be displaced: the listener
// refuses newcomers at once and keeps serving the connections it has. (The
// displacement of idle connections at the cap is a hostile-client case, in
// hostile_client_test.cpp, where a well-behaved client runs alongside.)
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "mpcomm.h"
#include "raw_peer.h"
#include "test_util.h"

namespace {

using namespace mpcomm;
using namespace mpcomm::detail;
using mpcomm_test::initOnFreePort;
using mpcomm_test::PeerAction;
using mpcomm_test::peerActionWithin;
using mpcomm_test::rawConnect;
using mpcomm_test::rawHello;
using mpcomm_test::rawPut;
using mpcomm_test::rawQuery;
using mpcomm_test::ScopedEnv;

// Far below the idle timeout below: a close seen within it is a refusal.
constexpr int kRefusalMs = 5000;
// How long the test gives the listener to notice a closed connection.
constexpr auto kReadmitTimeout = std::chrono::seconds(10);

TEST(CappedListener, WithOnlyDataConnectionsNewcomersAreRefusedAtOnce) {
    ScopedEnv cap("SOFTMPCOMM_MAX_CONNECTIONS", "2");
    ScopedEnv idle("SOFTMPCOMM_IDLE_TIMEOUT_MS", "30000");
    MPComm target;
    int port = initOnFreePort(target, "target", "r0");
    ASSERT_GT(port, 0);
    ASSERT_EQ(target.startAcceptThread(), MPCOMM_SUCCESS);
    std::vector<uint8_t> window(4096, 0);
    ASSERT_EQ(target.registerMemory(window.data(), window.size()),
              MPCOMM_SUCCESS);
    ASSERT_EQ(target.publishBuffer(window.data(), window.size(), 0),
              MPCOMM_SUCCESS);
    std::vector<RemoteBufferEntry> entries;
    std::string error;
    ASSERT_TRUE(rawQuery(port, &entries, &error)) << error;
    ASSERT_EQ(entries.size(), 1u);
    const uint32_t key = entries[0].rkeys.at(0);
    const uint64_t addr = reinterpret_cast<uint64_t>(window.data());

    // Two data connections fill the cap; neither may be displaced.
    std::vector<int> data;
    for (int i = 0; i < 2; ++i) {
        int fd = rawConnect(port, &error);
        ASSERT_GE(fd, 0) << error;
        ASSERT_TRUE(rawHello(fd, ConnKind::kData, 0, &error)) << error;
        data.push_back(fd);
    }
    // A newcomer is closed unanswered, long before any idle timeout.
    int refused = rawConnect(port, &error);
    ASSERT_GE(refused, 0) << error;
    EXPECT_EQ(peerActionWithin(refused, kRefusalMs), PeerAction::kClosed);
    EXPECT_FALSE(rawHello(refused, ConnKind::kControl, 0, &error));
    closeSocket(refused);
    // The data connections are still served.
    EXPECT_EQ(rawPut(data[1], addr, key, 0x31, 16), MPCOMM_SUCCESS);
    EXPECT_EQ(window[15], 0x31);

    // Once one of them closes, a newcomer is admitted again (as soon as the
    // listener has seen the close: retried until then, within a bound).
    closeSocket(data[0]);
    auto deadline = std::chrono::steady_clock::now() + kReadmitTimeout;
    bool admitted = false;
    while (!admitted && std::chrono::steady_clock::now() < deadline) {
        int fd = rawConnect(port, &error);
        ASSERT_GE(fd, 0) << error;
        admitted = rawHello(fd, ConnKind::kData, 0, &error);
        if (admitted) EXPECT_EQ(rawPut(fd, addr, key, 0x32, 8), MPCOMM_SUCCESS);
        closeSocket(fd);
    }
    EXPECT_TRUE(admitted);
    EXPECT_EQ(window[7], 0x32);
    EXPECT_EQ(rawPut(data[1], addr, key, 0x33, 4), MPCOMM_SUCCESS);
    EXPECT_EQ(window[3], 0x33);
    closeSocket(data[1]);
}

}  // namespace
