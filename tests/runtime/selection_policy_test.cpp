// Policy rule fields: each one selects as documented (docs/policy.md), and
// a bad value, an unknown field or one this tree cannot honour is refused
// at load naming the rule and the field.
#include <gtest/gtest.h>

#include "kit/request_builder.h"
#include "tent/runtime/transport_selector.h"

namespace mooncake::tent {
namespace {

// tcp then mpcomm, both loaded and both registered on the target buffer:
// without a rule, tcp (buffer order) carries everything, so a rule's
// effect shows as mpcomm.
class PolicyFieldTest : public ::testing::Test {
 protected:
    void SetUp() override {
        target_ = testing::oneBufferSegment("10.0.0.1:15001", {TCP, MPCOMM},
                                            0x10000, 0x100000);
        topology_.nic_list_ = {{"mlx5_0", Topology::NIC_RDMA, 0},
                               {"eth0", Topology::NIC_TCP, 0}};
    }

    Status load(const std::string& rules) {
        Config conf;
        Status s = conf.loadText("{\"policy\": " + rules + "}");
        if (!s.ok()) return s;
        s = selector_.loadPolicy(conf, &topology_);
        selector_.setLoaded({TCP, MPCOMM});
        return s;
    }

    // A rule `field: value` routing to mpcomm must load.
    void loadMpcommRule(const std::string& filter) {
        Status s = load(R"([{"name": "r", )" + filter +
                        R"(, "transports": ["mpcomm"]}])");
        ASSERT_TRUE(s.ok()) << s;
    }

    std::string loadError(const std::string& rule) {
        Status s = load("[" + rule + "]");
        EXPECT_TRUE(s.IsInvalidArgument()) << s;
        return std::string(s.message());
    }

    Request request(size_t length = 0x100) {
        return testing::makeRequest(Request::WRITE, nullptr, 1, 0x10000,
                                    length);
    }

    RouteContext context(bool same_machine = false) {
        RouteContext c;
        c.segment_name = target_.name;
        c.same_machine = same_machine;
        c.buffer_transports = &target_.getMemory().buffers[0].transports;
        return c;
    }

    TransportType route(const Request& r, const RouteContext& c) {
        TransportType chosen = UNSPEC;
        Status s = selector_.select(r, c, chosen);
        EXPECT_TRUE(s.ok()) << s;
        return chosen;
    }
    TransportType route(const Request& r) { return route(r, context()); }

