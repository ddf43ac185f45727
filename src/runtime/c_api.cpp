// The tent_* C API over TransferEngineImpl. Every int-returning call
// reports failure as -1 and leaves the reason in a per-thread string.
#include <cstring>
#include <string>

#include "runtime/transfer_engine_impl.h"
#include "tent/transfer_engine.h"

using mooncake::tent::BatchID;
using mooncake::tent::Config;
using mooncake::tent::MemoryOptions;
using mooncake::tent::Request;
using mooncake::tent::SegmentID;
using mooncake::tent::Status;
using mooncake::tent::TransferEngineImpl;
using mooncake::tent::TransferStatus;
using mooncake::tent::TransportType;

namespace {

thread_local std::string g_last_error;

int fail(const std::string& message) {
    g_last_error = message;
    return -1;
}

int report(const Status& s) {
    if (s.ok()) return 0;
    return fail(s.ToString());
}

// Null handles are the most common C mistake; each call names itself.
TransferEngineImpl* engineOf(tent_engine_t engine, const char* call) {
    if (!engine) {
        fail(std::string(call) + ": engine handle is NULL");
        return nullptr;
    }
    return static_cast<TransferEngineImpl*>(engine);
}

}  // namespace

extern "C" {

const char* tent_last_error(void) { return g_last_error.c_str(); }

tent_engine_t tent_create_engine(const char* config_path) {
    auto impl = std::make_unique<TransferEngineImpl>(
        std::make_shared<Config>(), config_path ? config_path : "");
    if (!impl->available()) {
        fail(impl->notAvailable().ToString());
        return nullptr;
    }
    return impl.release();
}

void tent_destroy_engine(tent_engine_t engine) {
    delete static_cast<TransferEngineImpl*>(engine);
}

int tent_available(tent_engine_t engine) {
    TransferEngineImpl* impl = engineOf(engine, "tent_available");
    return impl && impl->available() ? 1 : 0;
}

int tent_segment_name(tent_engine_t engine, char* buf, size_t buf_len) {
    TransferEngineImpl* impl = engineOf(engine, "tent_segment_name");
    if (!impl) return -1;
    if (!impl->available()) return report(impl->notAvailable());
    const std::string& name = impl->segmentName();
    if (!buf || buf_len < name.size() + 1) {
        return fail("tent_segment_name: buffer of " + std::to_string(buf_len) +
                    " bytes is too small for " + name + " (needs " +
                    std::to_string(name.size() + 1) + ")");
    }
    std::memcpy(buf, name.c_str(), name.size() + 1);
    return 0;
}

int tent_open_segment(tent_engine_t engine, tent_segment_id_t* handle,
                      const char* segment_name) {
    TransferEngineImpl* impl = engineOf(engine, "tent_open_segment");
    if (!impl) return -1;
    if (!handle || !segment_name) {
        return fail(
            "tent_open_segment: handle and segment_name must not be "
            "NULL");
    }
    SegmentID id = 0;
    int rc = report(impl->openSegment(id, segment_name));
    if (rc == 0) *handle = id;
    return rc;
}

int tent_close_segment(tent_engine_t engine, tent_segment_id_t handle) {
    TransferEngineImpl* impl = engineOf(engine, "tent_close_segment");
    return impl ? report(impl->closeSegment(handle)) : -1;
}

int tent_allocate_memory(tent_engine_t engine, void** addr, size_t size) {
    TransferEngineImpl* impl = engineOf(engine, "tent_allocate_memory");
    return impl ? report(impl->allocateLocalMemory(addr, size, MemoryOptions()))
                : -1;
}

int tent_free_memory(tent_engine_t engine, void* addr) {
    TransferEngineImpl* impl = engineOf(engine, "tent_free_memory");
    return impl ? report(impl->freeLocalMemory(addr)) : -1;
}

int tent_register_memory(tent_engine_t engine, void* addr, size_t size) {
    TransferEngineImpl* impl = engineOf(engine, "tent_register_memory");
    return impl ? report(impl->registerLocalMemory({addr}, {size},
                                                   MemoryOptions()))
                : -1;
}

int tent_unregister_memory(tent_engine_t engine, void* addr, size_t size) {
    TransferEngineImpl* impl = engineOf(engine, "tent_unregister_memory");
    return impl ? report(impl->unregisterLocalMemory({addr}, {size})) : -1;
}

tent_batch_id_t tent_allocate_batch(tent_engine_t engine, size_t batch_size) {
    TransferEngineImpl* impl = engineOf(engine, "tent_allocate_batch");
    if (!impl) return 0;
    if (!impl->available()) {
        report(impl->notAvailable());
        return 0;
    }
    if (batch_size == 0) {
        fail("tent_allocate_batch: batch_size must be positive");
        return 0;
    }
    BatchID id = impl->allocateBatch(batch_size);
    if (id == 0) fail("tent_allocate_batch: allocation failed");
    return id;
}

int tent_free_batch(tent_engine_t engine, tent_batch_id_t batch_id) {
    TransferEngineImpl* impl = engineOf(engine, "tent_free_batch");
    return impl ? report(impl->freeBatch(batch_id)) : -1;
}

int tent_submit(tent_engine_t engine, tent_batch_id_t batch_id,
                const struct tent_request* requests, size_t count) {
    TransferEngineImpl* impl = engineOf(engine, "tent_submit");
    if (!impl) return -1;
    if (!requests && count > 0) {
        return fail("tent_submit: requests is NULL with count " +
                    std::to_string(count));
    }
    std::vector<Request> list(count);
    for (size_t i = 0; i < count; ++i) {
        const tent_request& in = requests[i];
        if (in.opcode != OPCODE_READ && in.opcode != OPCODE_WRITE) {
            return fail("tent_submit: request " + std::to_string(i) +
                        " has bad opcode " + std::to_string(in.opcode));
        }
        if (in.transport_hint < 0 ||
            in.transport_hint >= mooncake::tent::kSupportedTransportTypes) {
            return fail("tent_submit: request " + std::to_string(i) +
                        " has bad transport_hint " +
                        std::to_string(in.transport_hint));
        }
        Request& out = list[i];
        out.opcode = in.opcode == OPCODE_WRITE ? Request::WRITE : Request::READ;
        out.source = in.source;
        out.target_id = in.target_id;
        out.target_offset = in.target_offset;
        out.length = in.length;
        out.transport_hint = static_cast<TransportType>(in.transport_hint);
    }
    return report(impl->submitTransfer(batch_id, list));
}

int tent_get_status(tent_engine_t engine, tent_batch_id_t batch_id,
                    size_t task_id, struct tent_status* status) {
    TransferEngineImpl* impl = engineOf(engine, "tent_get_status");
    if (!impl) return -1;
    if (!status) return fail("tent_get_status: status is NULL");
    TransferStatus s;
    int rc = report(impl->getTransferStatus(batch_id, task_id, s));
    if (rc == 0) {
        status->status = static_cast<int>(s.s);
        status->transferred_bytes = s.transferred_bytes;
    }
    return rc;
}

int tent_get_overall_status(tent_engine_t engine, tent_batch_id_t batch_id,
                            struct tent_status* status) {
    TransferEngineImpl* impl = engineOf(engine, "tent_get_overall_status");
    if (!impl) return -1;
    if (!status) return fail("tent_get_overall_status: status is NULL");
    TransferStatus s;
    int rc = report(impl->getTransferStatus(batch_id, s));
    if (rc == 0) {
        status->status = static_cast<int>(s.s);
        status->transferred_bytes = s.transferred_bytes;
    }
    return rc;
}

}  // extern "C"
