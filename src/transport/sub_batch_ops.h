// How the in-tree transports whose sub-batch is a plain class allocate,
// free, fill and take back a sub-batch, and check a request (private to
// libtent): the checks and their error texts in one place, `name` ("tcp",
// "shm") naming the transport.
// `name` stays a C string: subBatchOf() runs on every submission and status
// read, and the text is built only when a check fails.
#pragma once

#include <cstddef>
#include <string>

#include "tent/common/status.h"
#include "tent/runtime/transport.h"

namespace mooncake::tent {

template <class Impl>
Status newSubBatch(const char* name, Transport::SubBatchRef& batch,
                   size_t max_size) {
    if (max_size == 0) {
        return Status::InvalidArgument(
            std::string(name) +
            " transport: sub-batch capacity must be positive");
    }
    batch = new Impl(max_size);
    return Status::OK();
}

template <class Impl>
Status deleteSubBatch(Transport::SubBatchRef& batch) {
    delete static_cast<Impl*>(batch);
    batch = nullptr;
    return Status::OK();
}

// OK when `adding` more requests fit a sub-batch that holds `held` of its
// `capacity`; TooManyRequests naming both counts otherwise.
inline Status checkSubBatchRoom(const char* name, size_t held, size_t adding,
                                size_t capacity) {
    if (held <= capacity && adding <= capacity - held) return Status::OK();
    return Status::TooManyRequests(
        std::string(name) + " transport: " + std::to_string(adding) +
        " requests exceed the sub-batch's remaining capacity " +
        std::to_string(held <= capacity ? capacity - held : 0));
}

// OK when `task_id` names one of the `submitted` tasks of a sub-batch.
inline Status checkTaskId(const char* name, int task_id, size_t submitted) {
    if (task_id >= 0 && static_cast<size_t>(task_id) < submitted) {
        return Status::OK();
    }
    return Status::InvalidArgument(std::string(name) + " transport: task id " +
                                   std::to_string(task_id) + " out of range (" +
                                   std::to_string(submitted) + " submitted)");
}

// What a request must be before a transport runs it: a READ or a WRITE,
// and a source whenever it moves bytes.
inline Status checkRequest(const Request& r) {
    if (r.opcode != Request::READ && r.opcode != Request::WRITE) {
        return Status::InvalidArgument(
            "bad opcode " + std::to_string(static_cast<int>(r.opcode)));
    }
    if (r.length > 0 && !r.source) {
        return Status::InvalidArgument("null source for " +
                                       std::to_string(r.length) + " bytes");
    }
    return Status::OK();
}

// The sub-batch a submission or status call was handed, or InvalidArgument
// when it is null.
template <class Impl>
Status subBatchOf(const char* name, Transport::SubBatchRef batch, Impl*& out) {
    out = static_cast<Impl*>(batch);
    if (!out) {
        return Status::InvalidArgument(std::string(name) +
                                       " transport: null sub-batch");
    }
    return Status::OK();
}

}  // namespace mooncake::tent