    SegmentDesc target_;
    Topology topology_;
    TransportSelector selector_;
};

TEST_F(PolicyFieldTest, PriorityByNameMatchesThatLevelOnly) {
    loadMpcommRule(R"("priority": "low")");
    Request r = request();
    r.priority = PRIO_LOW;
    EXPECT_EQ(route(r), MPCOMM);
    r.priority = PRIO_HIGH;
    EXPECT_EQ(route(r), TCP);
}

TEST_F(PolicyFieldTest, PriorityByNumberMatchesThatNumber) {
    loadMpcommRule(R"("priority": 1)");
    Request r = request();
    r.priority = PRIO_MEDIUM;
    EXPECT_EQ(route(r), MPCOMM);
    r.priority = 2;
    EXPECT_EQ(route(r), TCP);
}

TEST_F(PolicyFieldTest, MinAndMaxSizeBoundTheLengthInclusively) {
    loadMpcommRule(R"("min_size": 4096, "max_size": 8192)");
    EXPECT_EQ(route(request(4095)), TCP);
    EXPECT_EQ(route(request(4096)), MPCOMM);
    EXPECT_EQ(route(request(8192)), MPCOMM);
    EXPECT_EQ(route(request(8193)), TCP);
}

TEST_F(PolicyFieldTest, SameMachineTrueMatchesOnlyATargetOnThisHost) {
    loadMpcommRule(R"("same_machine": true)");
    EXPECT_EQ(route(request(), context(true)), MPCOMM);
    EXPECT_EQ(route(request(), context(false)), TCP);
}

TEST_F(PolicyFieldTest, SameMachineFalseMatchesOnlyAnotherHost) {
    loadMpcommRule(R"("same_machine": false)");
    EXPECT_EQ(route(request(), context(true)), TCP);
    EXPECT_EQ(route(request(), context(false)), MPCOMM);
}

TEST_F(PolicyFieldTest, LocalAndRemoteMemoryMatchTheBuffersLocations) {
    loadMpcommRule(R"("local_memory": "dram", "remote_memory": "vram")");
    Capabilities all{true, true, true, true};
    selector_.setCapabilities(TCP, all);
    selector_.setCapabilities(MPCOMM, all);
    RouteContext c = context();
    c.local_location = "cpu:0";
    c.remote_location = "cuda:1";
    EXPECT_EQ(route(request(), c), MPCOMM);
    c.remote_location = "cpu:1";
    EXPECT_EQ(route(request(), c), TCP);
    c.local_location = "cuda:0";
    c.remote_location = "cuda:1";
    EXPECT_EQ(route(request(), c), TCP);
}

TEST_F(PolicyFieldTest, MemoryAcceptsUpstreamsNamesAndAny) {
    loadMpcommRule(R"("local_memory": "cuda", "remote_memory": "*")");
    ASSERT_EQ(selector_.policies().size(), 1u);
    EXPECT_EQ(selector_.policies()[0].local_memory, MemoryKind::kVram);
    EXPECT_FALSE(selector_.policies()[0].remote_memory.has_value());
    loadMpcommRule(R"("local_memory": "CPU", "remote_memory": "any")");
    EXPECT_EQ(selector_.policies()[0].local_memory, MemoryKind::kDram);
    EXPECT_FALSE(selector_.policies()[0].remote_memory.has_value());
}

TEST_F(PolicyFieldTest, IntentTypeMatchesThatIntentOnly) {
    loadMpcommRule(R"("intent_type": "Checkpoint")");
    Request r = request();
    r.intent_type = IntentType::CHECKPOINT;
    EXPECT_EQ(route(r), MPCOMM);
    r.intent_type = IntentType::INTENT_UNSPEC;
    EXPECT_EQ(route(r), TCP);
    loadMpcommRule(R"("intent_type": 5)");
    r.intent_type = IntentType::WEIGHT_LOADING;
    EXPECT_EQ(route(r), MPCOMM);
}

TEST_F(PolicyFieldTest, DevicesLimitTheRuleToTransportsOnThoseNics) {
    ASSERT_TRUE(load(R"([{"name": "rdma_nics", "devices": ["mlx5_0"],
                         "transports": ["tcp", "mpcomm"]}])")
                    .ok());
    EXPECT_EQ(selector_.policies()[0].devices,
              std::vector<std::string>{"mlx5_0"});
    EXPECT_EQ(route(request()), MPCOMM);
    ASSERT_TRUE(load(R"([{"name": "tcp_nics", "devices": ["eth0"],
                         "transports": ["mpcomm", "tcp"]}])")
                    .ok());
    EXPECT_EQ(route(request()), TCP);
}

TEST_F(PolicyFieldTest, PolicyNameBindsTheRuleWhateverItsFilters) {
    ASSERT_TRUE(load(R"([{"name": "first", "transports": ["tcp"]},
                         {"name": "big_only", "min_size": 1000000000,
                          "transports": ["mpcomm"]}])")
                    .ok());
    Request r = request();
    EXPECT_EQ(route(r), TCP);
    r.policy_name = "big_only";
    EXPECT_EQ(route(r), MPCOMM);
}

TEST_F(PolicyFieldTest, PolicyNameOfNoRuleFailsNamingTheRules) {
    ASSERT_TRUE(load(R"([{"name": "a", "transports": ["tcp"]}])").ok());
    Request r = request();
    r.policy_name = "b";
    TransportType chosen = UNSPEC;
    Status s = selector_.select(r, context(), chosen);
    ASSERT_TRUE(s.IsInvalidArgument()) << s;
    EXPECT_EQ(s.message(), "policy_name b names no policy rule (rules: a)");
}

TEST_F(PolicyFieldTest, PolicyNameOfAFileRuleFailsForMemory) {
    ASSERT_TRUE(load(R"([{"name": "f", "segment_type": "file",
                         "transports": ["tcp"]}])")
                    .ok());
    Request r = request();
    r.policy_name = "f";
    TransportType chosen = UNSPEC;
    Status s = selector_.select(r, context(), chosen);
    ASSERT_TRUE(s.IsInvalidArgument()) << s;
    EXPECT_EQ(s.message(),
              "policy_name f: the rule is for file segments, segment "
              "10.0.0.1:15001 is memory");
}

TEST_F(PolicyFieldTest, AMatchingRuleWithNoUsableTransportFallsThrough) {
    ASSERT_TRUE(load(R"([{"name": "shm_only", "transports": ["shm"]},
                         {"name": "then", "transports": ["mpcomm"]}])")
                    .ok());
    EXPECT_EQ(route(request()), MPCOMM);
}

