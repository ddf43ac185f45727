// TransportSelector: hint, then policy, then the target buffer's order.
#include "tent/runtime/transport_selector.h"

#include <gtest/gtest.h>

#include "kit/request_builder.h"

namespace mooncake::tent {
namespace {

SegmentDesc memorySegment(std::vector<TransportType> buffer_transports) {
    return testing::oneBufferSegment("10.0.0.1:15001",
                                     std::move(buffer_transports));
}

Request requestInBuffer() {
    return testing::makeRequest(Request::WRITE, nullptr, LOCAL_SEGMENT_ID,
                                0x10100, 0x100);
}

Status loadPolicyText(TransportSelector& selector, const std::string& text) {
    Config conf;
    Status s = conf.loadText(text);
    if (!s.ok()) return s;
    return selector.loadPolicy(conf);
}

TEST(TransportSelectorTest, BufferOrderIsTheDefault) {
    TransportSelector selector;
    selector.setLoaded({TCP, MPCOMM});
    TransportType chosen = UNSPEC;
    ASSERT_TRUE(
        selector.select(requestInBuffer(), memorySegment({MPCOMM, TCP}), chosen)
            .ok());
    EXPECT_EQ(chosen, MPCOMM);
}

TEST(TransportSelectorTest, MpcommAfterTcpInDefaultOrderPicksTcp) {
    TransportSelector selector;
    selector.setLoaded({TCP, MPCOMM});
    TransportType chosen = UNSPEC;
    ASSERT_TRUE(
        selector.select(requestInBuffer(), memorySegment({TCP, MPCOMM}), chosen)
            .ok());
    EXPECT_EQ(chosen, TCP);
}

TEST(TransportSelectorTest, BufferOrderSkipsTransportsNotLoadedHere) {
    TransportSelector selector;
    selector.setLoaded({MPCOMM});
    TransportType chosen = UNSPEC;
    ASSERT_TRUE(
        selector.select(requestInBuffer(), memorySegment({TCP, MPCOMM}), chosen)
            .ok());
    EXPECT_EQ(chosen, MPCOMM);
}

TEST(TransportSelectorTest, HintOverridesPolicy) {
    TransportSelector selector;
    ASSERT_TRUE(loadPolicyText(selector, R"({"policy": [
        {"name": "tcp_first", "segment_type": "memory",
         "transports": ["tcp"]}]})")
                    .ok());
    selector.setLoaded({TCP, MPCOMM});
    Request r = requestInBuffer();
    r.transport_hint = MPCOMM;
    TransportType chosen = UNSPEC;
    ASSERT_TRUE(selector.select(r, memorySegment({TCP, MPCOMM}), chosen).ok());
    EXPECT_EQ(chosen, MPCOMM);
}

TEST(TransportSelectorTest, PolicyPicksFirstLoadedListedTransport) {
    TransportSelector selector;
    ASSERT_TRUE(loadPolicyText(selector, R"({"policy": [
        {"name": "mpcomm_memory", "segment_type": "memory",
         "transports": ["shm", "mpcomm", "tcp"]}]})")
                    .ok());
    ASSERT_EQ(selector.policies().size(), 1u);
    EXPECT_EQ(selector.policies()[0].name, "mpcomm_memory");
    EXPECT_EQ(selector.policies()[0].transports,
              (std::vector<TransportType>{SHM, MPCOMM, TCP}));
    // shm is listed first but not loaded here.
    selector.setLoaded({TCP, MPCOMM});
    TransportType chosen = UNSPEC;
    ASSERT_TRUE(
        selector.select(requestInBuffer(), memorySegment({TCP, MPCOMM}), chosen)
            .ok());
    EXPECT_EQ(chosen, MPCOMM);
}

TEST(TransportSelectorTest, PolicySkipsTransportsTheBufferLacks) {
    TransportSelector selector;
    ASSERT_TRUE(loadPolicyText(selector, R"({"policy": [
        {"name": "p", "transports": ["mpcomm", "tcp"]}]})")
                    .ok());
    selector.setLoaded({TCP, MPCOMM});
    TransportType chosen = UNSPEC;
    ASSERT_TRUE(
        selector.select(requestInBuffer(), memorySegment({TCP}), chosen).ok());
    EXPECT_EQ(chosen, TCP);
}

