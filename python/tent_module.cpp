// tent: TENT's native Python module, with upstream TENT's names, as a thin
// binding of this tree's TransferEngine. Every failing Status raises
// tent.TentException's subclass for its code. Addresses are ints; where a
// method takes memory, an object with the buffer protocol works too (the
// caller keeps it alive while it is registered or in flight, as with an
// address). Calls that may wait release the GIL.
#include <glog/logging.h>
#include <pybind11/stl.h>

#include <cstdlib>
#include <new>
#include <optional>
#include <sstream>

#include "py_support.h"
#include "tent/transfer_engine.h"
#include "tent_request.h"

namespace py = pybind11;
using namespace mooncake::tent;
using py_support::check;
using tent_py::bindRequest;
using tent_py::PyRequest;
using tent_py::toRequests;

namespace {

using Release = py::call_guard<py::gil_scoped_release>;

void* ptr(uint64_t a) { return reinterpret_cast<void*>(a); }

// A memory argument: an int address, or a buffer-protocol object whose
// address (and size, when `size` is None) is taken.
std::pair<uint64_t, size_t> memoryArg(const py::handle& obj,
                                      std::optional<size_t> size,
                                      const char* written_as,
                                      const char* method) {
    if (py::isinstance<py::int_>(obj)) {
        return {obj.cast<uint64_t>(), size.value_or(0)};
    }
    py_support::LocalMemory m =
        py_support::localMemory(obj, size, written_as, method);
    return {m.addr, m.length};
}

// allocateBatch answers 0 when it cannot, and its table may throw
// std::bad_alloc for a huge size: both raise, naming the size.
BatchID allocateBatchOrRaise(TransferEngine& e, size_t n, const char* method) {
    if (n == 0) {
        py_support::fail(Status::Code::kInvalidArgument, method,
                         "batch size must be positive");
    }
    BatchID id = 0;
    try {
        id = e.allocateBatch(n);
    } catch (const std::bad_alloc&) {
        py_support::fail(Status::Code::kTooManyRequests, method,
                         "cannot allocate a batch of " + std::to_string(n) +
                             " requests: out of memory");
    }
    if (id == 0) {
        py_support::fail(Status::Code::kTooManyRequests, method,
                         "cannot allocate a batch of " + std::to_string(n) +
                             " requests (the log says why)");
    }
    return id;
}

// Upstream's allocate_memory_guard / allocate_batch_guard: context
// managers that free what they hold on exit.
class MemoryGuard {
 public:
    MemoryGuard(TransferEngine* e, void* p, size_t n)
        : engine_(e), ptr_(p), size_(n) {}
    ~MemoryGuard() { release(); }
    uint64_t address() const { return reinterpret_cast<uint64_t>(ptr_); }
    size_t size() const { return size_; }
    void release() {
        if (ptr_ != nullptr) engine_->freeLocalMemory(ptr_);
        ptr_ = nullptr;
    }

 private:
    TransferEngine* engine_;
    void* ptr_;
    size_t size_;
};

class BatchGuard {
 public:
    BatchGuard(TransferEngine* e, BatchID id) : engine_(e), id_(id) {}
    ~BatchGuard() { release(); }
    uint64_t id() const { return id_; }
    void release() {
        if (id_ != 0) engine_->freeBatch(id_);
        id_ = 0;
    }

