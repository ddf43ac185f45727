// Helpers shared by the C API's translation units (c_api.cpp,
// c_api_memory.cpp, c_api_notify.cpp): the per-thread error text, the
// handle and argument checks, and freeing what a call handed out.
#pragma once

#include <cstdlib>
#include <string>
#include <vector>

#include "tent/common/status.h"
#include "tent/transfer_engine.h"

namespace mooncake::tent::capi {

// Records `message` as this thread's last error; returns -1.
int fail(const std::string& message);

// 0 for OK; else records the status text and returns -1.
int report(const Status& status);

// The engine behind a C handle; NULL (with the error recorded, naming
// `call`) for a NULL handle, the most common C mistake.
TransferEngine* engineOf(tent_engine_t engine, const char* call);

// engineOf(), then the one out-parameter `out` that a query fills: NULL
// (with "`call`: `what` is NULL" recorded) where it is NULL.
template <typename Out>
TransferEngine* engineFor(tent_engine_t engine, const char* call, Out* out,
                          const char* what) {
    TransferEngine* e = engineOf(engine, call);
    if (e && !out) {
        fail(std::string(call) + ": " + what + " is NULL");
        return nullptr;
    }
    return e;
}

// Frees the array a call allocated into `info` and empties `info`; NULL is
// a no-op.
template <typename Info, typename Item>
void freeArray(Info* info, Item* Info::*items, int Info::*count) {
    if (!info) return;
    std::free(info->*items);
    info->*items = nullptr;
    info->*count = 0;
}

// Copies `text` NUL-terminated into `buf` of `capacity` bytes, cutting it
// short when it does not fit.
void copyTruncated(const std::string& text, char* buf, size_t capacity);

// Converts `count` C requests, checking opcode, priority and
// transport_hint; -1 with the error naming `call`, the request's index and
// the bad value.
int toRequests(const char* call, const tent_request_t* entries, size_t count,
               std::vector<Request>& out);

}  // namespace mooncake::tent::capi
