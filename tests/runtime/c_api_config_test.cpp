// The tent_* C API's configuration: settings per thread reaching the
// engine as typed values, a configuration file read at creation, and an
// engine that cannot come up. The rest of the API is in c_api_test.cpp.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>

#include "kit/free_tcp_port.h"
#include "tent/transfer_engine.h"

namespace {

// Configuration settings are per thread and outlive the engines they made
// (as upstream), so each test that sets some runs on a thread of its own.
template <typename Body>
void onOwnThread(Body body) {
    std::thread t(body);
    t.join();
}

class CApiConfigTest : public ::testing::Test {
 protected:
    void SetUp() override { ::unsetenv("MC_TENT_CONF"); }
};

TEST_F(CApiConfigTest, SetConfigReachesTheEngineAsTypedValues) {
    onOwnThread([] {
        const int port = mooncake::tent::testing::freeTcpPort();
        tent_set_config("rpc_server_hostname", "127.0.0.1");
        tent_set_config("rpc_server_port", std::to_string(port).c_str());
        tent_engine_t e = tent_create_engine();
        ASSERT_NE(e, nullptr) << tent_last_error();

        char host[64];
        uint16_t got_port = 0;
        ASSERT_EQ(tent_rpc_server_addr_port(e, host, sizeof(host), &got_port),
                  0)
            << tent_last_error();
        EXPECT_STREQ(host, "127.0.0.1");
        EXPECT_EQ(got_port, port);
        char name[64];
        ASSERT_EQ(tent_segment_name(e, name, sizeof(name)), 0);
        EXPECT_EQ(std::string(name), "127.0.0.1:" + std::to_string(port));

        char tiny[4];
        EXPECT_EQ(tent_rpc_server_addr_port(e, tiny, sizeof(tiny), &got_port),
                  -1);
        EXPECT_EQ(
            std::string(tent_last_error()),
            "tent_rpc_server_addr_port: buffer of 4 bytes is too small for "
            "127.0.0.1 (needs 10)");
        tent_destroy_engine(e);
    });
}

TEST_F(CApiConfigTest, SettingsStayOnTheThreadThatMadeThem) {
    const int port = mooncake::tent::testing::freeTcpPort();
    onOwnThread([port] {
        tent_set_config("rpc_server_port", std::to_string(port).c_str());
    });
    tent_engine_t e = tent_create_engine();
    ASSERT_NE(e, nullptr) << tent_last_error();
    uint16_t got_port = 0;
    char host[64];
    ASSERT_EQ(tent_rpc_server_addr_port(e, host, sizeof(host), &got_port), 0);
    EXPECT_NE(got_port, port);
    tent_destroy_engine(e);
}

TEST_F(CApiConfigTest, ConfigFileIsReadAtCreation) {
    onOwnThread([] {
        const std::string path = ::testing::TempDir() + "/c_api_test_conf.json";
        const int port = mooncake::tent::testing::freeTcpPort();
        {
            std::ofstream out(path);
            out << "{\"rpc_server_hostname\": \"127.0.0.1\", "
                   "\"rpc_server_port\": "
                << port << "}";
        }
        tent_load_config_from_file(path.c_str());
        tent_engine_t e = tent_create_engine();
        ASSERT_NE(e, nullptr) << tent_last_error();
        char name[64];
        ASSERT_EQ(tent_segment_name(e, name, sizeof(name)), 0);
        EXPECT_EQ(std::string(name), "127.0.0.1:" + std::to_string(port));
        tent_destroy_engine(e);

        tent_load_config_from_file("/nonexistent/tent.json");
        EXPECT_EQ(tent_create_engine(), nullptr);
        EXPECT_EQ(
            std::string(tent_last_error()).rfind("tent_create_engine: ", 0), 0u)
            << tent_last_error();
        EXPECT_NE(std::string(tent_last_error()).find("/nonexistent/tent.json"),
                  std::string::npos)
            << tent_last_error();
    });
}

TEST_F(CApiConfigTest, AnEngineThatCannotComeUpIsNullWithTheReason) {
    onOwnThread([] {
        tent_set_config("metadata_type", "etcd-nowhere");
        EXPECT_EQ(tent_create_engine(), nullptr);
        EXPECT_EQ(std::string(tent_last_error()),
                  "InternalError: TransferEngine is not available: "
                  "metadata_type etcd-nowhere is not supported (p2p, etcd, "
                  "redis and http are)");
        // The setting stays for this thread; a later one replaces it.
        tent_set_config("metadata_type", "p2p");
        tent_engine_t e = tent_create_engine();
        EXPECT_NE(e, nullptr) << tent_last_error();
        tent_destroy_engine(e);
    });
}

}  // namespace
