// mooncake.engine: the classic Python API (TransferEngine, TransferOpcode,
// TransferNotify) over this tree's TENT runtime. See classic_engine.h for
// the error convention and docs/python.md for the method table.
#include <glog/logging.h>
#include <pybind11/stl.h>

#include <cstdlib>
#include <cstring>
#include <new>
#include <tuple>

#include "classic_engine.h"

namespace mooncake::tent::classic {

namespace {

using Engine = ClassicEngine;
using Code = Status::Code;

// Classic's binding answers a refusal with a sentinel (-1, 0, an empty
// value) and logs why; Mooncake's tests and the SGLang/vLLM connectors check
// those values. The engine's methods raise StatusError, which is turned
// into the sentinel here. A TypeError from argument conversion and a
// ValueError for an unknown transport_hint stay exceptions, as in classic.
template <typename R, typename F>
R orSentinel(const char* method, R sentinel, F&& body) {
    try {
        return body();
    } catch (const py_support::StatusError& e) {
        LOG(ERROR) << e.what();
    } catch (const std::bad_alloc&) {
        LOG(ERROR) << method << ": out of memory";
    }
    return sentinel;
}

// Classic's error codes (its error.h) for the registration calls, which
// return the engine's code rather than -1.
int classicCode(Code code) {
    switch (code) {
        case Code::kTooManyRequests:
            return -2;
        case Code::kAddressNotRegistered:
            return -3;
        case Code::kDeviceNotFound:
            return -6;
        case Code::kMalformedJson:
            return -103;
        case Code::kMetadataError:
            return -200;
        case Code::kNotImplemented:
            return -303;
        default:
            return -1;
    }
}

template <typename F>
int orClassicCode(F&& body) {
    try {
        return body();
    } catch (const py_support::StatusError& e) {
        LOG(ERROR) << e.what();
        return classicCode(e.status().code());
    } catch (const std::bad_alloc&) {
        LOG(ERROR) << "out of memory";
        return -1;
    }
}

// Classic takes these lists as std::vector: any sequence but str and bytes
// (a TypeError otherwise, as pybind11's conversion raises there).
py::list sequenceArg(const py::object& obj, const char* method,
                     const char* name) {
    if (py::isinstance<py::str>(obj) || py::isinstance<py::bytes>(obj) ||
        !PySequence_Check(obj.ptr())) {
        throw py::type_error(
            std::string(method) + "(): " + name +
            " must be a sequence (list or tuple), got " +
            std::string(py::str(obj.get_type().attr("__name__"))));
    }
    return py::list(obj);
}

// Classic methods this tree has no path for: present, and raising the
// module's NotImplementedError naming the method and why (classic's own
// *_on_cuda methods raise on failure too).
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
    using Addrs = std::vector<uint64_t>;
    // Classic's device_name is a char*, which takes None (no filter).
    using OptStr = std::optional<std::string>;
    py::class_<Engine> cls(m, "TransferEngine", py::module_local());
    cls.def(py::init<>())
        .def(
            "initialize",
            [](Engine& e, const std::string& host, const std::string& server,
               const std::string& protocol, const OptStr& device) {
                return orSentinel("initialize", -1, [&] {
                    return e.initialize(host, server, protocol,
                                        device.value_or(""));
                });
            },
            py::arg("hostname"), py::arg("metadata_server"),
            py::arg("protocol"), py::arg("device_name"))
        .def(
            "initialize_ext",
            [](Engine& e, const std::string& host, const std::string& server,
               const std::string& protocol, const OptStr& device,
               const std::string& type) {
                return orSentinel("initialize_ext", -1, [&] {
                    return e.initializeExt(host, server, protocol,
                                           device.value_or(""), type);
                });
            },
            py::arg("hostname"), py::arg("metadata_server"),
            py::arg("protocol"), py::arg("device_name"),
            py::arg("metadata_type"))
        .def("close", &Engine::close)
        .def("get_rpc_port",
             [](Engine& e) {
                 return orSentinel("get_rpc_port", -1,
                                   [&] { return e.getRpcPort(); });
             })
        .def("get_segment_name",
             [](Engine& e) {
                 return orSentinel("get_segment_name", std::string(),
                                   [&] { return e.getSegmentName(); });
             })
        .def(
            "allocate_managed_buffer",
            [](Engine& e, size_t length) {
                return orSentinel("allocate_managed_buffer", uint64_t{0}, [&] {
                    return e.allocateManagedBuffer(length);
                });
            },
            py::arg("length"))
        .def(
            "free_managed_buffer",
            [](Engine& e, uint64_t addr, size_t length) {
                return orSentinel("free_managed_buffer", -1, [&] {
                    return e.freeManagedBuffer(addr, length);
                });
            },
            py::arg("buffer"), py::arg("length"));

