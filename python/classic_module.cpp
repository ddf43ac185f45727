// mooncake.engine: the classic Python API (TransferEngine, TransferOpcode,
// TransferNotify) over this tree's TENT runtime. See classic_engine.h for
// the error convention and docs/python.md for the method table.
#include <glog/logging.h>
#include <pybind11/stl.h>

#include <cstdlib>
#include <cstring>
#include <tuple>

#include "classic_engine.h"

namespace mooncake::tent::classic {

namespace {

using Engine = ClassicEngine;

// Classic methods this tree has no path for: present, and raising the
// module's NotImplementedError naming the method and why.
void notImplemented(py::class_<Engine>& cls, const char* name,
                    const char* why) {
    std::string method = name;
    std::string reason = why;
    cls.def(
        name,
        [method, reason](Engine&, py::args, py::kwargs) {
            py_support::fail(Status::Code::kNotImplemented, method,
                             "not implemented here: " + reason);
        },
        ("Not implemented here: " + reason).c_str());
}

}  // namespace

void bindClassicEngine(py::module_& m) {
    // Classic spells these members Read and Write (and exports them).
    py::enum_<Opcode> opcode(m, "TransferOpcode", py::arithmetic(),
                             py::module_local());
    opcode.value("Read", Opcode::kRead)
        .value("Write", Opcode::kWrite)
        .export_values();

    py::class_<Notification>(m, "TransferNotify", py::module_local())
        .def(py::init<>())
        .def(py::init([](std::string name, std::string msg) {
                 return Notification{std::move(name), std::move(msg)};
             }),
             py::arg("name"), py::arg("msg"))
        .def_readwrite("name", &Notification::name)
        .def_readwrite("msg", &Notification::msg)
        .def("__repr__", [](const Notification& n) {
            return "TransferNotify(name=" +
                   std::string(py::repr(py::str(n.name))) +
                   ", msg=" + std::string(py::repr(py::bytes(n.msg))) + ")";
        });

    py::class_<TransferEngine, std::shared_ptr<TransferEngine>>(
        m, "InnerTransferEngine", py::module_local());

    using OptLen = std::optional<size_t>;
    using OptLens = std::optional<std::vector<size_t>>;
    py::class_<Engine> cls(m, "TransferEngine", py::module_local());
    cls.def(py::init<>())
        .def("initialize", &Engine::initialize, py::arg("hostname"),
             py::arg("metadata_server"), py::arg("protocol"),
             py::arg("device_name"))
        .def("initialize_ext", &Engine::initializeExt, py::arg("hostname"),
             py::arg("metadata_server"), py::arg("protocol"),
             py::arg("device_name"), py::arg("metadata_type"))
        .def("close", &Engine::close)
        .def("get_rpc_port", &Engine::getRpcPort)
        .def("get_segment_name", &Engine::getSegmentName)
        .def("allocate_managed_buffer", &Engine::allocateManagedBuffer,
             py::arg("length"))
        .def("free_managed_buffer", &Engine::freeManagedBuffer,
             py::arg("buffer"), py::arg("length"));

    // The single and batch transfer calls, classic's names and arguments;
    // `buffer` is an address or a buffer-protocol object, and `length`
    // defaults to the object's size.
    for (auto [name, op] : {std::pair{"transfer_sync_write", Opcode::kWrite},
                            std::pair{"transfer_sync_read", Opcode::kRead}}) {
        cls.def(
            name,
            [op = op, name = name](Engine& e, const std::string& target,
                                   py::handle buffer, uint64_t peer,
                                   OptLen length, const std::string& hint) {
                return e.transferSync(name, target, buffer, peer, length, op,
                                      nullptr, hint);
            },
            py::arg("target_hostname"), py::arg("buffer"),
            py::arg("peer_buffer_address"), py::arg("length") = py::none(),
            py::arg("transport_hint") = "");
    }
    // The batch calls: the sync ones answer 0 or -1, the async ones a
    // batch id (0 on failure), as classic does.
    for (auto [name, op, async] :
         {std::tuple{"batch_transfer_sync_write", Opcode::kWrite, false},
          std::tuple{"batch_transfer_sync_read", Opcode::kRead, false},
          std::tuple{"batch_transfer_async_write", Opcode::kWrite, true},
          std::tuple{"batch_transfer_async_read", Opcode::kRead, true}}) {
        cls.def(
            name,
            [op = op, name = name, async = async](
                Engine& e, const std::string& target, const py::list& buffers,
                const std::vector<uint64_t>& peers, OptLens lengths,
                const std::string& hint) -> py::int_ {
                if (async) {
                    return py::int_(e.batchTransferAsync(
                        name, target, buffers, peers, lengths, op, hint));
                }
                return py::int_(e.batchTransferSync(
                    name, target, buffers, peers, lengths, op, nullptr, hint));
            },
            py::arg("target_hostname"), py::arg("buffers"),
            py::arg("peer_buffer_addresses"), py::arg("lengths") = py::none(),
            py::arg("transport_hint") = "");
    }
    cls.def(
           "transfer_sync",
           [](Engine& e, const std::string& target, py::handle buffer,
              uint64_t peer, OptLen length, Opcode op,
              const Notification* notify, const std::string& hint) {
               return e.transferSync("transfer_sync", target, buffer, peer,
                                     length, op, notify, hint);
           },
           py::arg("target_hostname"), py::arg("buffer"),
           py::arg("peer_buffer_address"), py::arg("length"), py::arg("opcode"),
           py::arg("notify") = nullptr, py::arg("transport_hint") = "")
        .def(
            "batch_transfer_sync",
            [](Engine& e, const std::string& target, const py::list& buffers,
               const std::vector<uint64_t>& peers, OptLens lengths, Opcode op,
               const Notification* notify, const std::string& hint) {
                return e.batchTransferSync("batch_transfer_sync", target,
                                           buffers, peers, lengths, op, notify,
                                           hint);
            },
            py::arg("target_hostname"), py::arg("buffers"),
            py::arg("peer_buffer_addresses"), py::arg("lengths"),
            py::arg("opcode"), py::arg("notify") = nullptr,
            py::arg("transport_hint") = "")
        .def(
            "batch_transfer_async",
            [](Engine& e, const std::string& target, const py::list& buffers,
               const std::vector<uint64_t>& peers, OptLens lengths, Opcode op,
               const std::string& hint) {
                return e.batchTransferAsync("batch_transfer_async", target,
                                            buffers, peers, lengths, op, hint);
            },
            py::arg("target_hostname"), py::arg("buffers"),
            py::arg("peer_buffer_addresses"), py::arg("lengths"),
            py::arg("opcode"), py::arg("transport_hint") = "")
        .def("get_batch_transfer_status", &Engine::getBatchTransferStatus,
             py::arg("batch_ids"))
        .def(
            "transfer_submit_write",
            [](Engine& e, const std::string& target, py::handle buffer,
               uint64_t peer, OptLen length, const std::string& hint) {
                py::list buffers;
                buffers.append(buffer);
                OptLens lengths;
                if (length) lengths = std::vector<size_t>{*length};
                return e.batchTransferAsync("transfer_submit_write", target,
                                            buffers, {peer}, lengths,
                                            Opcode::kWrite, hint);
            },
            py::arg("target_hostname"), py::arg("buffer"),
            py::arg("peer_buffer_address"), py::arg("length") = py::none(),
            py::arg("transport_hint") = "")
        .def("transfer_check_status", &Engine::transferCheckStatus,
             py::arg("batch_id"))
        .def(
            "write_bytes_to_buffer",
            [](Engine&, uint64_t dest, const py::bytes& src, size_t length) {
                std::string_view data(src);
                if (length > data.size()) {
                    py_support::fail(
                        Status::Code::kInvalidArgument, "write_bytes_to_buffer",
                        "length " + std::to_string(length) + " exceeds the " +
                            std::to_string(data.size()) + " source bytes");
                }
                std::memcpy(reinterpret_cast<void*>(dest), data.data(), length);
                return 0;
            },
            py::arg("dest_address"), py::arg("src_ptr"), py::arg("length"))
        .def(
            "read_bytes_from_buffer",
            [](Engine&, uint64_t source, size_t length) {
                return py::bytes(reinterpret_cast<const char*>(source), length);
            },
            py::arg("source_address"), py::arg("length"))
        .def("register_memory", &Engine::registerMemory, py::arg("buffer_addr"),
             py::arg("capacity") = py::none(),
             py::arg("location") = kWildcardLocation)
        .def("unregister_memory", &Engine::unregisterMemory,
             py::arg("buffer_addr"))
        .def("batch_register_memory", &Engine::batchRegisterMemory,
             py::arg("buffer_addresses"), py::arg("capacities") = py::none(),
             py::arg("location") = kWildcardLocation)
        .def("batch_unregister_memory", &Engine::batchUnregisterMemory,
             py::arg("buffer_addresses"))
        .def("get_local_topology", &Engine::getLocalTopology,
             py::arg("device_name") = py::none())
        .def("get_first_buffer_address", &Engine::getFirstBufferAddress,
             py::arg("segment_name"))
        // Classic pre-connects EFA endpoints here and is a no-op (0)
        // elsewhere; this tree has no EFA.
        .def(
            "warmup_efa_segment", [](Engine&, const std::string&) { return 0; },
            py::arg("segment_name"))
        .def("get_notifies", &Engine::getNotifies)
        .def("send_probe", &Engine::sendProbe, py::arg("peer_server_name"))
        .def("get_engine",
             [](const Engine& e) { return e.engine("get_engine"); })
        .def("get_engine_ptr", [](const Engine& e) {
            return reinterpret_cast<uint64_t>(e.engine("get_engine_ptr").get());
        });
    const char* kNoCuda =
        "this tree has no CUDA-stream transfer path; transfer after "
        "synchronizing the stream";
    notImplemented(cls, "transfer_write_on_cuda", kNoCuda);
    notImplemented(cls, "transfer_read_on_cuda", kNoCuda);
    notImplemented(cls, "batch_transfer_write_on_cuda", kNoCuda);
    notImplemented(cls, "batch_transfer_read_on_cuda", kNoCuda);
    cls.attr("TransferOpcode") = opcode;
}

}  // namespace mooncake::tent::classic

