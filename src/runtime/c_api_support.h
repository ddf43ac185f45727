// Helpers shared by the C API's translation units (c_api.cpp,
// c_api_memory.cpp): the per-thread error text and the handle check.
#pragma once

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

// Copies `text` NUL-terminated into `buf` of `capacity` bytes, cutting it
// short when it does not fit.
void copyTruncated(const std::string& text, char* buf, size_t capacity);

// Converts `count` C requests, checking opcode, priority and
// transport_hint; -1 with the error naming `call`, the request's index and
// the bad value.
int toRequests(const char* call, const tent_request_t* entries, size_t count,
               std::vector<Request>& out);

}  // namespace mooncake::tent::capi
