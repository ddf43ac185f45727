// Selection by capability: only a transport whose capabilities() cover the
// (local, remote) memory pair is chosen, with or without a hint or rule.
#include <gtest/gtest.h>

#include "kit/request_builder.h"
#include "tent/runtime/transport_selector.h"

namespace mooncake::tent {
namespace {

Capabilities dramOnly() {
    Capabilities c;
    c.dram_to_dram = true;
    return c;
}

Capabilities everything() { return Capabilities{true, true, true, true}; }

class CapabilitySelectionTest : public ::testing::Test {
 protected:
    void SetUp() override {
        target_ = testing::oneBufferSegment("10.0.0.1:15001", {TCP, MPCOMM});
        selector_.setLoaded({TCP, MPCOMM});
    }

    RouteContext context(const char* local, const char* remote) {
        RouteContext c;
        c.segment_name = target_.name;
        c.local_location = local;
        c.remote_location = remote;
        c.buffer_transports = &target_.getMemory().buffers[0].transports;
        return c;
    }

    Status select(const char* local, const char* remote,
                  TransportType hint = UNSPEC) {
        Request r = testing::makeRequest(Request::WRITE, nullptr, 1, 0x10000,
                                         0x100, hint);
        chosen_ = UNSPEC;
        return selector_.select(r, context(local, remote), chosen_);
    }

    SegmentDesc target_;
    TransportSelector selector_;
    TransportType chosen_ = UNSPEC;
};

TEST_F(CapabilitySelectionTest, DeviceLocationsAreVramAndUnknownOnesRefused) {
    selector_.setCapabilities(TCP, dramOnly());
    selector_.setCapabilities(MPCOMM, dramOnly());
    for (const char* device : {"cuda:0", "rocm:1", "musa:2", "npu:3"}) {
        Status s = select(device, "cpu:1");
        EXPECT_NE(s.message().find("tcp: no gpu_to_dram"), std::string::npos)
            << device << ": " << s.message();
    }
    EXPECT_TRUE(select("cpu:1", "*").ok());
    EXPECT_EQ(select("cudaish:0", "cpu:0"),
              Status::InvalidArgument(
                  "cannot route: local location \"cudaish:0\" is not one "
                  "of \"*\", \"cpu\", \"cpu:<numa node>\", "
                  "\"cuda:<device>\", \"rocm:<device>\", "
                  "\"musa:<device>\", \"npu:<device>\""));
}

TEST_F(CapabilitySelectionTest, WildcardCountsAsDram) {
    ASSERT_TRUE(select("*", "*").ok());
    EXPECT_EQ(chosen_, TCP);
}

TEST_F(CapabilitySelectionTest, VramToATransportWithoutGpuIsRefusedNamingAll) {
    Status s = select("cuda:0", "cpu:0");
    ASSERT_TRUE(s.IsInvalidArgument()) << s;
    EXPECT_EQ(s.message(),
              "no transport can carry local cuda:0 -> remote cpu:0 (segment "
              "10.0.0.1:15001): tcp: no gpu_to_dram; mpcomm: no gpu_to_dram");
    EXPECT_EQ(chosen_, UNSPEC);
}

TEST_F(CapabilitySelectionTest, VramGoesToTheTransportThatDeclaresIt) {
    selector_.setCapabilities(MPCOMM, everything());
    for (auto [local, remote] :
         {std::pair{"cuda:0", "cpu:0"}, std::pair{"cpu:0", "cuda:1"},
          std::pair{"cuda:0", "cuda:1"}}) {
        ASSERT_TRUE(select(local, remote).ok()) << local << " " << remote;
        EXPECT_EQ(chosen_, MPCOMM) << local << " " << remote;
    }
    ASSERT_TRUE(select("cpu:0", "cpu:0").ok());
    EXPECT_EQ(chosen_, TCP);  // buffer order where both can
}

TEST_F(CapabilitySelectionTest, EachPairNeedsItsOwnCapability) {
    struct Case {
        const char* local;
        const char* remote;
        const char* name;
        bool Capabilities::*flag;
    };
    const Case cases[] = {
        {"cpu:0", "cuda:0", "dram_to_gpu", &Capabilities::dram_to_gpu},
        {"cuda:0", "cpu:0", "gpu_to_dram", &Capabilities::gpu_to_dram},
        {"cuda:0", "cuda:0", "gpu_to_gpu", &Capabilities::gpu_to_gpu},
    };
    for (const Case& c : cases) {
        Capabilities only = dramOnly();
        only.*c.flag = true;
        selector_.setLoaded({TCP, MPCOMM});
        selector_.setCapabilities(MPCOMM, only);
        ASSERT_TRUE(select(c.local, c.remote).ok()) << c.name;
        EXPECT_EQ(chosen_, MPCOMM) << c.name;
        // Every other device pair is refused.
        for (const Case& other : cases) {
            if (other.flag == c.flag) continue;
            Status s = select(other.local, other.remote);
            EXPECT_TRUE(s.IsInvalidArgument()) << c.name << " " << other.name;
            EXPECT_NE(std::string(s.message())
                          .find(std::string("mpcomm: no ") + other.name),
                      std::string::npos)
                << s;
        }
    }
}

TEST_F(CapabilitySelectionTest, AHintThatCannotCarryThePairFails) {
    selector_.setCapabilities(MPCOMM, everything());
    Status s = select("cuda:0", "cpu:0", TCP);
    ASSERT_TRUE(s.IsInvalidArgument()) << s;
    EXPECT_EQ(s.message(),
              "transport_hint tcp cannot carry local cuda:0 -> remote cpu:0 "
              "(segment 10.0.0.1:15001): tcp: no gpu_to_dram");
    EXPECT_EQ(chosen_, UNSPEC);
    ASSERT_TRUE(select("cuda:0", "cpu:0", MPCOMM).ok());
    EXPECT_EQ(chosen_, MPCOMM);
}

TEST_F(CapabilitySelectionTest, APolicyOnlyOffersTransportsThatCanCarry) {
    Config conf;
    ASSERT_TRUE(conf.loadText(R"({"policy": [
        {"name": "tcp_first", "transports": ["tcp", "mpcomm"]}]})")
                    .ok());
    ASSERT_TRUE(selector_.loadPolicy(conf).ok());
    selector_.setCapabilities(MPCOMM, everything());
    ASSERT_TRUE(select("cuda:0", "cuda:0").ok());
    EXPECT_EQ(chosen_, MPCOMM);
    ASSERT_TRUE(select("cpu:0", "cpu:0").ok());
    EXPECT_EQ(chosen_, TCP);
}

TEST_F(CapabilitySelectionTest, ARefusalNamesATransportOnceWithEachReason) {
    Config conf;
    ASSERT_TRUE(conf.loadText(R"({"policy": [
        {"name": "p", "transports": ["shm", "tcp"]}]})")
                    .ok());
    ASSERT_TRUE(selector_.loadPolicy(conf).ok());
    Status s = select("cpu:0", "cuda:0");
    ASSERT_TRUE(s.IsInvalidArgument()) << s;
    EXPECT_EQ(s.message(),
              "no transport can carry local cpu:0 -> remote cuda:0 (segment "
              "10.0.0.1:15001): shm: not loaded; tcp: no dram_to_gpu; "
              "mpcomm: no dram_to_gpu");
}

}  // namespace
}  // namespace mooncake::tent
