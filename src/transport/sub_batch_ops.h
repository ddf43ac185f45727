// How the in-tree transports whose sub-batch is a plain class allocate,
// free and take back a sub-batch (private to libtent): the checks and their
// error texts in one place, `name` ("tcp", "shm") naming the transport.
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
