#include "py_support.h"

#include <map>
#include <new>
#include <string_view>

namespace mooncake::tent::py_support {

namespace {

const Status::Code kCodes[] = {
    Status::Code::kInvalidArgument,      Status::Code::kTooManyRequests,
    Status::Code::kAddressNotRegistered, Status::Code::kDeviceNotFound,
    Status::Code::kInvalidEntry,         Status::Code::kInvalidMetadataType,
    Status::Code::kNeedsRefreshCache,    Status::Code::kRdmaError,
    Status::Code::kMetadataError,        Status::Code::kRpcServiceError,
    Status::Code::kMalformedJson,        Status::Code::kInternalError,
    Status::Code::kNotImplemented,
};

// "InvalidArgument" -> "InvalidArgumentError"; codes already ending in
// "Error" (RdmaError, MetadataError, ...) keep their name.
std::string className(Status::Code code) {
    std::string name(Status::CodeToString(code));
    const std::string suffix = "Error";
    if (name.size() < suffix.size() ||
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0) {
        name += suffix;
    }
    return name;
}

// This module's classes. Handles are leaked on purpose: the interpreter
// owns the classes through the module, and a static py::object would be
// released after the interpreter is gone.
struct Classes {
    PyObject* base = nullptr;
    std::map<Status::Code, PyObject*> by_code;
};

Classes& classes() {
    static Classes c;
    return c;
}

void raise(const StatusError& e) {
    const Classes& c = classes();
    auto it = c.by_code.find(e.status().code());
    PyObject* type = it == c.by_code.end() ? c.base : it->second;
    py::object instance =
        py::reinterpret_borrow<py::object>(type)(py::str(e.what()));
    instance.attr("code") =
        py::str(std::string(Status::CodeToString(e.status().code())));
    instance.attr("status_message") =
        py::str(std::string(e.status().message()));
    PyErr_SetObject(type, instance.ptr());
}

}  // namespace

StatusError::StatusError(const Status& status, const std::string& where)
    : status_(status), what_(where + ": " + std::string(status.message())) {}

void registerStatusErrors(py::module_& m, const char* base_name) {
    Classes& c = classes();
    const std::string module_name = py::str(m.attr("__name__"));
    c.base = PyErr_NewException((module_name + "." + base_name).c_str(),
                                PyExc_RuntimeError, nullptr);
    if (c.base == nullptr) throw py::error_already_set();
    m.attr(base_name) = py::reinterpret_borrow<py::object>(c.base);
    for (Status::Code code : kCodes) {
        const std::string name = className(code);
        py::tuple bases;
        if (code == Status::Code::kInvalidArgument) {
            bases = py::make_tuple(py::handle(c.base),
                                   py::handle(PyExc_ValueError));
        } else if (code == Status::Code::kNotImplemented) {
            bases = py::make_tuple(py::handle(c.base),
                                   py::handle(PyExc_NotImplementedError));
        } else {
            bases = py::make_tuple(py::handle(c.base));
        }
        PyObject* type = PyErr_NewException((module_name + "." + name).c_str(),
                                            bases.ptr(), nullptr);
        if (type == nullptr) throw py::error_already_set();
        c.by_code[code] = type;
        m.attr(name.c_str()) = py::reinterpret_borrow<py::object>(type);
    }
    py::register_local_exception_translator([](std::exception_ptr p) {
        if (!p) return;
        try {
            std::rethrow_exception(p);
        } catch (const StatusError& e) {
            raise(e);
        } catch (const std::bad_alloc&) {
            // The module's documented classes, not MemoryError, for a
            // runtime allocation that failed.
            raise(StatusError(Status(Status::Code::kInternalError,
                                     "out of memory (std::bad_alloc)"),
                              "TENT runtime"));
        }
    });
}

LocalMemory localMemory(const py::handle& obj, std::optional<size_t> length,
                        const char* written_as, const std::string& what) {
    LocalMemory out;
    if (py::isinstance<py::int_>(obj)) {
        if (!length) {
            fail(Status::Code::kInvalidArgument, what,
                 "a length is required with an address (" +
                     std::string(py::str(obj)) + ")");
        }
        try {
            out.addr = obj.cast<uint64_t>();
        } catch (const py::cast_error&) {
            fail(Status::Code::kInvalidArgument, what,
                 "address " + std::string(py::str(obj)) +
                     " is not an unsigned 64-bit integer");
        }
        out.length = *length;
        return out;
    }
    if (!PyObject_CheckBuffer(obj.ptr())) {
        fail(Status::Code::kInvalidArgument, what,
             "expected an address (int) or an object with the buffer "
             "protocol, got " +
                 std::string(py::str(obj.get_type().attr("__name__"))));
    }
    const std::string type_name = py::str(obj.get_type().attr("__name__"));
    auto view = std::make_unique<Py_buffer>();
    if (PyObject_GetBuffer(obj.ptr(), view.get(),
                           PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) != 0) {
        PyErr_Clear();
        fail(Status::Code::kInvalidArgument, what,
             "the " + type_name + " object is not C-contiguous memory");
    }
    // buffer_info takes ownership of the view and releases it.
    out.view = std::make_shared<py::buffer_info>(view.release(), true);
    if (written_as != nullptr && out.view->readonly) {
        fail(Status::Code::kInvalidArgument, what,
             "the " + type_name + " object is read-only and cannot be " +
                 written_as);
    }
    const size_t size = static_cast<size_t>(out.view->size) *
                        static_cast<size_t>(out.view->itemsize);
    if (length && *length > size) {
        fail(Status::Code::kInvalidArgument, what,
             "length " + std::to_string(*length) + " exceeds the " + type_name +
                 " object's " + std::to_string(size) + " bytes");
    }
    out.addr = reinterpret_cast<uint64_t>(out.view->ptr);
    out.length = length ? *length : size;
    return out;
}

bool segmentContains(const SegmentInfo& info, uint64_t addr, uint64_t length) {
    for (const SegmentInfo::Buffer& b : info.buffers) {
        if (addr >= b.base && length <= b.length &&
            addr - b.base <= b.length - length) {
            return true;
        }
    }
    return false;
}

}  // namespace mooncake::tent::py_support
