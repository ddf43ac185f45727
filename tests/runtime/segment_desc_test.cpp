// SegmentDesc: its JSON form, the validation of a peer's descriptor and
// finding the buffer that holds a range.
#include <gtest/gtest.h>

#include <string>

#include "runtime/segment_test_support.h"
#include "tent/runtime/segment_manager.h"

namespace mooncake::tent {
namespace {

using testing::makeBuffer;

TEST(SegmentDescTest, JsonRoundTripKeepsEveryField) {
    SegmentDesc desc;
    desc.name = "10.0.0.1:15000";
    desc.getMemory().buffers.push_back(makeBuffer(0xFFFFFFFFFFFF0000ull, 4096));
    desc.getMemory().buffers.push_back(makeBuffer(0x1000, 1ull << 40));
    desc.getMemory().transport_attrs[MPCOMM] = "v1:10.0.0.1:13579";
    desc.getMemory().transport_attrs[TCP] = "10.0.0.1:40123";
    Json::Value json = segmentToJson(desc);
    EXPECT_EQ(json["transport_attrs"]["12"].asString(), "v1:10.0.0.1:13579");
    EXPECT_EQ(json["type"].asString(), "memory");

    SegmentDesc back;
    ASSERT_TRUE(segmentFromJson(json, back).ok());
    EXPECT_EQ(back.name, desc.name);
    ASSERT_EQ(back.getMemory().buffers.size(), 2u);
    EXPECT_EQ(back.getMemory().buffers[0].addr, 0xFFFFFFFFFFFF0000ull);
    EXPECT_EQ(back.getMemory().buffers[1].length, 1ull << 40);
    EXPECT_EQ(back.getMemory().buffers[0].transports,
              (std::vector<TransportType>{TCP, MPCOMM}));
    const MemorySegmentDesc& memory = back.getMemory();
    ASSERT_NE(memory.getTransportAttrs(MPCOMM), nullptr);
    EXPECT_EQ(*memory.getTransportAttrs(MPCOMM), "v1:10.0.0.1:13579");
    EXPECT_EQ(memory.getTransportAttrs(RDMA), nullptr);
    EXPECT_EQ(segmentToJson(back), json);
}

TEST(SegmentDescTest, MalformedDescriptorsNameTheField) {
    struct Case {
        const char* field;
        Json::Value value;
        const char* message;
    };
    Json::Value good = segmentToJson([] {
        SegmentDesc d;
        d.name = "h:1";
        d.getMemory().buffers.push_back(makeBuffer(1, 2));
        return d;
    }());
    auto expectBad = [&](const std::function<void(Json::Value&)>& edit,
                         const std::string& message) {
        Json::Value v = good;
        edit(v);
        SegmentDesc out;
        Status s = segmentFromJson(v, out);
        EXPECT_TRUE(s.IsInvalidEntry()) << message;
        EXPECT_EQ(s.message(), message);
    };
    expectBad([](Json::Value& v) { v["name"] = 5; },
              "segment descriptor field name is missing or not a string");
    expectBad([](Json::Value& v) { v["type"] = "disk"; },
              "segment descriptor field type must be \"memory\" or \"file\", "
              "got \"disk\"");
    expectBad([](Json::Value& v) { v["buffers"] = "x"; },
              "segment descriptor field buffers is not an array");
    expectBad([](Json::Value& v) { v["buffers"][0]["addr"] = -1; },
              "segment descriptor field buffers[0].addr is missing or not an "
              "unsigned integer");
    expectBad([](Json::Value& v) { v["buffers"][0]["length"] = "4096"; },
              "segment descriptor field buffers[0].length is missing or not "
              "an unsigned integer");
    expectBad([](Json::Value& v) { v["buffers"][0]["location"] = 0; },
              "segment descriptor field buffers[0].location is not a string");
    expectBad([](Json::Value& v) { v["buffers"][0]["transports"][1] = 99; },
              "segment descriptor field buffers[0].transports[1] is not a "
              "transport type (0..12)");
    expectBad([](Json::Value& v) { v["transport_attrs"]["tcp"] = "x"; },
              "segment descriptor field transport_attrs key \"tcp\" is not a "
              "non-negative integer");
    expectBad([](Json::Value& v) { v["transport_attrs"]["7"] = 1; },
              "segment descriptor field transport_attrs[\"7\"] is not a "
              "string");
    SegmentDesc out;
    EXPECT_TRUE(segmentFromJson(Json::Value(3), out).IsInvalidEntry());
}

TEST(SegmentDescTest, PeerDescriptorsAreValidatedBeforeUse) {
    Json::Value good = segmentToJson([] {
        SegmentDesc d;
        d.name = "h:1";
        d.getMemory().buffers.push_back(makeBuffer(0x1000, 0x1000));
        d.getMemory().transport_attrs[TCP] = "10.0.0.1:40123";
        return d;
    }());
    auto decode = [&](const std::function<void(Json::Value&)>& edit) {
        Json::Value v = good;
        edit(v);
        SegmentDesc out;
        return segmentFromJson(v, out);
    };
    auto bad = [](const std::string& message) {
        return Status::InvalidEntry(message);
    };
    EXPECT_EQ(decode([](Json::Value& v) { v["buffers"][0]["addr"] = 0; }),
              bad("segment descriptor field buffers[0].addr is 0"));
    EXPECT_EQ(decode([](Json::Value& v) { v["buffers"][0]["length"] = 0; }),
              bad("segment descriptor field buffers[0].length is 0"));
    // The last byte may be 2^64 - 1, not one past it.
    EXPECT_TRUE(decode([](Json::Value& v) {
                    v["buffers"][0]["addr"] = Json::UInt64(UINT64_MAX - 15);
                    v["buffers"][0]["length"] = 16;
                }).ok());
    EXPECT_EQ(decode([](Json::Value& v) {
                  v["buffers"][0]["addr"] = Json::UInt64(UINT64_MAX - 15);
                  v["buffers"][0]["length"] = 17;
              }),
              bad("segment descriptor field buffers[0] wraps past 2^64 (addr "
                  "18446744073709551600, length 17)"));
    EXPECT_EQ(decode([](Json::Value& v) {
                  v["buffers"][0]["length"] = Json::UInt64(UINT64_MAX);
              }),
              bad("segment descriptor field buffers[0] wraps past 2^64 (addr "
                  "4096, length 18446744073709551615)"));
    EXPECT_EQ(decode([](Json::Value& v) {
                  v["buffers"][0]["location"] = std::string(257, 'c');
              }),
              bad("segment descriptor field buffers[0].location is 257 bytes, "
                  "above the limit of 256"));
    EXPECT_EQ(
        decode([](Json::Value& v) { v["name"] = std::string(1025, 'n'); }),
        bad("segment descriptor field name is 1025 bytes, above the "
            "limit of 1024"));
    for (const char* key : {"+7", "07", " 7", "7 ", "-1", "1234567890"}) {
        EXPECT_EQ(
            decode([&](Json::Value& v) { v["transport_attrs"][key] = "x"; }),
            bad(std::string("segment descriptor field transport_attrs "
                            "key \"") +
                key + "\" is not a non-negative integer"));
    }
    EXPECT_EQ(decode([](Json::Value& v) {
                  v["transport_attrs"][std::string("\x01", 1)] = "x";
              }),
              bad("segment descriptor field transport_attrs key \"\\x01\" is "
                  "not a non-negative integer"));
    EXPECT_EQ(decode([](Json::Value& v) {
                  v["transport_attrs"]["7"] = std::string("a\nb");
              }),
              bad("segment descriptor field transport_attrs[\"7\"] contains "
                  "control character 10"));
    EXPECT_EQ(decode([](Json::Value& v) {
                  v["transport_attrs"]["7"] = std::string(1025, 'a');
              }),
              bad("segment descriptor field transport_attrs[\"7\"] is 1025 "
                  "bytes, above the limit of 1024"));
    // A transport type this build does not know is dropped, not an error.
    Json::Value newer = good;
    newer["transport_attrs"]["99"] = "future";
    SegmentDesc out;
    ASSERT_TRUE(segmentFromJson(newer, out).ok());
    EXPECT_EQ(out.getMemory().transport_attrs.size(), 1u);
    EXPECT_EQ(out.getMemory().transport_attrs.at(TCP), "10.0.0.1:40123");
}

TEST(SegmentDescTest, FindBufferNeedsTheWholeRange) {
    SegmentDesc seg;
    MemorySegmentDesc& mem = seg.getMemory();
    mem.buffers.push_back(makeBuffer(1000, 100));
    mem.buffers.push_back(makeBuffer(UINT64_MAX - 10, 10));
    EXPECT_EQ(seg.findBuffer(1000, 100), &mem.buffers[0]);
    EXPECT_EQ(seg.findBuffer(1050, 50), &mem.buffers[0]);
    EXPECT_EQ(seg.findBuffer(1050, 51), nullptr);
    EXPECT_EQ(seg.findBuffer(999, 2), nullptr);
    EXPECT_EQ(seg.findBuffer(UINT64_MAX - 5, 5), &mem.buffers[1]);
    // Would wrap past 2^64 if computed as addr + length.
    EXPECT_EQ(seg.findBuffer(UINT64_MAX - 5, UINT64_MAX), nullptr);
    // A file segment has no buffers to find.
    SegmentDesc file;
    file.type = SegmentType::File;
    file.detail = FileSegmentDesc{};
    EXPECT_EQ(file.findBuffer(1000, 1), nullptr);
}

}  // namespace
}  // namespace mooncake::tent
