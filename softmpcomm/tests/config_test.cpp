// init() validation, environment parsing and the calls that need no peer.
#include "config.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "mpcomm.h"
#include "test_util.h"

namespace {

using namespace mpcomm;
using mpcomm_test::initOnFreePort;
using mpcomm_test::ScopedEnv;

TEST(SoftMpcommConfig, RailsComeFromDeviceNamesTrimmedAndNonEmpty) {
    ScopedEnv filter("MPCOMM_NIC_FILTER", nullptr);
    detail::Config config;
    std::string error;
    ASSERT_TRUE(detail::loadConfig(" r0, r1,,r2 ", &config, &error));
    EXPECT_EQ(config.rails, (std::vector<std::string>{"r0", "r1", "r2"}));
    // docs/building_with_mpcomm.md: two connections per rail by default.
    EXPECT_EQ(config.qps_per_connection, 2);
    EXPECT_EQ(config.max_transfer_size, 1ull << 30);
}

TEST(SoftMpcommConfig, NoDevicesMeansOneRail) {
    ScopedEnv filter("MPCOMM_NIC_FILTER", nullptr);
    detail::Config config;
    std::string error;
    ASSERT_TRUE(detail::loadConfig("", &config, &error));
    EXPECT_EQ(config.rails, (std::vector<std::string>{"soft0"}));
}

TEST(SoftMpcommConfig, NicFilterOverridesDeviceNames) {
    ScopedEnv filter("MPCOMM_NIC_FILTER", "mlx5_3,mlx5_4");
    detail::Config config;
    std::string error;
    ASSERT_TRUE(detail::loadConfig("r0,r1,r2", &config, &error));
    EXPECT_EQ(config.rails, (std::vector<std::string>{"mlx5_3", "mlx5_4"}));
}

TEST(SoftMpcommConfig, QpsAboveSixteenIsRejectedNamingTheValue) {
    ScopedEnv qps("MPCOMM_QPS_PER_CONNECTION", "17");
    detail::Config config;
    std::string error;
    EXPECT_FALSE(detail::loadConfig("", &config, &error));
    EXPECT_EQ(error,
              "invalid MPCOMM_QPS_PER_CONNECTION='17' (expected an integer "
              "in [1, 16])");
}

TEST(SoftMpcommConfig, BadNumbersAreRejected) {
    for (const char* bad :
         {"0", "-1", "abc", "4x", "", "99999999999999999999"}) {
        ScopedEnv qps("MPCOMM_QPS_PER_CONNECTION", bad);
        detail::Config config;
        std::string error;
        EXPECT_FALSE(detail::loadConfig("", &config, &error)) << bad;
    }
    for (const char* bad : {"0", "1M", "-5", " "}) {
        ScopedEnv size("MPCOMM_MAX_RDMA_TRANSFER_SIZE", bad);
        detail::Config config;
        std::string error;
        EXPECT_FALSE(detail::loadConfig("", &config, &error)) << bad;
        EXPECT_NE(error.find("MPCOMM_MAX_RDMA_TRANSFER_SIZE"),
                  std::string::npos);
    }
}

TEST(SoftMpcommConfig, ValidOverridesAreTaken) {
    ScopedEnv qps("MPCOMM_QPS_PER_CONNECTION", "16");
    ScopedEnv size("MPCOMM_MAX_RDMA_TRANSFER_SIZE", "65536");
    detail::Config config;
    std::string error;
    ASSERT_TRUE(detail::loadConfig("", &config, &error)) << error;
    EXPECT_EQ(config.qps_per_connection, 16);
    EXPECT_EQ(config.max_transfer_size, 65536u);
}

TEST(SoftMpcommConfig, TimeoutKnobsDefault) {
    ScopedEnv progress("SOFTMPCOMM_PROGRESS_TIMEOUT_MS", nullptr);
    ScopedEnv handshake("SOFTMPCOMM_HANDSHAKE_TIMEOUT_MS", nullptr);
    ScopedEnv idle("SOFTMPCOMM_IDLE_TIMEOUT_MS", nullptr);
    detail::Config config;
    std::string error;
    ASSERT_TRUE(detail::loadConfig("", &config, &error)) << error;
    EXPECT_EQ(config.progress_timeout_ms, 4000);
    EXPECT_EQ(config.handshake_timeout_ms, 5000);
    EXPECT_EQ(config.idle_timeout_ms, 30000);
}

TEST(SoftMpcommConfig, TimeoutKnobsAreTaken) {
    ScopedEnv progress("SOFTMPCOMM_PROGRESS_TIMEOUT_MS", "1");
    ScopedEnv handshake("SOFTMPCOMM_HANDSHAKE_TIMEOUT_MS", "250");
    ScopedEnv idle("SOFTMPCOMM_IDLE_TIMEOUT_MS", "86400000");
    detail::Config config;
    std::string error;
    ASSERT_TRUE(detail::loadConfig("", &config, &error)) << error;
    EXPECT_EQ(config.progress_timeout_ms, 1);
    EXPECT_EQ(config.handshake_timeout_ms, 250);
    EXPECT_EQ(config.idle_timeout_ms, 86400000);
}

TEST(SoftMpcommConfig, BadTimeoutsAreRejectedNamingVariableAndValue) {
    for (const char* name :
         {"SOFTMPCOMM_PROGRESS_TIMEOUT_MS", "SOFTMPCOMM_HANDSHAKE_TIMEOUT_MS",
          "SOFTMPCOMM_IDLE_TIMEOUT_MS"}) {
        for (const char* bad : {"0", "-5", "abc", "10ms", "", "86400001"}) {
            ScopedEnv knob(name, bad);
            detail::Config config;
            std::string error;
            EXPECT_FALSE(detail::loadConfig("", &config, &error))
                << name << "=" << bad;
            EXPECT_EQ(error, std::string("invalid ") + name + "='" + bad +
                                 "' (expected an integer in [1, 86400000])");
        }
    }
}

// An integer knob: its default, values it takes, and values that fail
// init with "invalid NAME='value' (expected <range>)".
struct IntegerKnob {
    const char* name;
    int detail::Config::*field;
    int default_value;
    std::vector<const char*> good;
    std::vector<const char*> bad;
    const char* range;
};

TEST(SoftMpcommConfig, IntegerKnobsDefaultTakeAndReject) {
    const IntegerKnob knobs[] = {
        {"SOFTMPCOMM_MAX_CONNECTIONS",
         &detail::Config::max_connections,
         1024,
         {"1", "65536"},
         {"0", "-3", "many", "65537"},
         "an integer in [1, 65536]"},
        {"MPCOMM_MAX_OUTSTANDING_PER_QP",
         &detail::Config::max_outstanding_per_qp,
         2,
         {"1", "256", "65536"},
         {"0", "-1", "lots", "65537"},
         "an integer in [1, 65536]"},
        {"SOFTMPCOMM_SEND_BUFFER_BYTES",
         &detail::Config::send_buffer_bytes,
         524288,
         {"0", "65536", "1073741824"},
         {"1", "65535", "-1", "512k", "", "1073741825"},
         "0 or an integer in [65536, 1073741824]"},
    };
    for (const IntegerKnob& knob : knobs) {
        SCOPED_TRACE(knob.name);
        {
            ScopedEnv unset(knob.name, nullptr);
            detail::Config config;
            std::string error;
            ASSERT_TRUE(detail::loadConfig("", &config, &error)) << error;
            EXPECT_EQ(config.*knob.field, knob.default_value);
        }
        for (const char* good : knob.good) {
            ScopedEnv set(knob.name, good);
            detail::Config config;
            std::string error;
            ASSERT_TRUE(detail::loadConfig("", &config, &error)) << error;
            EXPECT_EQ(config.*knob.field, std::stoi(good));
        }
        for (const char* bad : knob.bad) {
            ScopedEnv set(knob.name, bad);
            detail::Config config;
            std::string error;
            EXPECT_FALSE(detail::loadConfig("", &config, &error)) << bad;
            EXPECT_EQ(error, std::string("invalid ") + knob.name + "='" + bad +
                                 "' (expected " + knob.range + ")");
            MPComm comm;
            EXPECT_EQ(initOnFreePort(comm, "a", ""), MPCOMM_ERR_INVALID_ARG);
        }
    }
}

TEST(SoftMpcommInit, PortZeroAndOutOfRangeFail) {
    MPComm comm;
    EXPECT_EQ(comm.init("a", "", 0), MPCOMM_ERR_INVALID_ARG);
    EXPECT_EQ(comm.init("a", "", -1), MPCOMM_ERR_INVALID_ARG);
    EXPECT_EQ(comm.init("a", "", 65536), MPCOMM_ERR_INVALID_ARG);
    EXPECT_EQ(comm.getTcpPort(), 0);
}

TEST(SoftMpcommInit, TakenPortFailsWithoutRetry) {
    MPComm first;
    int port = initOnFreePort(first, "first", "");
    ASSERT_GT(port, 0);
    EXPECT_EQ(first.getTcpPort(), port);
    MPComm second;
    EXPECT_EQ(second.init("second", "", port), MPCOMM_ERR_BIND);
    EXPECT_EQ(second.getTcpPort(), 0);
}

TEST(SoftMpcommInit, QpsSeventeenFailsInit) {
    ScopedEnv qps("MPCOMM_QPS_PER_CONNECTION", "17");
    MPComm comm;
    EXPECT_EQ(initOnFreePort(comm, "a", ""), MPCOMM_ERR_INVALID_ARG);
}

TEST(SoftMpcommInit, BadMaxTransferSizeFailsInit) {
    ScopedEnv size("MPCOMM_MAX_RDMA_TRANSFER_SIZE", "lots");
    MPComm comm;
    EXPECT_EQ(initOnFreePort(comm, "a", ""), MPCOMM_ERR_INVALID_ARG);
}

TEST(SoftMpcommInit, BadTimeoutKnobsFailInit) {
    for (const char* name :
         {"SOFTMPCOMM_PROGRESS_TIMEOUT_MS", "SOFTMPCOMM_HANDSHAKE_TIMEOUT_MS",
          "SOFTMPCOMM_IDLE_TIMEOUT_MS"}) {
        for (const char* bad : {"0", "-1", "soon"}) {
            ScopedEnv knob(name, bad);
            MPComm comm;
            EXPECT_EQ(initOnFreePort(comm, "a", ""), MPCOMM_ERR_INVALID_ARG)
                << name << "=" << bad;
            EXPECT_EQ(comm.getTcpPort(), 0);
        }
    }
}

TEST(SoftMpcommInit, EmptyHostIdAndSecondInitFail) {
    MPComm comm;
    EXPECT_EQ(comm.init("", "", 20000), MPCOMM_ERR_INVALID_ARG);
    int port = initOnFreePort(comm, "a", "");
    ASSERT_GT(port, 0);
    EXPECT_EQ(comm.init("a", "", port + 1), MPCOMM_ERR_INVALID_ARG);
}

TEST(SoftMpcommInit, CallsBeforeInitFailWithNotInitialized) {
    MPComm comm;
    std::vector<char> buf(64);
    EXPECT_EQ(comm.registerMemory(buf.data(), buf.size()),
              MPCOMM_ERR_NOT_INITIALIZED);
    EXPECT_EQ(comm.publishBuffer(buf.data(), buf.size(), 0),
              MPCOMM_ERR_NOT_INITIALIZED);
    EXPECT_EQ(comm.startAcceptThread(), MPCOMM_ERR_NOT_INITIALIZED);
    EXPECT_EQ(comm.connect("b", "127.0.0.1", 20000),
              MPCOMM_ERR_NOT_INITIALIZED);
    RemoteBufferInfo info;
    EXPECT_EQ(comm.queryRemoteBuffer("b", "127.0.0.1", 20000, info),
              MPCOMM_ERR_NOT_INITIALIZED);
    TransferHandle h = comm.putAsync(reinterpret_cast<uintptr_t>(buf.data()),
                                     "b", 0x1000, buf.size());
    EXPECT_NE(h, INVALID_TRANSFER_HANDLE);
    EXPECT_TRUE(comm.isTransferComplete(h));
    EXPECT_EQ(comm.getTransferResult(h).error_code, MPCOMM_ERR_NOT_INITIALIZED);
    EXPECT_EQ(comm.getTransferResult(h).bytes_transferred, 0u);
    comm.stopAcceptThread();
    comm.shutdown();
    comm.shutdown();
}

TEST(SoftMpcommInit, PublishRequiresRegisteredMemory) {
    MPComm comm;
    ASSERT_GT(initOnFreePort(comm, "a", "r0,r1"), 0);
    std::vector<char> buf(4096);
    EXPECT_EQ(comm.publishBuffer(buf.data(), buf.size(), 0),
              MPCOMM_ERR_NOT_REGISTERED);
    EXPECT_EQ(comm.registerMemory(nullptr, 16), MPCOMM_ERR_INVALID_ARG);
    EXPECT_EQ(comm.registerMemory(buf.data(), 0), MPCOMM_ERR_INVALID_ARG);
    ASSERT_EQ(comm.registerMemory(buf.data(), 1024), MPCOMM_SUCCESS);
    // Larger than the registered region.
    EXPECT_EQ(comm.publishBuffer(buf.data(), 2048, 0),
              MPCOMM_ERR_NOT_REGISTERED);
    EXPECT_EQ(comm.publishBuffer(buf.data() + 512, 512, 1), MPCOMM_SUCCESS);
    comm.unpublishBuffer(buf.data() + 512);
    comm.unpublishBuffer(buf.data() + 512);  // harmless twice
    comm.unregisterMemory(buf.data());
    EXPECT_EQ(comm.publishBuffer(buf.data(), 512, 0),
              MPCOMM_ERR_NOT_REGISTERED);
}

TEST(SoftMpcommInit, HandleBookkeeping) {
    MPComm comm;
    ASSERT_GT(initOnFreePort(comm, "a", ""), 0);
    EXPECT_EQ(comm.getTransferResult(424242).error_code,
              MPCOMM_ERR_INVALID_HANDLE);
    EXPECT_TRUE(comm.isTransferComplete(424242));
    comm.releaseTransfer(424242);
    comm.releaseTransfer(INVALID_TRANSFER_HANDLE);

    std::vector<char> buf(64);
    ASSERT_EQ(comm.registerMemory(buf.data(), buf.size()), MPCOMM_SUCCESS);
    auto local = reinterpret_cast<uintptr_t>(buf.data());
    // Argument errors still come back as valid, already-complete handles.
    TransferHandle zero = comm.getAsync(local, "b", 0x1000, 0);
    ASSERT_NE(zero, INVALID_TRANSFER_HANDLE);
    EXPECT_TRUE(comm.isTransferComplete(zero));
    EXPECT_EQ(comm.getTransferResult(zero).error_code, MPCOMM_ERR_INVALID_ARG);
    TransferHandle unregistered = comm.getAsync(local + 4096, "b", 0x1000, 8);
    EXPECT_EQ(comm.getTransferResult(unregistered).error_code,
              MPCOMM_ERR_NOT_REGISTERED);
    TransferHandle unknown = comm.putAsync(local, "nobody", 0x1000, 8);
    EXPECT_EQ(comm.getTransferResult(unknown).error_code,
              MPCOMM_ERR_UNKNOWN_HOST);
    EXPECT_NE(zero, unregistered);
    comm.releaseTransfer(zero);
    comm.releaseTransfer(zero);
    EXPECT_EQ(comm.getTransferResult(zero).error_code,
              MPCOMM_ERR_INVALID_HANDLE);
    comm.shutdown();
    // Results stay readable after shutdown; new transfers fail at once.
    EXPECT_EQ(comm.getTransferResult(unknown).error_code,
              MPCOMM_ERR_UNKNOWN_HOST);
    TransferHandle late = comm.putAsync(local, "b", 0x1000, 8);
    EXPECT_EQ(comm.getTransferResult(late).error_code,
              MPCOMM_ERR_NOT_INITIALIZED);
    EXPECT_EQ(comm.getTcpPort(), 0);
}

}  // namespace