TEST_F(PolicyFieldTest, ARuleWithoutTransportsOffersTheBuffersOrder) {
    ASSERT_TRUE(load(R"([{"name": "big", "min_size": 16}])").ok());
    EXPECT_TRUE(selector_.policies()[0].transports.empty());
    EXPECT_EQ(route(request()), TCP);
}

TEST_F(PolicyFieldTest, UnknownFieldIsRefusedNamingRuleAndField) {
    EXPECT_EQ(loadError(R"({"name": "r", "colour": "red"})"),
              "policy r: unknown field colour");
}

TEST_F(PolicyFieldTest, QueuePairFieldsAreRefusedNamingTheField) {
    for (const char* field : {"service_level", "traffic_class", "qp_pool"}) {
        EXPECT_EQ(
            loadError(std::string(R"({"name": "q", ")") + field + R"(": 3})"),
            std::string("policy q: field ") + field +
                " is not supported here: it sets RDMA queue-pair QoS, "
                "and no transport in this tree has queue pairs");
    }
}

TEST_F(PolicyFieldTest, BadValuesAreRefusedNamingThem) {
    EXPECT_EQ(loadError(R"({"name": "r", "same_machine": "yes"})"),
              "policy r: same_machine must be true or false, got yes");
    EXPECT_EQ(loadError(R"({"name": "r", "local_memory": "npu"})"),
              "policy r: local_memory npu is not dram, vram or any");
    EXPECT_EQ(loadError(R"({"name": "r", "remote_memory": 1})"),
              "policy r: remote_memory 1 is not dram, vram or any");
    EXPECT_EQ(loadError(R"({"name": "r", "min_size": -1})"),
              "policy r: min_size must be a byte count (an integer >= 0), "
              "got -1");
    EXPECT_EQ(loadError(R"({"name": "r", "max_size": "1M"})"),
              "policy r: max_size must be a byte count (an integer >= 0), "
              "got 1M");
    EXPECT_EQ(loadError(R"({"name": "r", "min_size": 10, "max_size": 9})"),
              "policy r: min_size 10 exceeds max_size 9");
    EXPECT_EQ(loadError(R"({"name": "r", "priority": "urgent"})"),
              "policy r: priority must be an integer >= 0 or \"high\", "
              "\"medium\", \"low\", got urgent");
    EXPECT_EQ(loadError(R"({"name": "r", "priority": -1})"),
              "policy r: priority must be an integer >= 0 or \"high\", "
              "\"medium\", \"low\", got -1");
    EXPECT_EQ(loadError(R"({"name": "r", "intent_type": "browsing"})"),
              "policy r: intent_type browsing is not one of intent_unspec, "
              "foreground_get, background_prefetch, migration, checkpoint, "
              "weight_loading, staging_internal (or 0-6)");
    EXPECT_EQ(loadError(R"({"name": "r", "devices": "mlx5_0"})"),
              "policy r: devices must be an array of NIC names, got mlx5_0");
    EXPECT_EQ(loadError(R"({"name": "r", "devices": ["mlx5_9"]})"),
              "policy r: device mlx5_9 is not a NIC of this host (NICs: "
              "mlx5_0, eth0)");
    EXPECT_EQ(loadError(R"({"name": "r", "transports": "tcp"})"),
              "policy r: transports must be an array of transport names");
    EXPECT_EQ(loadError(R"({"name": 5})"),
              "policy[0]: name must be a non-empty string, got 5");
}

TEST_F(PolicyFieldTest, DuplicateNamesAreRefused) {
    Status s = load(R"([{"name": "a"}, {"name": "a"}])");
    ASSERT_TRUE(s.IsInvalidArgument()) << s;
    EXPECT_EQ(s.message(), "policy a: name also used by policy[0]");
}

TEST_F(PolicyFieldTest, ARefusedPolicyLeavesTheLoadedRulesAsTheyWere) {
    ASSERT_TRUE(load(R"([{"name": "kept", "transports": ["mpcomm"]}])").ok());
    EXPECT_FALSE(load(R"([{"name": "r", "bogus": 1}])").ok());
    ASSERT_EQ(selector_.policies().size(), 1u);
    EXPECT_EQ(selector_.policies()[0].name, "kept");
}

}  // namespace
}  // namespace mooncake::tent
