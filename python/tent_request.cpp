#include "tent_request.h"

#include <pybind11/stl.h>

#include <optional>
#include <sstream>

namespace mooncake::tent::tent_py {

namespace {

using py_support::check;

void* ptr(uint64_t a) { return reinterpret_cast<void*>(a); }

const char kReadDestination[] = "the destination of a READ";

void checkLength(const py_support::LocalMemory& m, const std::string& type_name,
                 size_t length, const char* where) {
    if (m.view && length > m.length) {
        py_support::fail(Status::Code::kInvalidArgument, where,
                         "length " + std::to_string(length) + " exceeds the " +
                             type_name + " object's " +
                             std::to_string(m.length) + " bytes");
    }
}

// A request's source: read-only memory cannot receive a READ.
void setSource(PyRequest& p, const py::handle& source) {
    const char* where = "Request.source";
    if (py::isinstance<py::int_>(source)) {
        uint64_t addr = 0;
        try {
            addr = source.cast<uint64_t>();
        } catch (const py::cast_error&) {
            py_support::fail(Status::Code::kInvalidArgument, where,
                             "address " + std::string(py::str(source)) +
                                 " is not an unsigned 64-bit integer");
        }
        p.memory = py_support::LocalMemory{};
        p.type_name.clear();
        p.r.source = ptr(addr);
        return;
    }
    py_support::LocalMemory m = py_support::localMemory(
        source, std::nullopt,
        p.r.opcode == Request::READ ? kReadDestination : nullptr, where);
    const std::string type_name = py::str(source.get_type().attr("__name__"));
    checkLength(m, type_name, p.r.length, where);
    p.r.source = ptr(m.addr);
    p.memory = std::move(m);
    p.type_name = type_name;
}

void setOpcode(PyRequest& p, Request::OpCode opcode) {
    if (opcode == Request::READ && p.memory.view && p.memory.view->readonly) {
        py_support::fail(Status::Code::kInvalidArgument, "Request.opcode",
                         "the " + p.type_name +
                             " object is read-only and cannot be " +
                             kReadDestination);
    }
    p.r.opcode = opcode;
}

}  // namespace

std::vector<Request> toRequests(TransferEngine& e,
                                const std::vector<PyRequest>& list,
                                const char* method) {
    std::vector<Request> out;
    out.reserve(list.size());
    std::optional<SegmentInfo> local;
    for (size_t i = 0; i < list.size(); ++i) {
        const PyRequest& p = list[i];
        if (p.memory.view) {
            checkLength(p.memory, p.type_name, p.r.length, method);
        } else {
            if (!local) {
                local.emplace();
                check(e.getSegmentInfo(LOCAL_SEGMENT_ID, *local), method);
            }
            const uint64_t addr = reinterpret_cast<uint64_t>(p.r.source);
            if (!py_support::segmentContains(*local, addr, p.r.length)) {
                std::ostringstream os;
                os << "request " << i << ": local range [0x" << std::hex << addr
                   << std::dec << ", +" << p.r.length
                   << ") is not inside registered memory (register it, or "
                      "give the buffer object as the source)";
                py_support::fail(Status::Code::kAddressNotRegistered, method,
                                 os.str());
            }
        }
        out.push_back(p.r);
    }
    return out;
}

void bindRequest(py::module_& m) {
    py::class_<PyRequest>(m, "Request", py::module_local())
        .def(py::init<>())
        .def(py::init([](Request::OpCode opcode, py::handle source,
                         uint64_t target_id, uint64_t target_offset,
                         size_t length, int priority, TransportType hint,
                         std::optional<std::string> policy_name,
                         uint64_t deadline_ns, IntentType intent_type) {
                 PyRequest p;
                 p.r.opcode = opcode;
                 p.r.length = length;
                 setSource(p, source);
                 p.r.target_id = target_id;
                 p.r.target_offset = target_offset;
                 p.r.priority = priority;
                 p.r.transport_hint = hint;
                 p.r.policy_name = std::move(policy_name);
                 p.r.deadline_ns = deadline_ns;
                 p.r.intent_type = intent_type;
                 return p;
             }),
             py::arg("opcode"), py::arg("source"), py::arg("target_id"),
             py::arg("target_offset"), py::arg("length"),
             py::arg("priority") = PRIO_HIGH,
             py::arg("transport_hint") = UNSPEC,
             py::arg("policy_name") = std::nullopt, py::arg("deadline_ns") = 0,
             py::arg("intent_type") = IntentType::INTENT_UNSPEC)
        .def_property(
            "opcode", [](const PyRequest& p) { return p.r.opcode; }, &setOpcode)
        .def_property(
            "source",
            [](const PyRequest& p) {
                return reinterpret_cast<uint64_t>(p.r.source);
            },
            [](PyRequest& p, py::handle source) { setSource(p, source); })
        .def_property(
            "length", [](const PyRequest& p) { return p.r.length; },
            [](PyRequest& p, size_t length) {
                checkLength(p.memory, p.type_name, length, "Request.length");
                p.r.length = length;
            })
#define TENT_REQUEST_FIELD(name, member)                     \
    def_property(                                            \
        name, [](const PyRequest& p) { return p.r.member; }, \
        [](PyRequest& p, decltype(Request::member) v) { p.r.member = v; })
        .TENT_REQUEST_FIELD("target_id", target_id)
        .TENT_REQUEST_FIELD("target_offset", target_offset)
        .TENT_REQUEST_FIELD("priority", priority)
        .TENT_REQUEST_FIELD("transport_hint", transport_hint)
        .TENT_REQUEST_FIELD("policy_name", policy_name)
        .TENT_REQUEST_FIELD("deadline_ns", deadline_ns)
        .TENT_REQUEST_FIELD("intent_type", intent_type);
#undef TENT_REQUEST_FIELD
}

}  // namespace mooncake::tent::tent_py
