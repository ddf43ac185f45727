// The parse limits in one process: their documented defaults as
// ControlService::configure leaves them, each key's refusal naming key and
// value, a set key taking effect, the shape scan skipping strings and
// comments, a configuration file nested too deep, and the accessors that
// never throw on store data of the wrong type.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "common/json_util.h"
#include "hostile/parse_support.h"
#include "tent/common/config.h"
#include "tent/runtime/control_plane.h"
#include "tent/runtime/metastore.h"
#include "tent/runtime/segment.h"

namespace mooncake::tent::testing {
namespace {

class ParseLimitsTest : public ::testing::Test {
 protected:
    // Back to the defaults for the next case (the limits are process-wide).
    void TearDown() override { EXPECT_TRUE(configure(Config()).ok()); }

    Status configure(const Config& conf) {
        ControlService service(nullptr);
        return service.configure(conf);
    }

    static bool parses(const std::string& text, std::string& errs) {
        Json::Value value;
        errs.clear();
        return parseJsonText(text, true, value, errs);
    }
};

TEST_F(ParseLimitsTest, DefaultsAreTheDocumentedOnes) {
    ASSERT_TRUE(configure(Config()).ok());
    EXPECT_EQ(maxJsonDepth(), 64);
    EXPECT_EQ(maxJsonValues(), 1048576u);
    EXPECT_EQ(maxSegmentBuffers(), 65536);
    std::string errs;
    EXPECT_TRUE(parses(std::string(64, '[') + std::string(64, ']'), errs))
        << errs;
    EXPECT_FALSE(parses(std::string(65, '[') + std::string(65, ']'), errs));
    EXPECT_EQ(errs, "JSON nesting depth 65 exceeds rpc/max_json_depth=64");
    EXPECT_FALSE(parses(std::string(kProbeDepth, '['), errs));
    EXPECT_EQ(errs, "JSON nesting depth 1002 exceeds rpc/max_json_depth=64");
}

TEST_F(ParseLimitsTest, KeysOutOfBoundsAreRefusedNamingKeyAndValue) {
    struct Case {
        const char* key;
        int64_t value;
        std::string message;
    };
    const Case cases[] = {
        {"rpc/max_json_depth", 1,
         "rpc/max_json_depth must be in [2, 1000], got 1"},
        {"rpc/max_json_depth", 1001,
         "rpc/max_json_depth must be in [2, 1000], got 1001"},
        {"rpc/max_json_values", 15,
         "rpc/max_json_values must be in [16, 67108864], got 15"},
        {"metadata/max_segment_buffers", 0,
         "metadata/max_segment_buffers must be in [1, 16777216], got 0"},
    };
    for (const Case& c : cases) {
        Config conf;
        conf.set(c.key, c.value);
        Status s = configure(conf);
        EXPECT_TRUE(s.IsInvalidArgument()) << c.key << ": " << s.ToString();
        EXPECT_EQ(s.message(), c.message);
    }
}

TEST_F(ParseLimitsTest, MaxValueBytesOutOfBoundsIsRefusedNamingTheValue) {
    for (int64_t bytes : {int64_t(1023), (int64_t(1) << 30) + 1}) {
        MetaStoreOptions options;
        options.max_value_bytes = bytes;
        std::shared_ptr<MetaStore> store;
        Status s = MetaStore::Create("redis", "127.0.0.1:1", options, store);
        EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
        EXPECT_EQ(s.message(),
                  "metadata/max_value_bytes must be in [1024, 1073741824], "
                  "got " +
                      std::to_string(bytes));
    }
    EXPECT_EQ(MetaStoreOptions().max_value_bytes, 67108864);
}

TEST_F(ParseLimitsTest, SetKeysTakeEffect) {
    Config conf;
    conf.set("rpc/max_json_depth", 4);
    conf.set("rpc/max_json_values", 16);
    conf.set("metadata/max_segment_buffers", 2);
    ASSERT_TRUE(configure(conf).ok());
    std::string errs;
    EXPECT_TRUE(parses("[[[[]]]]", errs)) << errs;
    EXPECT_FALSE(parses("[[[[[]]]]]", errs));
    EXPECT_EQ(errs, "JSON nesting depth 5 exceeds rpc/max_json_depth=4");
    EXPECT_TRUE(parses("[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15]", errs)) << errs;
    EXPECT_FALSE(parses("[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16]", errs));
    EXPECT_EQ(errs, "JSON text holds 17 values, above rpc/max_json_values=16");

    Json::Value value;
    ASSERT_TRUE(configure(Config()).ok());
    ASSERT_TRUE(
        parseJsonText(descriptorWithBuffers("s", 3), true, value, errs));
    Config buffers;
    buffers.set("metadata/max_segment_buffers", 2);
    ASSERT_TRUE(configure(buffers).ok());
    SegmentDesc desc;
    Status s = segmentFromJson(value, desc);
    EXPECT_EQ(s.message(),
              "segment descriptor lists 3 buffers, above "
              "metadata/max_segment_buffers=2");
    buffers.set("metadata/max_segment_buffers", 3);
    ASSERT_TRUE(configure(buffers).ok());
    s = segmentFromJson(value, desc);
    EXPECT_TRUE(s.ok()) << s.ToString();
}

TEST_F(ParseLimitsTest, TheScanSkipsStringsAndComments) {
    EXPECT_EQ(scanJsonShape("{\"a\":\"[[[{{{\\\"[[\"}").depth, 1);
    EXPECT_EQ(scanJsonShape("// [[[[\n[/* {{{{ */1]").depth, 1);
    EXPECT_EQ(scanJsonShape("[1,[2,3],{\"a\":4}]").values, 7u);
    std::string errs;
    const std::string strings = "{\"s\":\"" + std::string(5000, '[') +
                                "\",\"t\":\"" + std::string(5000, ',') + "\"}";
    EXPECT_TRUE(parses(strings, errs)) << errs;
}

TEST_F(ParseLimitsTest, AConfigurationNestedTooDeepIsRefusedByName) {
    Config conf;
    Status s =
        conf.loadText("{\"a\":" + std::string(kProbeDepth, '['), "probe.json");
    EXPECT_TRUE(s.IsMalformedJson()) << s.ToString();
    EXPECT_EQ(s.message(),
              "invalid JSON in probe.json: JSON nesting depth 1003 exceeds "
              "rpc/max_json_depth=64");
}

TEST_F(ParseLimitsTest, StoreAccessorsNeverThrow) {
    Json::Value value;
    std::string errs;
    ASSERT_TRUE(parseJsonText(
        "{\"pid\":\"12\",\"machine\":{},\"ID\":[1],\"ok\":\"true\","
        "\"big\":18446744073709551615}",
        true, value, errs));
    EXPECT_EQ(jsonInt64Or(value["pid"], -1), -1);
    EXPECT_EQ(jsonStringOr(value["machine"], "?"), "?");
    EXPECT_EQ(jsonStringOr(value["ID"], "0"), "0");
    EXPECT_TRUE(jsonBoolOr(value["ok"], true));
    EXPECT_EQ(jsonInt64Or(value["big"], -1), -1);
    EXPECT_EQ(jsonStringOr(value["missing"], "x"), "x");
}

}  // namespace
}  // namespace mooncake::tent::testing