    // The single and batch transfer calls, classic's names and arguments;
    // `buffer` is an address or a buffer-protocol object, and `length`
    // defaults to the object's size. Sync calls answer 0 or -1.
    for (auto [name, op] : {std::pair{"transfer_sync_write", Opcode::kWrite},
                            std::pair{"transfer_sync_read", Opcode::kRead}}) {
        cls.def(
            name,
            [op = op, name = name](Engine& e, const std::string& target,
                                   py::handle buffer, uint64_t peer,
                                   OptLen length, const std::string& hint) {
                return orSentinel(name, -1, [&] {
                    return e.transferSync(name, target, buffer, peer, length,
                                          op, nullptr, hint);
                });
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
                Engine& e, const std::string& target, const py::object& buffers,
                const Addrs& peers, OptLens lengths,
                const std::string& hint) -> py::int_ {
                py::list list = sequenceArg(buffers, name, "buffers");
                if (async) {
                    return py::int_(orSentinel(name, uint64_t{0}, [&] {
                        return e.batchTransferAsync(name, target, list, peers,
                                                    lengths, op, hint);
                    }));
                }
                return py::int_(orSentinel(name, -1, [&] {
                    return e.batchTransferSync(name, target, list, peers,
                                               lengths, op, nullptr, hint);
                }));
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
               return orSentinel("transfer_sync", -1, [&] {
                   return e.transferSync("transfer_sync", target, buffer, peer,
                                         length, op, notify, hint);
               });
           },
           py::arg("target_hostname"), py::arg("buffer"),
           py::arg("peer_buffer_address"), py::arg("length"), py::arg("opcode"),
           py::arg("notify") = nullptr, py::arg("transport_hint") = "")
        .def(
            "batch_transfer_sync",
            [](Engine& e, const std::string& target, const py::object& buffers,
               const Addrs& peers, OptLens lengths, Opcode op,
               const Notification* notify, const std::string& hint) {
                const char* name = "batch_transfer_sync";
                py::list list = sequenceArg(buffers, name, "buffers");
                return orSentinel(name, -1, [&] {
                    return e.batchTransferSync(name, target, list, peers,
                                               lengths, op, notify, hint);
                });
            },
            py::arg("target_hostname"), py::arg("buffers"),
            py::arg("peer_buffer_addresses"), py::arg("lengths"),
            py::arg("opcode"), py::arg("notify") = nullptr,
            py::arg("transport_hint") = "")
        .def(
            "batch_transfer_async",
            [](Engine& e, const std::string& target, const py::object& buffers,
               const Addrs& peers, OptLens lengths, Opcode op,
               const std::string& hint) {
                const char* name = "batch_transfer_async";
                py::list list = sequenceArg(buffers, name, "buffers");
                return orSentinel(name, uint64_t{0}, [&] {
                    return e.batchTransferAsync(name, target, list, peers,
                                                lengths, op, hint);
                });
            },
            py::arg("target_hostname"), py::arg("buffers"),
            py::arg("peer_buffer_addresses"), py::arg("lengths"),
            py::arg("opcode"), py::arg("transport_hint") = "")
        .def(
            "get_batch_transfer_status",
            [](Engine& e, const Addrs& ids) {
                return orSentinel("get_batch_transfer_status", -1, [&] {
                    return e.getBatchTransferStatus(ids);
                });
            },
            py::arg("batch_ids"))
        .def(
            "transfer_submit_write",
            [](Engine& e, const std::string& target, py::handle buffer,
               uint64_t peer, OptLen length, const std::string& hint) {
                const char* name = "transfer_submit_write";
                py::list buffers;
                buffers.append(buffer);
                OptLens lengths;
                if (length) lengths = std::vector<size_t>{*length};
                return orSentinel(name, uint64_t{0}, [&] {
                    return e.batchTransferAsync(name, target, buffers, {peer},
                                                lengths, Opcode::kWrite, hint);
                });
            },
            py::arg("target_hostname"), py::arg("buffer"),
            py::arg("peer_buffer_address"), py::arg("length") = py::none(),
            py::arg("transport_hint") = "")
        .def(
            "transfer_check_status",
            [](Engine& e, uint64_t id) {
                return orSentinel("transfer_check_status", -1,
                                  [&] { return e.transferCheckStatus(id); });
            },
            py::arg("batch_id"))
        // The raw-address helpers touch only memory this engine allocated
        // or registered; anything else is -1 (b"" for the read).
        .def(
            "write_bytes_to_buffer",
            [](Engine& e, uint64_t dest, const py::object& src, size_t length) {
                return orSentinel("write_bytes_to_buffer", -1, [&] {
                    return e.writeBytesToBuffer(dest, src, length);
                });
            },
            py::arg("dest_address"), py::arg("src_ptr"), py::arg("length"))
        .def(
            "read_bytes_from_buffer",
            [](Engine& e, uint64_t source, size_t length) {
                return orSentinel("read_bytes_from_buffer", py::bytes(), [&] {
                    return e.readBytesFromBuffer(source, length);
                });
            },
            py::arg("source_address"), py::arg("length"))
        // Registration returns the engine's code, as classic: 0 or one of
        // classic's negative error codes.
        .def(
            "register_memory",
            [](Engine& e, py::handle buffer, OptLen capacity,
               const std::string& location) {
                return orClassicCode([&] {
                    return e.registerMemory(buffer, capacity, location);
                });
            },
            py::arg("buffer_addr"), py::arg("capacity") = py::none(),
            py::arg("location") = kWildcardLocation)
        .def(
            "unregister_memory",
            [](Engine& e, py::handle buffer) {
                return orClassicCode(
                    [&] { return e.unregisterMemory(buffer); });
            },
            py::arg("buffer_addr"))
        .def(
            "batch_register_memory",
            [](Engine& e, const py::object& buffers, OptLens capacities,
               const std::string& location) {
                py::list list = sequenceArg(buffers, "batch_register_memory",
                                            "buffer_addresses");
                return orClassicCode([&] {
                    return e.batchRegisterMemory(list, capacities, location);
                });
            },
            py::arg("buffer_addresses"), py::arg("capacities") = py::none(),
            py::arg("location") = kWildcardLocation)
        .def(
            "batch_unregister_memory",
            [](Engine& e, const py::object& buffers) {
                py::list list = sequenceArg(buffers, "batch_unregister_memory",
                                            "buffer_addresses");
                return orClassicCode(
                    [&] { return e.batchUnregisterMemory(list); });
            },
            py::arg("buffer_addresses"))
        .def(
            "get_local_topology",
            [](Engine& e, const std::optional<std::string>& device) {
                return orSentinel("get_local_topology", std::string("{}"),
                                  [&] { return e.getLocalTopology(device); });
            },
            py::arg("device_name") = py::none())
        .def(
            "get_first_buffer_address",
            [](Engine& e, const std::string& segment) {
                return orSentinel("get_first_buffer_address", uint64_t{0}, [&] {
                    return e.getFirstBufferAddress(segment);
                });
            },
            py::arg("segment_name"))
        // Classic pre-connects EFA endpoints here and is a no-op (0)
        // elsewhere; this tree has no EFA.
        .def(
            "warmup_efa_segment", [](Engine&, const std::string&) { return 0; },
            py::arg("segment_name"))
        .def("get_notifies",
             [](Engine& e) {
                 return orSentinel("get_notifies", std::vector<Notification>(),
                                   [&] { return e.getNotifies(); });
             })
        .def(
            "send_probe",
            [](Engine& e, const std::string& peer) {
                return orSentinel("send_probe", -1,
                                  [&] { return e.sendProbe(peer); });
            },
            py::arg("peer_server_name"))
        // Classic's engine_ is null before initialize: None and 0.
        .def("get_engine",
             [](const Engine& e) {
                 return orSentinel("get_engine",
                                   std::shared_ptr<TransferEngine>(),
                                   [&] { return e.engine("get_engine"); });
             })
        .def("get_engine_ptr", [](const Engine& e) {
            return orSentinel("get_engine_ptr", uint64_t{0}, [&] {
                return reinterpret_cast<uint64_t>(
                    e.engine("get_engine_ptr").get());
            });
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
