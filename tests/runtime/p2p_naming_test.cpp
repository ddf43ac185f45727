// P2P naming as upstream has it: a configured rpc_server_port is a
// preference. Two target processes given the same one both start; the
// second serves on a free port, which getRpcServerPort() and its segment
// name ("host:<port>") report, and a peer reaches each by that name and
// reads its bytes exactly.
#include <gtest/gtest.h>

#include <vector>

#include "kit/free_tcp_port.h"
#include "kit/store_engine_support.h"
#include "kit/target_process.h"
#include "runtime/store_engine_support.h"

namespace mooncake::tent::testing {
namespace {

uint16_t portOf(const std::string& name) {
    return static_cast<uint16_t>(
        std::atoi(name.substr(name.rfind(':') + 1).c_str()));
}

TEST(P2pNamingTest, TwoEnginesGivenOnePortBothStartAndAreReachedByName) {
    const int port = freeTcpPort();
    ASSERT_NE(port, 0);
    TargetOptions options;
    options.xport = TCP;
    options.rpc_port = port;
    TargetProcess first, second;
    std::string why;
    options.seed = 7;
    ASSERT_EQ(first.start(options, why), TargetProcess::Started::kReady) << why;
    options.seed = 8;
    ASSERT_EQ(second.start(options, why), TargetProcess::Started::kReady)
        << why;
    // The first holds the port it was given; the second reports its own.
    EXPECT_EQ(first.name(), "127.0.0.1:" + std::to_string(port));
    EXPECT_EQ(second.name().substr(0, 10), "127.0.0.1:");
    EXPECT_NE(portOf(second.name()), port);
    EXPECT_NE(portOf(second.name()), 0);

    // In this process too: the engine's own report of its port.
    auto conf = onlyTransport(TCP);
    conf->set("rpc_server_port", port);
    TransferEngine initiator(conf);
    ASSERT_TRUE(initiator.available());
    const uint16_t mine = initiator.getRpcServerPort();
    EXPECT_NE(mine, port);
    EXPECT_NE(mine, portOf(second.name()));
    EXPECT_EQ(initiator.getSegmentName(), "127.0.0.1:" + std::to_string(mine));

    std::vector<uint8_t> local(kBufferSize);
    ASSERT_TRUE(initiator.registerLocalMemory(local.data(), local.size()).ok());
    for (auto [target, seed] :
         {std::pair<TargetProcess*, uint8_t>{&first, 7}, {&second, 8}}) {
        SegmentID handle = 0;
        Status s = initiator.openSegment(handle, target->name());
        ASSERT_TRUE(s.ok()) << target->name() << ": " << s.ToString();
        std::fill(local.begin(), local.end(), 0);
        ASSERT_EQ(transferOnce(initiator, Request::READ, local.data(), handle,
                               target->base(), kBufferSize),
                  COMPLETED)
            << target->name();
        EXPECT_EQ(firstMismatch(local.data(), kBufferSize, seed), kBufferSize)
            << target->name();
    }
    EXPECT_TRUE(initiator.unregisterLocalMemory(local.data()).ok());
    EXPECT_TRUE(first.finish(why)) << why;
    EXPECT_TRUE(second.finish(why)) << why;
}

}  // namespace
}  // namespace mooncake::tent::testing
