// mooncake.engine: the TENT TransferEngine for Python.
//
// Addresses cross the boundary as plain ints (as in Mooncake's own Python
// API), so callers can move bytes with ctypes or numpy. Every failing call
// raises RuntimeError carrying the engine's Status text. Calls that may block
// on the network release the GIL.
#include <glog/logging.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "tent/transfer_engine.h"

namespace py = pybind11;

namespace mooncake::tent {
namespace {

void throwIfError(const Status& s, const std::string& what) {
    if (!s.ok()) throw std::runtime_error(what + ": " + s.ToString());
}

void* toPointer(uint64_t addr) { return reinterpret_cast<void*>(addr); }
uint64_t toInt(const void* p) { return reinterpret_cast<uint64_t>(p); }

// A Request from a dict with the field names of Request; unknown keys are an
// error, since a misspelt key would otherwise silently become a default.
Request requestFromDict(const py::dict& d) {
    static const char* kFields[] = {"opcode",        "source", "target_id",
                                    "target_offset", "length", "priority",
                                    "transport_hint"};
    for (const auto& item : d) {
        std::string key = py::str(item.first);
        bool known = false;
        for (const char* f : kFields) known = known || key == f;
        if (!known) {
            throw py::value_error("unknown request field '" + key + "'");
        }
    }
    Request r;
    if (d.contains("opcode")) r.opcode = d["opcode"].cast<Request::OpCode>();
    if (d.contains("source"))
        r.source = toPointer(d["source"].cast<uint64_t>());
    if (d.contains("target_id")) r.target_id = d["target_id"].cast<SegmentID>();
    if (d.contains("target_offset")) {
        r.target_offset = d["target_offset"].cast<uint64_t>();
    }
    if (d.contains("length")) r.length = d["length"].cast<size_t>();
    if (d.contains("priority")) r.priority = d["priority"].cast<int>();
    if (d.contains("transport_hint")) {
        r.transport_hint = d["transport_hint"].cast<TransportType>();
    }
    return r;
}

std::vector<Request> requestsFromList(const py::list& items) {
    std::vector<Request> out;
    out.reserve(items.size());
    for (const auto& item : items) {
        if (py::isinstance<Request>(item)) {
            out.push_back(item.cast<Request>());
        } else if (py::isinstance<py::dict>(item)) {
            out.push_back(requestFromDict(item.cast<py::dict>()));
        } else {
            throw py::type_error(
                "submit() takes a list of Request or dict, got " +
                std::string(py::str(item.get_type())));
        }
    }
    return out;
}

void bindTypes(py::module_& m) {
    py::enum_<TransportType>(m, "TransportType")
        .value("UNSPEC", UNSPEC)
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
    m.def(
        "transport_type_name",
        [](TransportType t) { return std::string(transportTypeName(t)); },
        "Config name of a transport ('tcp', 'mpcomm', ...).");
    m.def("parse_transport_type", &parseTransportType,
          "Inverse of transport_type_name; unknown names give UNSPEC.");

    py::enum_<TransferStatusEnum>(m, "TransferStatusEnum")
        .value("INITIAL", INITIAL)
        .value("PENDING", PENDING)
        .value("INVALID", INVALID)
        .value("CANCELED", CANCELED)
        .value("COMPLETED", COMPLETED)
        .value("TIMEOUT", TIMEOUT)
        .value("FAILED", FAILED);

    py::class_<TransferStatus>(m, "TransferStatus")
        .def(py::init<>())
        .def_readwrite("s", &TransferStatus::s)
        .def_readwrite("transferred_bytes", &TransferStatus::transferred_bytes)
        .def("__repr__", [](const TransferStatus& s) {
            return std::string("TransferStatus(") + transferStatusName(s.s) +
                   ", transferred_bytes=" +
                   std::to_string(s.transferred_bytes) + ")";
        });

    py::class_<Request> request(m, "Request");
    py::enum_<Request::OpCode>(request, "OpCode")
        .value("READ", Request::READ)
        .value("WRITE", Request::WRITE)
        .export_values();
    request
        .def(py::init([](Request::OpCode opcode, uint64_t source,
                         SegmentID target_id, uint64_t target_offset,
                         size_t length, TransportType transport_hint,
                         int priority) {
                 Request r;
                 r.opcode = opcode;
                 r.source = toPointer(source);
                 r.target_id = target_id;
                 r.target_offset = target_offset;
                 r.length = length;
                 r.transport_hint = transport_hint;
                 r.priority = priority;
                 return r;
             }),
             py::arg("opcode") = Request::READ, py::arg("source") = 0,
             py::arg("target_id") = LOCAL_SEGMENT_ID,
             py::arg("target_offset") = 0, py::arg("length") = 0,
             py::arg("transport_hint") = UNSPEC, py::arg("priority") = 0)
        .def_readwrite("opcode", &Request::opcode)
        .def_property(
            "source", [](const Request& r) { return toInt(r.source); },
            [](Request& r, uint64_t v) { r.source = toPointer(v); })
        .def_readwrite("target_id", &Request::target_id)
        .def_readwrite("target_offset", &Request::target_offset)
        .def_readwrite("length", &Request::length)
        .def_readwrite("priority", &Request::priority)
        .def_readwrite("transport_hint", &Request::transport_hint);
}

void bindEngine(py::module_& m) {
    using Engine = TransferEngine;
    using Release = py::call_guard<py::gil_scoped_release>;
    py::class_<Engine>(m, "TransferEngine")
        .def(py::init([]() { return std::make_unique<Engine>(); }), Release(),
             "Engine with the default configuration plus MC_TENT_CONF.")
        .def(py::init([](const std::string& config_path) {
                 return std::make_unique<Engine>(config_path);
             }),
             py::arg("config_path"), Release(),
             "Engine configured from a JSON file (MC_TENT_CONF still "
             "applies).")
        .def("available", &Engine::available)
        .def("get_segment_name", &Engine::getSegmentName)
        .def("get_rpc_server_address", &Engine::getRpcServerAddress)
        .def("get_rpc_server_port", &Engine::getRpcServerPort)
        .def("get_supported_transports", &Engine::getSupportedTransports)
        .def(
            "open_segment",
            [](Engine& e, const std::string& name) {
                SegmentID id = 0;
                throwIfError(e.openSegment(id, name),
                             "open_segment(" + name + ")");
                return id;
            },
            py::arg("segment_name"), Release())
        .def(
            "close_segment",
            [](Engine& e, SegmentID id) {
                throwIfError(e.closeSegment(id), "close_segment");
            },
            py::arg("handle"), Release())
        .def(
            "get_segment_info",
            [](Engine& e, SegmentID id) {
                SegmentInfo info;
                {
                    py::gil_scoped_release release;
                    throwIfError(e.getSegmentInfo(id, info),
                                 "get_segment_info");
                }
                py::list buffers;
                for (const auto& b : info.buffers) {
                    py::dict d;
                    d["base"] = b.base;
                    d["length"] = b.length;
                    d["location"] = b.location;
                    buffers.append(d);
                }
                return buffers;
            },
            py::arg("handle"),
            "List of {'base', 'length', 'location'} for the segment's "
            "registered buffers.")
        .def(
            "allocate_managed_buffer",
            [](Engine& e, size_t size, const std::string& location) {
                void* addr = nullptr;
                throwIfError(
                    e.allocateLocalMemory(&addr, size, location),
                    "allocate_managed_buffer(" + std::to_string(size) + ")");
                return toInt(addr);
            },
            py::arg("size"), py::arg("location") = kWildcardLocation, Release())
        .def(
            "free_managed_buffer",
            [](Engine& e, uint64_t addr) {
                throwIfError(e.freeLocalMemory(toPointer(addr)),
                             "free_managed_buffer");
            },
            py::arg("addr"), Release())
        .def(
            "register_memory",
            [](Engine& e, uint64_t addr, size_t size, TransportType type,
               const std::string& location) {
                MemoryOptions options;
                options.type = type;
                options.location = location;
                throwIfError(
                    e.registerLocalMemory(toPointer(addr), size, options),
                    "register_memory");
            },
            py::arg("addr"), py::arg("size"), py::arg("transport") = UNSPEC,
            py::arg("location") = kWildcardLocation, Release())
        .def(
            "unregister_memory",
            [](Engine& e, uint64_t addr, size_t size) {
                throwIfError(e.unregisterLocalMemory(toPointer(addr), size),
                             "unregister_memory");
            },
            py::arg("addr"), py::arg("size") = 0, Release())
        .def(
            "allocate_batch",
            [](Engine& e, size_t batch_size) {
                BatchID id = e.allocateBatch(batch_size);
                if (id == 0) {
                    throw std::runtime_error("allocate_batch(" +
                                             std::to_string(batch_size) +
                                             ") failed");
                }
                return id;
            },
            py::arg("batch_size"), Release())
        .def(
            "free_batch",
            [](Engine& e, BatchID id) {
                throwIfError(e.freeBatch(id), "free_batch");
            },
            py::arg("batch_id"), Release())
        .def(
            "submit",
            [](Engine& e, BatchID id, const py::list& items) {
                std::vector<Request> requests = requestsFromList(items);
                py::gil_scoped_release release;
                throwIfError(e.submitTransfer(id, requests), "submit");
            },
            py::arg("batch_id"), py::arg("requests"),
            "Submits a list of Request (or dicts with Request's field "
            "names). target_offset is the absolute remote address.")
        .def(
            "get_transfer_status",
            [](Engine& e, BatchID id, size_t task_id) {
                TransferStatus status;
                throwIfError(e.getTransferStatus(id, task_id, status),
                             "get_transfer_status");
                return status;
            },
            py::arg("batch_id"), py::arg("task_id"), Release())
        .def(
            "get_transfer_status_list",
            [](Engine& e, BatchID id) {
                std::vector<TransferStatus> list;
                throwIfError(e.getTransferStatus(id, list),
                             "get_transfer_status_list");
                return list;
            },
            py::arg("batch_id"), Release())
        .def(
            "get_overall_status",
            [](Engine& e, BatchID id) {
                TransferStatus status;
                throwIfError(e.getTransferStatus(id, status),
                             "get_overall_status");
                return status;
            },
            py::arg("batch_id"), Release());
}

}  // namespace
}  // namespace mooncake::tent

PYBIND11_MODULE(engine, m) {
    m.doc() = "TENT transfer engine (mooncake.engine)";
    // The engine logs through glog. An embedding program may have set it up
    // already (initialising twice aborts); otherwise log to stderr rather
    // than glog's default files under /tmp, unless GLOG_* says where.
    if (!google::IsGoogleLoggingInitialized()) {
        if (!std::getenv("GLOG_logtostderr") && !std::getenv("GLOG_log_dir")) {
            FLAGS_logtostderr = true;
        }
        google::InitGoogleLogging("mooncake.engine");
    }
    mooncake::tent::bindTypes(m);
    mooncake::tent::bindEngine(m);
}
