// ClassicEngine: registration, notifications and the segment queries (the
// transfer half is classic_engine.cpp).
#include <glog/logging.h>

#include <cstring>

#include "classic_engine.h"
#include "tent/common/config.h"

namespace mooncake::tent::classic {

namespace {

using Code = Status::Code;
using py_support::check;

// Registered memory may be written by peers, so a read-only object cannot
// be registered.
const char kWrittenByPeers[] = "registered (peers may WRITE into it)";

uint64_t addressOf(const py::handle& buffer, const char* method) {
    if (py::isinstance<py::int_>(buffer)) return buffer.cast<uint64_t>();
    return py_support::localMemory(buffer, std::nullopt, nullptr, method).addr;
}

}  // namespace

int ClassicEngine::registerMemory(const py::handle& buffer,
                                  std::optional<size_t> capacity,
                                  const std::string& location) {
    const char* method = "register_memory";
    auto eng = engine(method);
    LocalMemory m =
        py_support::localMemory(buffer, capacity, kWrittenByPeers, method);
    {
        py::gil_scoped_release release;
        MemoryOptions options;
        options.location = location;
        check(eng->registerLocalMemory(reinterpret_cast<void*>(m.addr),
                                       m.length, options),
              method);
    }
    // An object stays alive (and unresizable) while it is registered.
    if (m.view) registered_[m.addr] = std::move(m);
    return 0;
}

int ClassicEngine::unregisterMemory(const py::handle& buffer) {
    const char* method = "unregister_memory";
    auto eng = engine(method);
    const uint64_t addr = addressOf(buffer, method);
    {
        py::gil_scoped_release release;
        check(eng->unregisterLocalMemory(reinterpret_cast<void*>(addr)),
              method);
    }
    registered_.erase(addr);
    return 0;
}

int ClassicEngine::batchRegisterMemory(
    const py::list& buffers, std::optional<std::vector<size_t>> capacities,
    const std::string& location) {
    const char* method = "batch_register_memory";
    auto eng = engine(method);
    if (capacities && capacities->size() != buffers.size()) {
        py_support::fail(Code::kInvalidArgument, method,
                         "buffer_addresses (" + std::to_string(buffers.size()) +
                             ") and capacities (" +
                             std::to_string(capacities->size()) +
                             ") differ in length");
    }
    std::vector<LocalMemory> memory;
    std::vector<void*> addrs;
    std::vector<size_t> sizes;
    for (size_t i = 0; i < buffers.size(); ++i) {
        std::optional<size_t> capacity;
        if (capacities) capacity = (*capacities)[i];
        memory.push_back(py_support::localMemory(buffers[i], capacity,
                                                 kWrittenByPeers, method));
        addrs.push_back(reinterpret_cast<void*>(memory.back().addr));
        sizes.push_back(memory.back().length);
    }
    {
        py::gil_scoped_release release;
        MemoryOptions options;
        options.location = location;
        check(eng->registerLocalMemory(addrs, sizes, options), method);
    }
    for (LocalMemory& m : memory) {
        if (m.view) registered_[m.addr] = std::move(m);
    }
    return 0;
}

int ClassicEngine::batchUnregisterMemory(const py::list& buffers) {
    const char* method = "batch_unregister_memory";
    auto eng = engine(method);
    std::vector<void*> addrs;
    for (const py::handle& b : buffers) {
        addrs.push_back(reinterpret_cast<void*>(addressOf(b, method)));
    }
    {
        py::gil_scoped_release release;
        check(eng->unregisterLocalMemory(addrs), method);
    }
    for (void* a : addrs) registered_.erase(reinterpret_cast<uint64_t>(a));
    return 0;
}

std::string ClassicEngine::getLocalTopology(
    const std::optional<std::string>& device) {
    if (device && !device->empty()) {
        LOG(INFO) << "get_local_topology: device_name '" << *device
                  << "' is not a filter here";
    }
    std::shared_ptr<TransferEngine> eng;
    {
        std::lock_guard<std::mutex> lock(mu_);
        eng = engine_;
    }
    py::gil_scoped_release release;
    if (eng) return eng->getLocalTopologyString();
    // Not initialized: a short-lived engine discovers it, as classic does.
    auto conf = std::make_shared<Config>();
    conf->set("metadata_type", "p2p");
    TransferEngine probe(conf);
    return probe.getLocalTopologyString();
}

uint64_t ClassicEngine::getFirstBufferAddress(const std::string& segment_name) {
    const char* method = "get_first_buffer_address";
    auto eng = engine(method);
    py::gil_scoped_release release;
    const SegmentID handle = openCached(*eng, segment_name, method);
    SegmentInfo info;
    check(eng->getSegmentInfo(handle, info), method);
    if (info.buffers.empty()) return 0;
    return info.buffers.front().base;
}

int ClassicEngine::writeBytesToBuffer(uint64_t dest, const py::object& src,
                                      size_t length) {
    const char* method = "write_bytes_to_buffer";
    auto eng = engine(method);
    // Classic's src_ptr is a char*: str (UTF-8) and bytes; any buffer
    // object works here too.
    std::string text;
    const char* data = nullptr;
    size_t size = 0;
    LocalMemory view;
    if (py::isinstance<py::str>(src)) {
        text = src.cast<std::string>();
        data = text.data();
        size = text.size();
    } else if (!src.is_none()) {
        view = py_support::localMemory(src, std::nullopt, nullptr, method);
        data = reinterpret_cast<const char*>(view.addr);
        size = view.length;
    } else {
        py_support::fail(Code::kInvalidArgument, method, "src_ptr is None");
    }
    if (length > size) {
        py_support::fail(Code::kInvalidArgument, method,
                         "length " + std::to_string(length) + " exceeds the " +
                             std::to_string(size) + " source bytes");
    }
    checkLocalRange(*eng, dest, length, method);
    std::memcpy(reinterpret_cast<void*>(dest), data, length);
    return 0;
}

py::bytes ClassicEngine::readBytesFromBuffer(uint64_t source, size_t length) {
    const char* method = "read_bytes_from_buffer";
    auto eng = engine(method);
    checkLocalRange(*eng, source, length, method);
    return py::bytes(reinterpret_cast<const char*>(source), length);
}

std::vector<Notification> ClassicEngine::getNotifies() {
    auto eng = engine("get_notifies");
    py::gil_scoped_release release;
    std::vector<Notification> list;
    check(eng->receiveNotification(list), "get_notifies");
    return list;
}

int ClassicEngine::sendProbe(const std::string& peer_server_name) {
    auto eng = engine("send_probe");
    py::gil_scoped_release release;
    // A probe answers a question: an unreachable peer is -1, not an error.
    try {
        const SegmentID handle =
            openCached(*eng, peer_server_name, "send_probe");
        Status s = eng->probePeerAliveByID(handle);
        if (s.ok()) return 0;
        LOG(WARNING) << "send_probe(" << peer_server_name
                     << "): " << s.message();
    } catch (const py_support::StatusError& e) {
        LOG(WARNING) << e.what();
    }
    return -1;
}

}  // namespace mooncake::tent::classic