TEST(TransportSelectorTest, FileSegmentPolicyDoesNotMatchMemory) {
    TransportSelector selector;
    ASSERT_TRUE(loadPolicyText(selector, R"({"policy": [
        {"name": "files", "segment_type": "file",
         "transports": ["mpcomm"]}]})")
                    .ok());
    selector.setLoaded({TCP, MPCOMM});
    TransportType chosen = UNSPEC;
    ASSERT_TRUE(
        selector.select(requestInBuffer(), memorySegment({TCP, MPCOMM}), chosen)
            .ok());
    EXPECT_EQ(chosen, TCP);  // buffer order, the policy did not apply
}

TEST(TransportSelectorTest, UnknownTransportInPolicyIsRejectedByName) {
    TransportSelector selector;
    Status s = loadPolicyText(selector, R"({"policy": [
        {"name": "bad_rule", "transports": ["tcp", "warp_drive"]}]})");
    ASSERT_TRUE(s.IsInvalidArgument()) << s;
    EXPECT_EQ(s.message(), "policy bad_rule: unknown transport warp_drive");
}

TEST(TransportSelectorTest, BadSegmentTypeInPolicyIsRejectedByName) {
    TransportSelector selector;
    Status s = loadPolicyText(selector, R"({"policy": [
        {"name": "r", "segment_type": "disk", "transports": ["tcp"]}]})");
    ASSERT_TRUE(s.IsInvalidArgument()) << s;
    EXPECT_EQ(s.message(),
              "policy r: segment_type disk is not \"memory\" or \"file\"");
}

TEST(TransportSelectorTest, HintForTransportNotLoadedIsRejectedByName) {
    TransportSelector selector;
    selector.setLoaded({TCP});
    Request r = requestInBuffer();
    r.transport_hint = MPCOMM;
    TransportType chosen = UNSPEC;
    Status s = selector.select(r, memorySegment({TCP}), chosen);
    ASSERT_TRUE(s.IsInvalidArgument()) << s;
    EXPECT_EQ(s.message(), "transport_hint mpcomm is not loaded (loaded: tcp)");
    EXPECT_EQ(chosen, UNSPEC);
}

TEST(TransportSelectorTest, NoUsableTransportNamesTheSegment) {
    TransportSelector selector;
    selector.setLoaded({TCP});
    TransportType chosen = UNSPEC;
    Status s =
        selector.select(requestInBuffer(), memorySegment({MPCOMM}), chosen);
    ASSERT_TRUE(s.IsInvalidArgument()) << s;
    EXPECT_EQ(s.message(),
              "no transport can carry local * -> remote * (segment "
              "10.0.0.1:15001): mpcomm: not loaded");
}

TEST(TransportSelectorTest, RangeOutsideEveryBufferNamesTheSegment) {
    TransportSelector selector;
    selector.setLoaded({TCP});
    Request r = requestInBuffer();
    r.target_offset = 0x10f00;
    r.length = 0x200;  // runs past the buffer's end
    TransportType chosen = UNSPEC;
    Status s = selector.select(r, memorySegment({TCP}), chosen);
    ASSERT_TRUE(s.IsInvalidArgument()) << s;
    EXPECT_EQ(s.message(),
              "no transport can reach segment 10.0.0.1:15001: no registered "
              "buffer contains [0x10f00, +0x200)");
}

// The engine memoises hinted decisions under generation(): every change
// of what select() reads moves it, to a value no other selector has.
TEST(TransportSelectorTest, EveryChangeMovesTheGeneration) {
    TransportSelector one;
    TransportSelector two;
    EXPECT_EQ(one.generation(), 0u) << "never set up: memoised by nobody";
    one.setLoaded({TCP});
    two.setLoaded({TCP});
    EXPECT_NE(one.generation(), 0u);
    EXPECT_NE(one.generation(), two.generation());
    uint64_t seen = one.generation();
    Capabilities caps;
    caps.dram_to_gpu = true;
    one.setCapabilities(TCP, caps);
    EXPECT_NE(one.generation(), seen);
    seen = one.generation();
    ASSERT_TRUE(loadPolicyText(one, R"({"policy": []})").ok());
    EXPECT_NE(one.generation(), seen);
    seen = one.generation();
    one.setLoaded({TCP, SHM});
    EXPECT_NE(one.generation(), seen);
}

}  // namespace
}  // namespace mooncake::tent