 private:
    TransferEngine* engine_;
    BatchID id_;
};

void bindTypes(py::module_& m) {
    m.attr("LOCAL_SEGMENT_ID") = py::int_(LOCAL_SEGMENT_ID);
    m.attr("kWildcardLocation") = py::str(kWildcardLocation);
    m.attr("PRIO_HIGH") = PRIO_HIGH;
    m.attr("PRIO_MEDIUM") = PRIO_MEDIUM;
    m.attr("PRIO_LOW") = PRIO_LOW;
    py::enum_<Request::OpCode>(m, "OpCode", py::module_local())
        .value("READ", Request::READ)
        .value("WRITE", Request::WRITE)
        .export_values();
    py::enum_<TransferStatusEnum>(m, "TransferStatusEnum", py::module_local())
        .value("INITIAL", INITIAL)
        .value("PENDING", PENDING)
        .value("INVALID", INVALID)
        .value("CANCELED", CANCELED)
        .value("COMPLETED", COMPLETED)
        .value("TIMEOUT", TIMEOUT)
        .value("FAILED", FAILED)
        .export_values();
    py::enum_<Permission>(m, "Permission", py::module_local())
        .value("LocalReadWrite", kLocalReadWrite)
        .value("GlobalReadOnly", kGlobalReadOnly)
        .value("GlobalReadWrite", kGlobalReadWrite)
        .export_values();
    py::enum_<TransportType> tt(m, "TransportType", py::module_local());
    tt.value("UNSPEC", UNSPEC)
        .value("RDMA", RDMA)
        .value("MNNVL", MNNVL)
        .value("SHM", SHM)
        .value("NVLINK", NVLINK)
        .value("GDS", GDS)
        .value("IOURING", IOURING)
        .value("TCP", TCP)
        .value("AscendDirect", AscendDirect)
        .value("SUNRISE_LINK", SUNRISE_LINK)
        .value("TPU", TPU)
        .value("UB", UB)
        .value("MPCOMM", MPCOMM);
    tt.export_values();
    py::enum_<IntentType>(m, "IntentType", py::module_local())
        .value("INTENT_UNSPEC", IntentType::INTENT_UNSPEC)
        .value("FOREGROUND_GET", IntentType::FOREGROUND_GET)
        .value("BACKGROUND_PREFETCH", IntentType::BACKGROUND_PREFETCH)
        .value("MIGRATION", IntentType::MIGRATION)
        .value("CHECKPOINT", IntentType::CHECKPOINT)
        .value("WEIGHT_LOADING", IntentType::WEIGHT_LOADING)
        .value("STAGING_INTERNAL", IntentType::STAGING_INTERNAL)
        .export_values();
    py::enum_<SegmentInfo::Type>(m, "SegmentInfoType", py::module_local())
        .value("Memory", SegmentInfo::Memory)
        .value("File", SegmentInfo::File)
        .export_values();

    py::class_<Notification>(m, "Notification", py::module_local())
        .def(py::init<>())
        .def(py::init([](std::string name, std::string msg) {
                 return Notification{std::move(name), std::move(msg)};
             }),
             py::arg("name"), py::arg("msg"))
        .def_readwrite("name", &Notification::name)
        .def_readwrite("msg", &Notification::msg);

    bindRequest(m);

    py::class_<TransferStatus>(m, "TransferStatus", py::module_local())
        .def(py::init<>())
        .def_readwrite("state", &TransferStatus::s)
        .def_readwrite("bytes", &TransferStatus::transferred_bytes)
        .def("__repr__", [](const TransferStatus& s) {
            return std::string("TransferStatus(") + transferStatusName(s.s) +
                   ", bytes=" + std::to_string(s.transferred_bytes) + ")";
        });
    py::class_<SegmentInfo::Buffer>(m, "SegmentInfoBuffer", py::module_local())
        .def(py::init<>())
        .def_readwrite("base", &SegmentInfo::Buffer::base)
        .def_readwrite("length", &SegmentInfo::Buffer::length)
        .def_readwrite("location", &SegmentInfo::Buffer::location);
    py::class_<SegmentInfo>(m, "SegmentInfo", py::module_local())
        .def(py::init<>())
        .def_readwrite("type", &SegmentInfo::type)
        .def_readwrite("buffers", &SegmentInfo::buffers);
    py::class_<MemoryOptions>(m, "MemoryOptions", py::module_local())
        .def(py::init<>())
        .def_readwrite("location", &MemoryOptions::location)
        .def_readwrite("perm", &MemoryOptions::perm)
        .def_readwrite("type", &MemoryOptions::type)
        .def_readwrite("internal", &MemoryOptions::internal);

    py::class_<MemoryGuard>(m, "MemoryGuard", py::module_local())
        .def("address", &MemoryGuard::address)
        .def("size", &MemoryGuard::size)
        .def("__enter__", &MemoryGuard::address)
        .def("__exit__", [](MemoryGuard& g, py::args) {
            py::gil_scoped_release release;
            g.release();
        });
    py::class_<BatchGuard>(m, "BatchGuard", py::module_local())
        .def("id", &BatchGuard::id)
        .def("release", &BatchGuard::release, Release())
        .def("__enter__", &BatchGuard::id)
        .def("__exit__", [](BatchGuard& g, py::args) {
            py::gil_scoped_release release;
            g.release();
        });
}

// Upstream's method set; `where` in each error is the Python name.
void bindTentEngine(py::module_& m) {
    using E = TransferEngine;
    using Addrs = std::vector<uint64_t>;
    using Sizes = std::vector<size_t>;
    auto ptrs = [](const Addrs& addrs) {
        std::vector<void*> out;
        for (uint64_t a : addrs) out.push_back(ptr(a));
        return out;
    };
    py::class_<E> cls(m, "TransferEngine", py::module_local());
    cls.def(py::init<>(), Release())
        .def(py::init<const std::string>(), py::arg("config_path"), Release())
        .def("available", &E::available)
        .def("get_segment_name", &E::getSegmentName)
        .def("get_rpc_server_address", &E::getRpcServerAddress)
        .def("get_rpc_server_port", &E::getRpcServerPort)
        .def("get_local_topology", &E::getLocalTopologyString)
        // Ours (not upstream's): the installed transports' names.
        .def("get_supported_transports", &E::getSupportedTransports)
        .def(
            "export_local_segment",
            [](E& e) {
                std::string handle;
                check(e.exportLocalSegment(handle), "export_local_segment");
                return handle;
            },
            Release())
        .def(
            "import_remote_segment",
            [](E& e, const std::string& shared) {
                SegmentID id = 0;
                check(e.importRemoteSegment(id, shared),
                      "import_remote_segment");
                return id;
            },
            py::arg("shared_handle"), Release())
        .def(
            "open_segment",
            [](E& e, const std::string& name) {
                SegmentID id = 0;
                check(e.openSegment(id, name), "open_segment(" + name + ")");
                return id;
            },
            py::arg("segment_name"), Release())
        .def(
            "close_segment",
            [](E& e, uint64_t id) {
                check(e.closeSegment(id), "close_segment");
            },
            py::arg("handle"), Release())
        .def(
            "get_segment_info",
            [](E& e, uint64_t id) {
                SegmentInfo info;
                check(e.getSegmentInfo(id, info), "get_segment_info");
                return info;
            },
            py::arg("handle"), Release())
        .def(
            "allocate_local_memory",
            [](E& e, size_t size, const Location& location) {
                void* p = nullptr;
                check(e.allocateLocalMemory(&p, size, location),
                      "allocate_local_memory");
                return reinterpret_cast<uint64_t>(p);
            },
            py::arg("size"), py::arg("location") = kWildcardLocation, Release())
        .def(
            "allocate_local_memory_ex",
            [](E& e, size_t size, MemoryOptions& options) {
                void* p = nullptr;
                check(e.allocateLocalMemory(&p, size, options),
                      "allocate_local_memory_ex");
                return reinterpret_cast<uint64_t>(p);
            },
            py::arg("size"), py::arg("options"), Release())
        .def(
            "free_local_memory",
            [](E& e, uint64_t addr) {
                check(e.freeLocalMemory(ptr(addr)), "free_local_memory");
            },
            py::arg("addr"), Release())
        .def(
            "allocate_memory_guard",
            [](E& e, size_t size, const Location& location) {
                void* p = nullptr;
                check(e.allocateLocalMemory(&p, size, location),
                      "allocate_memory_guard");
                return std::make_unique<MemoryGuard>(&e, p, size);
            },
            py::arg("size"), py::arg("location") = kWildcardLocation,
            py::keep_alive<0, 1>(), Release())
        .def(
            "allocate_memory_guard_ex",
            [](E& e, size_t size, MemoryOptions& options) {
                void* p = nullptr;
                check(e.allocateLocalMemory(&p, size, options),
                      "allocate_memory_guard_ex");
                return std::make_unique<MemoryGuard>(&e, p, size);
            },
            py::arg("size"), py::arg("options"), py::keep_alive<0, 1>(),
            Release())
        .def(
            "register_local_memory",
            [](E& e, py::handle addr, std::optional<size_t> size,
               Permission perm) {
                // Peers may write memory registered read-write.
                auto [a, n] =
                    memoryArg(addr, size,
                              perm == kGlobalReadOnly
                                  ? nullptr
                                  : "registered writable (register it with "
                                    "Permission.GlobalReadOnly)",
                              "register_local_memory");
                py::gil_scoped_release release;
                check(e.registerLocalMemory(ptr(a), n, perm),
                      "register_local_memory");
            },
            py::arg("addr"), py::arg("size") = py::none(),
            py::arg("permission") = kGlobalReadWrite)
        .def(
            "unregister_local_memory",
            [](E& e, py::handle addr, size_t size) {
                auto [a, n] =
                    memoryArg(addr, size, nullptr, "unregister_local_memory");
                (void)n;
                py::gil_scoped_release release;
                check(e.unregisterLocalMemory(ptr(a), size),
                      "unregister_local_memory");
            },
            py::arg("addr"), py::arg("size") = 0)
        .def(
            "register_local_memory_batch",
            [=](E& e, const Addrs& addrs, const Sizes& sizes, Permission perm) {
                check(e.registerLocalMemory(ptrs(addrs), sizes, perm),
                      "register_local_memory_batch");
            },
            py::arg("addr_list"), py::arg("size_list"),
            py::arg("permission") = kGlobalReadWrite, Release())
        .def(
            "unregister_local_memory_batch",
            [=](E& e, const Addrs& addrs, const Sizes& sizes) {
                check(e.unregisterLocalMemory(ptrs(addrs), sizes),
                      "unregister_local_memory_batch");
            },
            py::arg("addr_list"), py::arg("size_list") = Sizes{}, Release())
        .def(
            "register_local_memory_ex",
            [](E& e, uint64_t addr, size_t size, MemoryOptions& options) {
                check(e.registerLocalMemory(ptr(addr), size, options),
                      "register_local_memory_ex");
            },
            py::arg("addr"), py::arg("size"), py::arg("options"), Release())
        .def(
            "register_local_memory_batch_ex",
            [=](E& e, const Addrs& addrs, const Sizes& sizes,
                MemoryOptions& options) {
                check(e.registerLocalMemory(ptrs(addrs), sizes, options),
                      "register_local_memory_batch_ex");
            },
            py::arg("addr_list"), py::arg("size_list"), py::arg("options"),
            Release())
        .def(
            "allocate_transfer_batch",
            [](E& e, size_t n) {
                return allocateBatchOrRaise(e, n, "allocate_transfer_batch");
            },
            py::arg("batch_size"), Release())
        .def(
            "free_transfer_batch",
            [](E& e, uint64_t id) {
                check(e.freeBatch(id), "free_transfer_batch");
            },
            py::arg("batch_id"), Release())
        .def(
            "allocate_batch_guard",
            [](E& e, size_t n) {
                BatchID id = allocateBatchOrRaise(e, n, "allocate_batch_guard");
                return std::make_unique<BatchGuard>(&e, id);
            },
            py::arg("batch_size"), py::keep_alive<0, 1>(), Release())
        .def(
            "submit_transfer",
            [](E& e, uint64_t id, const std::vector<PyRequest>& list) {
                const char* method = "submit_transfer";
                py::gil_scoped_release release;
                check(e.submitTransfer(id, toRequests(e, list, method)),
                      method);
            },
            py::arg("batch_id"), py::arg("request_list"))
        .def(
            "submit_transfer",
            [](E& e, uint64_t id, const std::vector<PyRequest>& list,
               const Notification& n) {
                const char* method = "submit_transfer";
                py::gil_scoped_release release;
                check(e.submitTransfer(id, toRequests(e, list, method), n),
                      method);
            },
            py::arg("batch_id"), py::arg("request_list"), py::arg("notifi"))
        .def(
            "submit_transfer_notif",
            [](E& e, uint64_t id, const std::vector<PyRequest>& list,
               const std::string& name, const std::string& message) {
                const char* method = "submit_transfer_notif";
                py::gil_scoped_release release;
                check(e.submitTransfer(id, toRequests(e, list, method),
                                       Notification{name, message}),
                      method);
            },
            py::arg("batch_id"), py::arg("request_list"), py::arg("name"),
            py::arg("message"))
        .def(
            "cancel_transfer",
            [](E& e, uint64_t id, size_t task) {
                check(e.cancelTransfer(id, task), "cancel_transfer");
            },
            py::arg("batch_id"), py::arg("task_id"), Release())
        .def(
            "send_notifi",
            [](E& e, uint64_t target, const Notification& n) {
                check(e.sendNotification(target, n), "send_notifi");
            },
            py::arg("target_id"), py::arg("notifi"), Release())
        .def(
            "recv_notifi",
            [](E& e) {
                std::vector<Notification> list;
                check(e.receiveNotification(list), "recv_notifi");
                return list;
            },
            Release())
        .def(
            "get_transfer_status",
            [](E& e, uint64_t id, size_t task) {
                TransferStatus st;
                check(e.getTransferStatus(id, task, st), "get_transfer_status");
                return st;
            },
            py::arg("batch_id"), py::arg("task_id"), Release())
        .def(
            "get_transfer_status_list",
            [](E& e, uint64_t id) {
                std::vector<TransferStatus> list;
                check(e.getTransferStatus(id, list),
                      "get_transfer_status_list");
                return list;
            },
            py::arg("batch_id"), Release())
        .def(
            "get_transfer_status_overall",
            [](E& e, uint64_t id) {
                TransferStatus st;
                check(e.getTransferStatus(id, st),
                      "get_transfer_status_overall");
                return st;
            },
            py::arg("batch_id"), Release());
}

}  // namespace

PYBIND11_MODULE(tent, m) {
    m.doc() = "TENT's native Python API on this tree's runtime";
    if (!google::IsGoogleLoggingInitialized()) {
        if (!std::getenv("GLOG_logtostderr") && !std::getenv("GLOG_log_dir")) {
            FLAGS_logtostderr = true;
        }
        google::InitGoogleLogging("tent");
    }
    py_support::registerStatusErrors(m, "TentException");
    // A shorter alias of the base class.
    m.attr("TentError") = m.attr("TentException");
    bindTypes(m);
    bindTentEngine(m);
}
