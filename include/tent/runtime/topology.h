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
#include "tent/common/types.h"
#include "tent/runtime/memory_location.h"

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

// Upstream TENT's view of a location: its type ("cpu", "cuda", "rocm",
// "musa", "npu"; "*" for the wildcard) and index (-1 for the wildcard).
// Kept in upstream's shape so that units built in both trees can use it;
// here it reads through parseMemoryLocation(). A location that does not
// parse keeps upstream's answer, the text before ':' with index -1; valid()
// tells it apart.
class LocationParser {
 public:
    LocationParser(const std::string& location) {
        MemoryLocation where;
        valid_ = parseMemoryLocation(location, &where).ok();
        if (!valid_) {
            type_ = location.substr(0, location.find(':'));
            return;
        }
        if (where.wildcard) {
            type_ = kWildcardLocation;
            return;
        }
        type_ = memoryLocationKindName(where.kind);
        index_ = where.index;
    }

    std::string type() const { return type_; }
    int index() const { return index_; }
    bool valid() const { return valid_; }

 private:
    std::string type_;
    int index_ = -1;
    bool valid_ = false;
};

}  // namespace mooncake::tent
