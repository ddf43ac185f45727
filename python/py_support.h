// What both Python modules (mooncake.engine and tent) share: Status errors
// raised as one Python exception class per Status code, and memory given
// either as an object with the buffer protocol or as an address.
//
// Each module compiles this unit itself, so each has its own exception
// classes (engine.TransferError, tent.TentException) registered in it.
#pragma once

#include <pybind11/pybind11.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "tent/common/status.h"
#include "tent/common/types.h"

namespace mooncake::tent::py_support {

namespace py = pybind11;

// Thrown by binding code; the translator registered by registerStatusErrors
// raises the module's class for the code, with `where: <message>` as text
// and the attributes `code` (the code's name) and `status_message`.
class StatusError : public std::exception {
 public:
    StatusError(const Status& status, const std::string& where);
    const char* what() const noexcept override { return what_.c_str(); }
    const Status& status() const { return status_; }

 private:
    Status status_;
    std::string what_;
};

inline void check(const Status& s, const std::string& where) {
    if (!s.ok()) throw StatusError(s, where);
}
[[noreturn]] inline void fail(Status::Code code, const std::string& where,
                              const std::string& message) {
    throw StatusError(Status(code, message), where);
}

// Adds `base_name` (a RuntimeError) and `<Code>Error` for every code to `m`
// (InvalidArgumentError is also a ValueError, NotImplementedError also the
// built-in NotImplementedError) and installs the translator, which also
// raises InternalError for a std::bad_alloc.
void registerStatusErrors(py::module_& m, const char* base_name);

// True when [addr, addr + length) lies inside one buffer of `info`
// (overflow-safe).
bool segmentContains(const SegmentInfo& info, uint64_t addr, uint64_t length);

// Memory named by a Python argument. From an object with the buffer
// protocol the view is held (the object cannot be resized or freed under a
// transfer) until this is destroyed, which must happen with the GIL held.
struct LocalMemory {
    uint64_t addr = 0;
    size_t length = 0;
    std::shared_ptr<py::buffer_info> view;  // null for a plain address
};

// `obj` is an int address (then `length` is required) or a C-contiguous
// object with the buffer protocol (then `length`, when given, must not
// exceed its size). `written_as`, when not null, says how the memory will be
// written ("the destination of a READ"); a read-only object is then refused
// with that reason. Errors name `what` and the value.
LocalMemory localMemory(const py::handle& obj, std::optional<size_t> length,
                        const char* written_as, const std::string& what);

}  // namespace mooncake::tent::py_support
