// Topology: the NICs and memory nodes of this host.
//
// RDMA NICs come from libibverbs, NUMA nodes from libnuma/sysfs. A host
// without RDMA support (ibv_get_device_list() == NULL, errno ENOSYS) yields
// an empty NIC list: that is a valid topology, not an error.
#pragma once

#include <json/json.h>

#include <string>
#include <vector>

#include "tent/common/status.h"

namespace mooncake::tent {

class Topology {
 public:
    // Serialized by value; as in upstream TENT, RDMA is 0 and TCP 1.
    enum NicType { NIC_RDMA = 0, NIC_TCP = 1 };

    struct NicEntry {
        std::string name;
        NicType type = NIC_RDMA;
        int numa_node = -1;
    };

    struct MemEntry {
        std::string name;  // "cpu:0", "cuda:0"
        int numa_node = -1;
    };

    Status discover();
    Json::Value toJson() const;
    Status fromJson(const Json::Value& value);

    std::vector<NicEntry> nic_list_;
    std::vector<MemEntry> mem_list_;
};

}  // namespace mooncake::tent
