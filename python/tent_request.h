// tent.Request: TENT's Request as the `tent` module binds it, holding the
// view of a buffer-object source so that its length can be kept within
// the object.
#pragma once

#include <pybind11/pybind11.h>

#include <string>
#include <vector>

#include "py_support.h"
#include "tent/transfer_engine.h"

namespace mooncake::tent::tent_py {

namespace py = pybind11;

// A Request as Python holds it: the runtime's Request and, when `source`
// is an object, a view of that object. The view is held (the object can be
// neither freed nor resized while the Request exists), and every way of
// changing source, length or opcode is checked against it, so a Request
// never reaches past its object.
struct PyRequest {
    Request r;
    py_support::LocalMemory memory;  // view null: an int address
    std::string type_name;
};

// Binds PyRequest as `Request` into `m`.
void bindRequest(py::module_& m);

// The runtime's requests of a submission. An object source was checked
// against its object when set; an int address must lie inside memory
// registered with this engine, the only memory a caller can be shown to
// own. Called with the GIL released (reads no Python object).
std::vector<Request> toRequests(TransferEngine& e,
                                const std::vector<PyRequest>& list,
                                const char* method);

}  // namespace mooncake::tent::tent_py
