#include "tent/runtime/topology.h"

#include <glog/logging.h>
#include <infiniband/verbs.h>
#include <numa.h>

#include <cerrno>
#include <cstring>
#include <fstream>

namespace mooncake::tent {

namespace {

int readNumaNode(const std::string& device) {
    std::ifstream in("/sys/class/infiniband/" + device + "/device/numa_node");
    int node = -1;
    if (!(in >> node)) return -1;
    return node;
}

Status discoverRdmaNics(std::vector<Topology::NicEntry>& nics) {
    int count = 0;
    errno = 0;
    ibv_device** devices = ibv_get_device_list(&count);
    if (!devices) {
        // ENOSYS (no kernel support) and friends all mean "no RDMA here";
        // a host without RDMA is a valid topology.
        int err = errno;
        LOG(INFO) << "Topology: no RDMA devices (ibv_get_device_list: "
                  << (err ? std::strerror(err) : "no error reported") << ")";
        return Status::OK();
    }
    for (int i = 0; i < count; ++i) {
        const char* name = ibv_get_device_name(devices[i]);
        if (!name) continue;
        Topology::NicEntry nic;
        nic.name = name;
        nic.type = Topology::NIC_RDMA;
        nic.numa_node = readNumaNode(nic.name);
        nics.push_back(std::move(nic));
    }
    ibv_free_device_list(devices);
    if (nics.empty()) LOG(INFO) << "Topology: no RDMA devices found";
    return Status::OK();
}

void discoverMemNodes(std::vector<Topology::MemEntry>& mems) {
    if (numa_available() < 0) {
        mems.push_back({"cpu:0", 0});
        return;
    }
    int max_node = numa_max_node();
    for (int node = 0; node <= max_node; ++node) {
        // Holes in the node numbering (offline nodes) are skipped.
        if (numa_bitmask_isbitset(numa_all_nodes_ptr, node) == 0) continue;
        mems.push_back({"cpu:" + std::to_string(node), node});
    }
    if (mems.empty()) mems.push_back({"cpu:0", 0});
}

const char* nicTypeName(Topology::NicType type) {
    return type == Topology::NIC_TCP ? "tcp" : "rdma";
}

Status parseEntryCommon(const Json::Value& v, const std::string& field,
                        std::string& name, int& numa_node) {
    if (!v.isObject()) {
        return Status::InvalidEntry("topology field " + field +
                                    " is not an object");
    }
    if (!v.isMember("name") || !v["name"].isString() ||
        v["name"].asString().empty()) {
        return Status::InvalidEntry("topology field " + field +
                                    ".name is missing or not a non-empty "
                                    "string");
    }
    name = v["name"].asString();
    numa_node = -1;
    if (v.isMember("numa_node")) {
        const Json::Value& n = v["numa_node"];
        if (!(n.type() == Json::intValue || n.type() == Json::uintValue) ||
            !n.isInt() || n.asInt() < -1) {
            return Status::InvalidEntry("topology field " + field +
                                        ".numa_node is not an integer >= -1");
        }
        numa_node = n.asInt();
    }
    return Status::OK();
}

}  // namespace

Status Topology::discover() {
    std::vector<NicEntry> nics;
    std::vector<MemEntry> mems;
    CHECK_STATUS(discoverRdmaNics(nics));
    discoverMemNodes(mems);
    nic_list_ = std::move(nics);
    mem_list_ = std::move(mems);
    return Status::OK();
}

Json::Value Topology::toJson() const {
    Json::Value root(Json::objectValue);
    Json::Value nics(Json::arrayValue);
    for (const NicEntry& nic : nic_list_) {
        Json::Value v(Json::objectValue);
        v["name"] = nic.name;
        v["type"] = nicTypeName(nic.type);
        v["numa_node"] = nic.numa_node;
        nics.append(v);
    }
    Json::Value mems(Json::arrayValue);
    for (const MemEntry& mem : mem_list_) {
        Json::Value v(Json::objectValue);
        v["name"] = mem.name;
        v["numa_node"] = mem.numa_node;
        mems.append(v);
    }
    root["nics"] = nics;
    root["mems"] = mems;
    return root;
}

Status Topology::fromJson(const Json::Value& value) {
    if (!value.isObject()) {
        return Status::InvalidEntry("topology is not a JSON object");
    }
    std::vector<NicEntry> nics;
    std::vector<MemEntry> mems;
    if (value.isMember("nics")) {
        const Json::Value& arr = value["nics"];
        if (!arr.isArray()) {
            return Status::InvalidEntry("topology field nics is not an array");
        }
        for (Json::ArrayIndex i = 0; i < arr.size(); ++i) {
            const std::string field = "nics[" + std::to_string(i) + "]";
            NicEntry nic;
            CHECK_STATUS(
                parseEntryCommon(arr[i], field, nic.name, nic.numa_node));
            const Json::Value& type = arr[i]["type"];
            if (type.isNull()) {
                nic.type = Topology::NIC_RDMA;
            } else if (type.isString() && type.asString() == "rdma") {
                nic.type = Topology::NIC_RDMA;
            } else if (type.isString() && type.asString() == "tcp") {
                nic.type = Topology::NIC_TCP;
            } else {
                return Status::InvalidEntry(
                    "topology field " + field +
                    ".type must be \"rdma\" or \"tcp\"");
            }
            nics.push_back(std::move(nic));
        }
    }
    if (value.isMember("mems")) {
        const Json::Value& arr = value["mems"];
        if (!arr.isArray()) {
            return Status::InvalidEntry("topology field mems is not an array");
        }
        for (Json::ArrayIndex i = 0; i < arr.size(); ++i) {
            MemEntry mem;
            CHECK_STATUS(parseEntryCommon(arr[i],
                                          "mems[" + std::to_string(i) + "]",
                                          mem.name, mem.numa_node));
            mems.push_back(std::move(mem));
        }
    }
    nic_list_ = std::move(nics);
    mem_list_ = std::move(mems);
    return Status::OK();
}

}  // namespace mooncake::tent
