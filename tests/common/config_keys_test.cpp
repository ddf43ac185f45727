// The configuration keys docs/reliability.md lists, through the public
// entry points that read them (TcpTransport::install, ControlService::
// configure, TransferEngine's constructor, MpcommTransport's settings):
// each documented default as the component using it holds it, and each
// documented refusal with its exact text, which names the key and the value.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "kit/log_capture.h"
#include "net/stream_server.h"
#include "rpc/rpc_server.h"
#include "tent/runtime/control_plane.h"
#include "tent/transfer_engine.h"
#include "tent/transport/tcp/tcp_transport.h"
#include "tent/transport/mpcomm/mpcomm_transport.h"
#include "transport/tcp/tcp_test_support.h"

namespace mooncake::tent {
namespace {

TEST(ConfigKeysTest, TcpDefaultsAreTheDocumentedOnes) {
    // What an install with none of the keys set read: the table says 5000,
    // 1000, 10000, 524288, 2097152, 67108864 and 1048576 (workers is not
    // documented there).
    auto manager = std::make_shared<SegmentManager>(
        "127.0.0.1:1", testing::DescriptorFetcher::fixedEndpoint(TCP, ""));
    TcpTransport transport;
    ASSERT_TRUE(
        testing::installTcp(transport, manager, std::make_shared<Config>())
            .ok());
    const TcpTransport::Settings& settings = transport.settings();
    EXPECT_EQ(settings.timeout_ms, 5000);
    EXPECT_EQ(settings.unregister_wait_ms, 1000);
    EXPECT_EQ(settings.unregister_timeout_ms, 10000);
    EXPECT_EQ(settings.send_buffer_bytes, 524288);
    EXPECT_EQ(settings.min_slice_bytes, 2097152);
    EXPECT_EQ(settings.staging_pool_bytes, 67108864);
    EXPECT_EQ(settings.staging_slice_bytes, 1048576);
    // The target's limits.
    const net::ServerLimits& limits = transport.server().limits();
    EXPECT_EQ(limits.idle_timeout_ms, 60000);
    EXPECT_EQ(limits.frame_timeout_ms, 30000);
    EXPECT_EQ(limits.max_connections, 256);
    EXPECT_EQ(limits.key_prefix, "transports/tcp");
    EXPECT_TRUE(transport.uninstall().ok());
    // A set key is what the transport holds instead.
    auto conf = std::make_shared<Config>();
    conf->set("transports/tcp/unregister_timeout_ms", 2500);
    TcpTransport set;
    ASSERT_TRUE(testing::installTcp(set, manager, conf).ok());
    EXPECT_EQ(set.settings().unregister_timeout_ms, 2500);
    EXPECT_EQ(set.settings().unregister_wait_ms, 1000);
    EXPECT_TRUE(set.uninstall().ok());
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
        {"transports/tcp/unregister_timeout_ms", 0,
         "transports/tcp/unregister_timeout_ms" + pos + "0"},
        {"transports/tcp/unregister_timeout_ms", -1,
         "transports/tcp/unregister_timeout_ms" + pos + "-1"},
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
             {"transports/tcp/unregister_timeout_ms", 1},
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
        {"metadata/miss_refresh_interval_ms", -1,
         "metadata/miss_refresh_interval_ms must not be negative, got -1"},
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

TEST(ConfigKeysTest, EngineDescriptorBoundsDefaultToTheDocumentedOnes) {
    // Read back from the segment manager and the fetcher the engine built,
    // not from the constants: 10000 and 5000 are what the table says.
    testing::LogCapture log;
    auto conf = std::make_shared<Config>();
    conf->set("rpc_server_hostname", "127.0.0.1");
    conf->set("transports/mpcomm/enable", false);
    TransferEngine engine(conf);
    ASSERT_TRUE(engine.available());
    EXPECT_EQ(log.count("TransferEngine: metadata/cache_ttl_ms=10000, "
                        "rpc/timeout_ms=5000"),
              1);
    EXPECT_EQ(
        log.count("TransferEngine: metadata/miss_refresh_interval_ms=1000"), 1);
    // A set value is what they hold instead.
    testing::LogCapture set_log;
    EXPECT_TRUE(engineWith("metadata/cache_ttl_ms", 250)->available());
    EXPECT_TRUE(engineWith("rpc/timeout_ms", 750)->available());
    EXPECT_EQ(set_log.count("TransferEngine: metadata/cache_ttl_ms=250, "
                            "rpc/timeout_ms=5000"),
              1);
    EXPECT_EQ(set_log.count("TransferEngine: metadata/cache_ttl_ms=10000, "
                            "rpc/timeout_ms=750"),
              1);
}

TEST(ConfigKeysTest, RpcServerLimitsDefaultToTheDocumentedOnes) {
    // The limits the started server enforces after configure() found none
    // of the keys: 60000, 10000 and 256 in the table.
    ControlService service(std::make_shared<SegmentManager>("", nullptr));
    ASSERT_TRUE(service.configure(Config()).ok());
    ASSERT_TRUE(service.start(0).ok());
    const net::ServerLimits& limits = service.server().limits();
    EXPECT_EQ(limits.idle_timeout_ms, 60000);
    EXPECT_EQ(limits.frame_timeout_ms, 10000);
    EXPECT_EQ(limits.max_connections, 256);
    EXPECT_EQ(limits.key_prefix, "rpc");
    service.stop();
    // Set keys replace them from the next start().
    Config conf;
    conf.set("rpc/idle_timeout_ms", 1500);
    conf.set("rpc/frame_timeout_ms", 700);
    conf.set("rpc/max_connections", 9);
    ASSERT_TRUE(service.configure(conf).ok());
    ASSERT_TRUE(service.start(0).ok());
    EXPECT_EQ(service.server().limits().idle_timeout_ms, 1500);
    EXPECT_EQ(service.server().limits().frame_timeout_ms, 700);
    EXPECT_EQ(service.server().limits().max_connections, 9);
    service.stop();
}

TEST(ConfigKeysTest, MpcommKeysDefaultToTheDocumentedOnes) {
    // What MpcommTransport::install() reads from a configuration without
    // the keys: connect_timeout_ms 10000 and preconnect true in
    // docs/mpcomm_transport.md. (tent_mpcomm_boundary_test's
    // WarmupStartsTheHandshakeInTheBackground shows the default preconnect
    // starting a handshake.)
    const Config empty;
    MpcommTransportEnv env;
    MpcommTransportSettings settings;
    settings.connect_timeout_ms = 1;
    settings.preconnect = false;
    ASSERT_TRUE(
        MpcommTransportSettings::fromConfig(&empty, env, settings).ok());
    EXPECT_EQ(settings.connect_timeout_ms, 10000);
    EXPECT_TRUE(settings.preconnect);
    EXPECT_EQ(settings.advertise_address, "");
    // install() without a Config reads the same defaults.
    settings.connect_timeout_ms = 1;
    settings.preconnect = false;
    ASSERT_TRUE(
        MpcommTransportSettings::fromConfig(nullptr, env, settings).ok());
    EXPECT_EQ(settings.connect_timeout_ms, 10000);
    EXPECT_TRUE(settings.preconnect);
    Config off;
    off.set("transports/mpcomm/preconnect", false);
    ASSERT_TRUE(MpcommTransportSettings::fromConfig(&off, env, settings).ok());
    EXPECT_FALSE(settings.preconnect);
}

}  // namespace
}  // namespace mooncake::tent