PYBIND11_MODULE(engine, m) {
    m.doc() =
        "Mooncake's classic transfer engine API on the TENT runtime "
        "(from mooncake import engine)";
    // Log to stderr rather than glog's default files under /tmp, unless
    // GLOG_* says where; an embedding program may have set glog up already.
    if (!google::IsGoogleLoggingInitialized()) {
        if (!std::getenv("GLOG_logtostderr") && !std::getenv("GLOG_log_dir")) {
            FLAGS_logtostderr = true;
        }
        google::InitGoogleLogging("mooncake.engine");
    }
    namespace ps = mooncake::tent::py_support;
    ps::registerStatusErrors(m, "TransferError");
    for (const char* flag : {"SUPPORT_EFA", "SUPPORT_HIP", "SUPPORT_MNNVL",
                             "SUPPORT_MUSA", "SUPPORT_INTRA_NVLINK"}) {
        m.attr(flag) = false;
    }
    // Classic's SUPPORT_CUDA announces the *_on_cuda methods, which this
    // tree does not implement (device memory itself works with USE_CUDA).
    m.attr("SUPPORT_CUDA") = false;
#ifdef TENT_HAVE_MPCOMM
    m.attr("SUPPORT_MPCOMM") = true;
#else
    m.attr("SUPPORT_MPCOMM") = false;
#endif
    mooncake::tent::classic::bindClassicEngine(m);
}
