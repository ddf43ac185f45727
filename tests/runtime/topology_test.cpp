#include "tent/runtime/topology.h"

#include <gtest/gtest.h>

#include <sstream>

namespace mooncake::tent {
namespace {

TEST(TopologyTest, DiscoverSucceedsWithOrWithoutRdma) {
    Topology topo;
    ASSERT_TRUE(topo.discover().ok());
    // Every host has at least one memory node (libnuma or the cpu:0
    // fallback); NICs may legitimately be absent.
    ASSERT_FALSE(topo.mem_list_.empty());
    EXPECT_EQ(topo.mem_list_[0].name.rfind("cpu:", 0), 0u);
    for (const auto& nic : topo.nic_list_) {
        EXPECT_EQ(nic.type, Topology::NIC_RDMA) << nic.name;
    }
}

Topology sample() {
    Topology topo;
    topo.nic_list_ = {{"mlx5_0", Topology::NIC_RDMA, 0},
                      {"eth0", Topology::NIC_TCP, -1},
                      {"mlx5_1", Topology::NIC_RDMA, 1}};
    topo.mem_list_ = {{"cpu:0", 0}, {"cpu:1", 1}};
    return topo;
}

TEST(TopologyTest, JsonRoundTrip) {
    Topology topo = sample();
    Json::Value json = topo.toJson();
    EXPECT_EQ(json["nics"][1]["type"].asString(), "tcp");
    EXPECT_EQ(json["nics"][0]["type"].asString(), "rdma");

    Topology back;
    ASSERT_TRUE(back.fromJson(json).ok());
    ASSERT_EQ(back.nic_list_.size(), 3u);
    EXPECT_EQ(back.nic_list_[1].name, "eth0");
    EXPECT_EQ(back.nic_list_[1].type, Topology::NIC_TCP);
    EXPECT_EQ(back.nic_list_[2].numa_node, 1);
    ASSERT_EQ(back.mem_list_.size(), 2u);
    EXPECT_EQ(back.mem_list_[1].name, "cpu:1");
    EXPECT_EQ(back.toJson(), json);
}

void expectRejected(const char* text, const std::string& message) {
    Json::Value value;
    Json::CharReaderBuilder builder;
    std::string errs;
    std::istringstream in(text);
    ASSERT_TRUE(Json::parseFromStream(builder, in, &value, &errs)) << text;
    Topology topo = sample();
    Status s = topo.fromJson(value);
    EXPECT_TRUE(s.IsInvalidEntry()) << text;
    EXPECT_EQ(s.message(), message) << text;
    EXPECT_EQ(topo.nic_list_.size(), 3u) << "a rejected input changed state";
}

TEST(TopologyTest, MalformedJsonIsRejectedNamingTheField) {
    expectRejected("[]", "topology is not a JSON object");
    expectRejected(R"({"nics":{}})", "topology field nics is not an array");
    expectRejected(R"({"mems":3})", "topology field mems is not an array");
    expectRejected(R"({"nics":[1]})",
                   "topology field nics[0] is not an object");
    expectRejected(R"({"nics":[{"name":"a"},{"type":"rdma"}]})",
                   "topology field nics[1].name is missing or not a "
                   "non-empty string");
    expectRejected(R"({"nics":[{"name":"a","type":"ib"}]})",
                   "topology field nics[0].type must be \"rdma\" or \"tcp\"");
    expectRejected(R"({"nics":[{"name":"a","numa_node":"0"}]})",
                   "topology field nics[0].numa_node is not an integer >= -1");
    expectRejected(R"({"mems":[{"name":"cpu:0","numa_node":-2}]})",
                   "topology field mems[0].numa_node is not an integer >= -1");
}

}  // namespace
}  // namespace mooncake::tent
