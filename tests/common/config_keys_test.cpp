// The configuration keys docs/reliability.md lists, through the public
// entry points that read them (TcpTransport::install, ControlService::
// configure, TransferEngine's constructor): each documented default as the
// code reads it, and each documented refusal with its exact text, which
// names the key and the value.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "kit/log_capture.h"
#include "net/stream_server.h"
#include "tent/runtime/control_plane.h"
#include "tent/transfer_engine.h"
#include "tent/transport/tcp/tcp_transport.h"
#include "transport/tcp/tcp_test_support.h"

namespace mooncake::tent {
namespace {

TEST(ConfigKeysTest, TcpDefaultsAreTheDocumentedOnes) {
    // The initiator's settings start from these; the table says 5000,
    // 1000, 524288 and 2097152 (workers is not documented there).
    const TcpTransport::Settings settings;
    EXPECT_EQ(settings.timeout_ms, 5000);
    EXPECT_EQ(settings.unregister_wait_ms, 1000);
    EXPECT_EQ(settings.send_buffer_bytes, 524288);
    EXPECT_EQ(settings.min_slice_bytes, 2097152);
    // The target's limits after an install with none of the keys set.
    auto manager = std::make_shared<SegmentManager>(
        "127.0.0.1:1", testing::DescriptorFetcher::fixedEndpoint(TCP, ""));
    TcpTransport transport;
    ASSERT_TRUE(
        testing::installTcp(transport, manager, std::make_shared<Config>())
            .ok());
    const net::ServerLimits& limits = transport.server().limits();
    EXPECT_EQ(limits.idle_timeout_ms, 60000);
    EXPECT_EQ(limits.frame_timeout_ms, 30000);
    EXPECT_EQ(limits.max_connections, 256);
    EXPECT_EQ(limits.key_prefix, "transports/tcp");
    EXPECT_TRUE(transport.uninstall().ok());
}

struct Refusal {
    std::string key;
    int value;
    std::string message;
};

TEST(ConfigKeysTest, TcpKeysOutOfBoundsAreRefusedNamingKeyAndValue) {
    const std::string pos = " must be positive, got ";
    const std::vector<Refusal> refusals = {
        {"transports/tcp/timeout_ms", 0,
         "transports/tcp/timeout_ms" + pos + "0"},
        {"transports/tcp/timeout_ms", -5,
         "transports/tcp/timeout_ms" + pos + "-5"},
        {"transports/tcp/workers", 0,
         "transports/tcp/workers must be in [1, 256], got 0"},
        {"transports/tcp/workers", 257,
         "transports/tcp/workers must be in [1, 256], got 257"},
        {"transports/tcp/unregister_wait_ms", 0,
         "transports/tcp/unregister_wait_ms" + pos + "0"},
        {"transports/tcp/idle_timeout_ms", 0,
         "transports/tcp/idle_timeout_ms must be in [1, 2147483647], got 0"},
        {"transports/tcp/frame_timeout_ms", -1,
         "transports/tcp/frame_timeout_ms must be in [1, 2147483647], got -1"},
        {"transports/tcp/max_connections", 0,
         "transports/tcp/max_connections must be in [1, 65536], got 0"},
        {"transports/tcp/max_connections", 65537,
         "transports/tcp/max_connections must be in [1, 65536], got 65537"},
    };
    for (const Refusal& r : refusals) {
        EXPECT_EQ(testing::installWithKey(r.key, r.value),
                  Status::InvalidArgument(r.message))
            << r.key << "=" << r.value;
    }
    // The bounds themselves are accepted.
    for (auto [key, value] : std::vector<std::pair<std::string, int>>{
             {"transports/tcp/timeout_ms", 1},
             {"transports/tcp/workers", 1},
             {"transports/tcp/workers", 256},
             {"transports/tcp/unregister_wait_ms", 1},
             {"transports/tcp/idle_timeout_ms", 1},
             {"transports/tcp/frame_timeout_ms", 1},
             {"transports/tcp/max_connections", 1},
             {"transports/tcp/max_connections", 65536}}) {
        EXPECT_TRUE(testing::installWithKey(key, value).ok())
            << key << "=" << value;
    }
}

TEST(ConfigKeysTest, RpcServerKeysOutOfBoundsAreRefusedNamingKeyAndValue) {
    const std::vector<Refusal> refusals = {
        {"rpc/idle_timeout_ms", 0,
         "rpc/idle_timeout_ms must be in [1, 2147483647], got 0"},
        {"rpc/frame_timeout_ms", -3,
         "rpc/frame_timeout_ms must be in [1, 2147483647], got -3"},
        {"rpc/max_connections", 65537,
         "rpc/max_connections must be in [1, 65536], got 65537"},
    };
    for (const Refusal& r : refusals) {
        ControlService service(std::make_shared<SegmentManager>("", nullptr));
        Config conf;
        conf.set(r.key, r.value);
        EXPECT_EQ(service.configure(conf), Status::InvalidArgument(r.message))
            << r.key << "=" << r.value;
    }
}

// An engine on loopback with only the TCP transport and `key` = `value`.
std::unique_ptr<TransferEngine> engineWith(const std::string& key,
                                           int64_t value) {
    auto conf = std::make_shared<Config>();
    conf->set("rpc_server_hostname", "127.0.0.1");
    conf->set("transports/mpcomm/enable", false);
    conf->set(key, value);
    return std::make_unique<TransferEngine>(conf);
}

TEST(ConfigKeysTest, EngineKeysOutOfBoundsLeaveTheEngineUnavailable) {
    const std::vector<Refusal> refusals = {
        {"metadata/cache_ttl_ms", -1,
         "metadata/cache_ttl_ms must not be negative, got -1"},
        {"rpc/timeout_ms", 0, "rpc/timeout_ms must be positive, got 0"},
        {"rpc/timeout_ms", -1, "rpc/timeout_ms must be positive, got -1"},
    };
    for (const Refusal& r : refusals) {
        testing::LogCapture log;
        auto engine = engineWith(r.key, r.value);
        EXPECT_FALSE(engine->available()) << r.key << "=" << r.value;
        EXPECT_EQ(log.count("TransferEngine is not available: " + r.message), 1)
            << r.message;
    }
    // The bounds themselves: a zero TTL (no caching) and a 1 ms fetch.
    EXPECT_TRUE(engineWith("metadata/cache_ttl_ms", 0)->available());
    EXPECT_TRUE(engineWith("rpc/timeout_ms", 1)->available());
}

TEST(ConfigKeysTest, RpcTimeoutDefaultIsTheDocumentedOne) {
    // What the engine reads when rpc/timeout_ms is not set.
    EXPECT_EQ(P2PSegmentFetcher::kDefaultTimeoutMs, 5000);
}

}  // namespace
}  // namespace mooncake::tent
