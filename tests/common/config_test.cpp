#include "tent/common/config.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "tent/common/types.h"

namespace mooncake::tent {
namespace {

// Sets MC_TENT_CONF for one test and restores the previous value.
class ScopedEnv {
 public:
    ScopedEnv(const char* name, const std::string& value) : name_(name) {
        const char* old = std::getenv(name);
        had_old_ = old != nullptr;
        if (had_old_) old_ = old;
        ::setenv(name, value.c_str(), 1);
    }
    ~ScopedEnv() {
        if (had_old_) {
            ::setenv(name_, old_.c_str(), 1);
        } else {
            ::unsetenv(name_);
        }
    }

 private:
    const char* name_;
    bool had_old_ = false;
    std::string old_;
};

// A file under /tmp removed at the end of the test.
class TempFile {
 public:
    explicit TempFile(const std::string& content) {
        char tmpl[] = "/tmp/tent_config_test_XXXXXX";
        int fd = ::mkstemp(tmpl);
        EXPECT_GE(fd, 0);
        ::close(fd);
        path_ = tmpl;
        std::ofstream(path_) << content;
    }
    ~TempFile() { std::remove(path_.c_str()); }
    const std::string& path() const { return path_; }

 private:
    std::string path_;
};

TEST(ConfigTest, SlashPathsSetAndGet) {
    Config conf;
    conf.set("transports/tcp/enable", false);
    conf.set("transports/mpcomm/enable", true);
    conf.set("rpc_server_port", 12345);
    conf.set("name", std::string("seg"));
    EXPECT_FALSE(conf.get("transports/tcp/enable", true));
    EXPECT_TRUE(conf.get("transports/mpcomm/enable", false));
    EXPECT_EQ(conf.get("rpc_server_port", 0), 12345);
    EXPECT_EQ(conf.get("name", "x"), "seg");
    EXPECT_TRUE(conf.contains("transports/tcp"));
    EXPECT_TRUE(conf.getValue("transports/tcp").isObject());
    EXPECT_EQ(conf.getValue("transports/tcp/enable"), Json::Value(false));
    // Redundant separators address the same key.
    EXPECT_FALSE(conf.get("/transports//tcp/enable/", true));
}

TEST(ConfigTest, MissingPathsYieldTheDefault) {
    Config conf;
    EXPECT_TRUE(conf.get("transports/mpcomm/enable", true));
    EXPECT_EQ(conf.get("a/b/c", 7), 7);
    EXPECT_EQ(conf.get("a", "dflt"), "dflt");
    EXPECT_FALSE(conf.contains("a"));
    EXPECT_TRUE(conf.getValue("a/b").isNull());
    // A scalar where an object is expected is not descended into.
    conf.set("a", 1);
    EXPECT_EQ(conf.get("a/b", 9), 9);
}

TEST(ConfigTest, SettingBelowAScalarReplacesItWithAnObject) {
    Config conf;
    conf.set("a", 1);
    conf.set("a/b", 2);
    EXPECT_EQ(conf.get("a/b", 0), 2);
}

TEST(ConfigTest, WrongTypesYieldTheDefault) {
    Config conf;
    ASSERT_TRUE(conf.loadText(R"({"s":"text","i":5,"neg":-3,"d":1.5,
        "b":true,"big":9000000000,"arr":[1],"obj":{}})")
                    .ok());
    EXPECT_EQ(conf.get("s", 42), 42);
    EXPECT_EQ(conf.get("d", 42), 42);
    EXPECT_EQ(conf.get("b", 42), 42);
    EXPECT_EQ(conf.get("big", 42), 42);  // out of int range
    EXPECT_EQ(conf.get<int64_t>("big", 1), 9000000000LL);
    EXPECT_EQ(conf.get<uint64_t>("neg", 11u), 11u);
    EXPECT_EQ(conf.get<uint64_t>("i", 11u), 5u);
    EXPECT_EQ(conf.get<int64_t>("neg", 0), -3);
    EXPECT_EQ(conf.get("i", true), true);  // int is not bool
    EXPECT_EQ(conf.get("i", false), false);
    EXPECT_EQ(conf.get("s", false), false);
    EXPECT_TRUE(conf.get("b", false));
    EXPECT_EQ(conf.get("i", "dflt"), "dflt");
    EXPECT_EQ(conf.get("arr", "dflt"), "dflt");
    EXPECT_DOUBLE_EQ(conf.get("i", 0.0), 5.0);
    EXPECT_DOUBLE_EQ(conf.get("d", 0.0), 1.5);
    EXPECT_DOUBLE_EQ(conf.get("s", 2.5), 2.5);
    EXPECT_DOUBLE_EQ(conf.get("b", 2.5), 2.5);
    EXPECT_EQ(conf.get("obj", 3), 3);
}

TEST(ConfigTest, LoadTextReplacesEverything) {
    Config conf;
    conf.set("old", 1);
    ASSERT_TRUE(conf.loadText(R"({"new":{"k":2}})").ok());
    EXPECT_FALSE(conf.contains("old"));
    EXPECT_EQ(conf.get("new/k", 0), 2);
}

TEST(ConfigTest, LoadTextErrorsNameTheSource) {
    Config conf;
    conf.set("kept", 1);
    Status s = conf.loadText("{bad", "my-source");
    EXPECT_EQ(s.ToString(),
              "MalformedJson: invalid JSON in my-source: Line 1, Column 2: "
              "Missing '}' or object member name");
    EXPECT_EQ(conf.get("kept", 0), 1);  // a failed load changes nothing

    s = conf.loadText("[1,2]", "arr-source");
    EXPECT_TRUE(s.IsMalformedJson());
    EXPECT_EQ(s.message(),
              "configuration in arr-source must be a JSON object, got array");
}

TEST(ConfigTest, LoadFile) {
    TempFile file(R"({"transports":{"tcp":{"enable":false}}})");
    Config conf;
    ASSERT_TRUE(conf.loadFile(file.path()).ok());
    EXPECT_FALSE(conf.get("transports/tcp/enable", true));

    TempFile bad("{not json");
    Status s = conf.loadFile(bad.path());
    EXPECT_EQ(s, Status::MalformedJson("invalid JSON in " + bad.path() +
                                       ": Line 1, Column 2: Missing '}' or "
                                       "object member name"));
}

TEST(ConfigTest, MissingFileIsInvalidArgumentNamingThePath) {
    Config conf;
    Status s = conf.loadFile("/nonexistent/tent.json");
    EXPECT_TRUE(s.IsInvalidArgument());
    EXPECT_EQ(s.message(),
              "cannot open configuration file /nonexistent/tent.json: No such "
              "file or directory");
}

TEST(ConfigTest, EnvOverrideUnsetOrEmptyIsANoOp) {
    Config conf;
    conf.set("a", 1);
    ::unsetenv("MC_TENT_CONF");
    EXPECT_TRUE(conf.applyEnvOverride().ok());
    EXPECT_EQ(conf.get("a", 0), 1);
    ScopedEnv env("MC_TENT_CONF", "");
    EXPECT_TRUE(conf.applyEnvOverride().ok());
    EXPECT_EQ(conf.get("a", 0), 1);
}

Config identityConfig() {
    Config conf;
    conf.set("metadata_type", std::string("p2p"));
    conf.set("metadata_servers", std::string("etcd://x"));
    conf.set("local_segment_name", std::string("10.0.0.9:15000"));
    conf.set("rpc_server_hostname", std::string("10.0.0.9"));
    conf.set("rpc_server_port", 15000);
    conf.set("transports/tcp/enable", false);
    conf.set("transports/mpcomm/enable", true);
    return conf;
}

TEST(ConfigTest, EnvOverrideJsonTextReplacesWholesaleKeepingIdentity) {
    Config conf = identityConfig();
    ScopedEnv env("MC_TENT_CONF",
                  "  {\"rpc_server_hostname\":\"10.0.0.1\","
                  "\"transports\":{\"shm\":{\"enable\":true}}}");
    ASSERT_TRUE(conf.applyEnvOverride().ok());
    // Non-identity keys are gone: they revert to the caller's defaults.
    EXPECT_TRUE(conf.get("transports/tcp/enable", true));
    EXPECT_FALSE(conf.get("transports/mpcomm/enable", false));
    EXPECT_TRUE(conf.get("transports/shm/enable", false));
    // The override's identity key wins; the others are kept.
    EXPECT_EQ(conf.get("rpc_server_hostname", ""), "10.0.0.1");
    EXPECT_EQ(conf.get("metadata_type", ""), "p2p");
    EXPECT_EQ(conf.get("metadata_servers", ""), "etcd://x");
    EXPECT_EQ(conf.get("local_segment_name", ""), "10.0.0.9:15000");
    EXPECT_EQ(conf.get("rpc_server_port", 0), 15000);
}

TEST(ConfigTest, EnvOverrideFilePathReplacesWholesaleKeepingIdentity) {
    TempFile file(R"({"rpc_server_port":16000,"policy":[]})");
    Config conf = identityConfig();
    ScopedEnv env("MC_TENT_CONF", file.path());
    ASSERT_TRUE(conf.applyEnvOverride().ok());
    EXPECT_FALSE(conf.contains("transports"));
    EXPECT_TRUE(conf.getValue("policy").isArray());
    EXPECT_EQ(conf.get("rpc_server_port", 0), 16000);
    EXPECT_EQ(conf.get("rpc_server_hostname", ""), "10.0.0.9");
    EXPECT_EQ(conf.get("metadata_type", ""), "p2p");
}

TEST(ConfigTest, EnvOverrideInvalidJsonNamesTheVariable) {
    Config conf = identityConfig();
    ScopedEnv env("MC_TENT_CONF", "{\"a\":");
    Status s = conf.applyEnvOverride();
    EXPECT_EQ(s.ToString(),
              "MalformedJson: invalid JSON in MC_TENT_CONF: Line 1, Column 6: "
              "Syntax error: value, object or array expected.");
    EXPECT_FALSE(conf.get("transports/tcp/enable", true));  // unchanged
}

TEST(ConfigTest, EnvOverrideMissingFileNamesThePath) {
    Config conf;
    ScopedEnv env("MC_TENT_CONF", "/nonexistent/override.json");
    Status s = conf.applyEnvOverride();
    EXPECT_TRUE(s.IsInvalidArgument());
    EXPECT_EQ(s.message(),
              "MC_TENT_CONF: cannot open configuration file "
              "/nonexistent/override.json: No such file or directory");
}

TEST(ConfigTest, EnvOverrideInvalidFileNamesVariableAndPath) {
    TempFile file("[1]");
    Config conf;
    ScopedEnv env("MC_TENT_CONF", file.path());
    Status s = conf.applyEnvOverride();
    EXPECT_TRUE(s.IsMalformedJson());
    EXPECT_EQ(s.message(), "configuration in MC_TENT_CONF file " + file.path() +
                               " must be a JSON object, got array");
}

TEST(ConfigTest, CopyIsIndependent) {
    Config a;
    a.set("k", 1);
    Config b(a);
    b.set("k", 2);
    Config c;
    c = b;
    c.set("k", 3);
    EXPECT_EQ(a.get("k", 0), 1);
    EXPECT_EQ(b.get("k", 0), 2);
    EXPECT_EQ(c.get("k", 0), 3);
}

TEST(StatusTest, ToStringAndCodeNames) {
    EXPECT_EQ(Status::OK().ToString(), "OK");
    EXPECT_EQ(Status::InvalidArgument("bad x").ToString(),
              "InvalidArgument: bad x");
    EXPECT_EQ(Status::CodeToString(Status::Code::kRpcServiceError),
              "RpcServiceError");
    EXPECT_EQ(Status::CodeToString(Status::Code::kMetadataError),
              "MetadataError");
    // Upstream TENT's numbering, which serialized codes rely on.
    EXPECT_EQ(static_cast<int>(Status::Code::kNeedsRefreshCache), 7);
    EXPECT_EQ(static_cast<int>(Status::Code::kRpcServiceError), 132);
    EXPECT_EQ(static_cast<int>(Status::Code::kNotImplemented), 200);
    // An OK code drops the message, so every OK status is equal.
    EXPECT_EQ(Status(Status::Code::kOk, "ignored"), Status::OK());
    EXPECT_EQ(Status::OK().message(), "");
}

TEST(TypesTest, EveryTransportNameRoundTrips) {
    const char* expected[] = {
        "unspec", "rdma",     "mnnvl", "shm",           "nvlink",
        "gds",    "io_uring", "tcp",   "ascend_direct", "sunrise_link",
        "tpu",    "ub",       "mpcomm"};
    ASSERT_EQ(sizeof(expected) / sizeof(expected[0]),
              static_cast<size_t>(kSupportedTransportTypes));
    for (int i = 0; i < kSupportedTransportTypes; ++i) {
        auto type = static_cast<TransportType>(i);
        EXPECT_STREQ(transportTypeName(type), expected[i]);
        EXPECT_EQ(parseTransportType(expected[i]), type);
    }
    EXPECT_STREQ(transportTypeName(kSupportedTransportTypes), "unspec");
    EXPECT_STREQ(transportTypeName(static_cast<TransportType>(-1)), "unspec");
}

TEST(TypesTest, ParseIsCaseInsensitiveWithAliases) {
    EXPECT_EQ(parseTransportType("MPCOMM"), MPCOMM);
    EXPECT_EQ(parseTransportType("Tcp"), TCP);
    EXPECT_EQ(parseTransportType("iouring"), IOURING);
    EXPECT_EQ(parseTransportType("ascend"), AscendDirect);
    EXPECT_EQ(parseTransportType("bogus"), UNSPEC);
    EXPECT_EQ(parseTransportType(""), UNSPEC);
    EXPECT_STREQ(transferStatusName(COMPLETED), "COMPLETED");
    EXPECT_STREQ(transferStatusName(FAILED), "FAILED");
}

}  // namespace
}  // namespace mooncake::tent
