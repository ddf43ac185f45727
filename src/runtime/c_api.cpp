// The tent_* C API over TransferEngine: configuration, engine lifecycle,
// segments, batches and statuses. Memory calls are in c_api_memory.cpp.
// Every int-returning call reports failure as -1 and leaves the reason in
// a per-thread string (tent_last_error()).
#include <glog/logging.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/json_util.h"
#include "runtime/c_api_support.h"
#include "tent/common/config.h"
#include "tent/transfer_engine.h"

using mooncake::tent::BatchID;
using mooncake::tent::Config;
using mooncake::tent::Request;
using mooncake::tent::SegmentID;
using mooncake::tent::SegmentInfo;
using mooncake::tent::Status;
using mooncake::tent::TransferEngine;
using mooncake::tent::TransferStatus;
using mooncake::tent::TransportType;
using mooncake::tent::capi::engineFor;
using mooncake::tent::capi::engineOf;
using mooncake::tent::capi::fail;
using mooncake::tent::capi::report;

// The C status codes are the C++ enum's values; a C caller compares them
// directly, so they must never drift apart.
static_assert(STATUS_WAITING == mooncake::tent::INITIAL);
static_assert(STATUS_PENDING == mooncake::tent::PENDING);
static_assert(STATUS_INVALID == mooncake::tent::INVALID);
static_assert(STATUS_CANCELED == mooncake::tent::CANCELED);
static_assert(STATUS_COMPLETED == mooncake::tent::COMPLETED);
static_assert(STATUS_TIMEOUT == mooncake::tent::TIMEOUT);
static_assert(STATUS_FAILED == mooncake::tent::FAILED);
static_assert(TRANSPORT_MPCOMM == mooncake::tent::MPCOMM);
static_assert(OPCODE_WRITE == Request::WRITE && OPCODE_READ == Request::READ);

namespace mooncake::tent::capi {

namespace {
thread_local std::string g_last_error;
}  // namespace

int fail(const std::string& message) {
    g_last_error = message;
    return -1;
}

int report(const Status& status) {
    if (status.ok()) return 0;
    return fail(status.ToString());
}

TransferEngine* engineOf(tent_engine_t engine, const char* call) {
    if (!engine) {
        fail(std::string(call) + ": engine handle is NULL");
        return nullptr;
    }
    return static_cast<TransferEngine*>(engine);
}

void copyTruncated(const std::string& text, char* buf, size_t capacity) {
    if (capacity == 0) return;
    const size_t n = std::min(text.size(), capacity - 1);
    std::memcpy(buf, text.data(), n);
    buf[n] = '\0';
}

int toRequests(const char* call, const tent_request_t* entries, size_t count,
               std::vector<Request>& out) {
    if (!entries && count > 0) {
        return fail(std::string(call) + ": entries is NULL with count " +
                    std::to_string(count));
    }
    out.assign(count, Request());
    for (size_t i = 0; i < count; ++i) {
        const tent_request_t& in = entries[i];
        const std::string which =
            std::string(call) + ": request " + std::to_string(i);
        if (in.opcode != OPCODE_READ && in.opcode != OPCODE_WRITE) {
            return fail(which + " has bad opcode " + std::to_string(in.opcode));
        }
        if (in.priority < 0 || in.priority > 2) {
            return fail(which + " has bad priority " +
                        std::to_string(in.priority) +
                        " (0 high, 1 medium, 2 low)");
        }
        if (in.transport_hint < 0 ||
            in.transport_hint >= kSupportedTransportTypes) {
            return fail(which + " has bad transport_hint " +
                        std::to_string(in.transport_hint));
        }
        Request& r = out[i];
        r.opcode = in.opcode == OPCODE_WRITE ? Request::WRITE : Request::READ;
        r.source = in.source;
        r.target_id = in.target_id;
        r.target_offset = in.target_offset;
        r.length = in.length;
        r.priority = in.priority;
        r.transport_hint = static_cast<TransportType>(in.transport_hint);
    }
    return 0;
}

}  // namespace mooncake::tent::capi

namespace {

// What tent_load_config_from_file()/tent_set_config() gathered for the
// next tent_create_engine() on this thread (per thread, as upstream).
struct PendingConfig {
    std::string path;
    std::vector<std::pair<std::string, Json::Value>> values;
};
thread_local PendingConfig g_pending;

void toCStatus(const TransferStatus& in, tent_status_t* out) {
    out->status = static_cast<int>(in.s);
    out->transferred_bytes = in.transferred_bytes;
}

// Copies `text` whole into a caller's buffer, or fails naming the size
// it needs.
int copyWhole(const char* call, const std::string& text, char* buf,
              size_t buf_len) {
    if (!buf || buf_len < text.size() + 1) {
        return fail(std::string(call) + ": buffer of " +
                    std::to_string(buf_len) + " bytes is too small for " +
                    text + " (needs " + std::to_string(text.size() + 1) + ")");
    }
    std::memcpy(buf, text.c_str(), text.size() + 1);
    return 0;
}

}  // namespace

extern "C" {

const char* tent_last_error(void) {
    return mooncake::tent::capi::g_last_error.c_str();
}

void tent_load_config_from_file(const char* path) {
    // Read at tent_create_engine(), which fails naming the file if it
    // cannot be loaded; NULL or "" forgets an earlier path.
    g_pending.path = path ? path : "";
}

void tent_set_config(const char* key, const char* value) {
    if (!key || !*key || !value) {
        fail(std::string("tent_set_config: ") +
             (!key || !*key ? "key" : "value") + " is NULL or empty");
        LOG(ERROR) << tent_last_error();
        return;
    }
    // "false" and "15000" must reach the engine as a bool and a number:
    // Config::get() answers the default for a value of the wrong type.
    Json::Value parsed;
    std::string errs;
    if (!mooncake::tent::parseJsonText(value, true, parsed, errs)) {
        parsed = Json::Value(value);
    }
    g_pending.values.emplace_back(key, parsed);
}

tent_engine_t tent_create_engine(void) {
    auto conf = std::make_shared<Config>();
    if (!g_pending.path.empty()) {
        Status s = conf->loadFile(g_pending.path);
        if (!s.ok()) {
            fail("tent_create_engine: " + s.ToString());
            return nullptr;
        }
    }
    for (const auto& [key, value] : g_pending.values) conf->set(key, value);
    auto engine = std::make_unique<TransferEngine>(conf);
    if (!engine->available()) {
        // An unavailable engine answers every call with the reason its
        // construction failed; any cheap call fetches it.
        SegmentInfo unused;
        report(engine->getSegmentInfo(LOCAL_SEGMENT_ID, unused));
        return nullptr;
    }
    return engine.release();
}

void tent_destroy_engine(tent_engine_t engine) {
    delete static_cast<TransferEngine*>(engine);
}

int tent_available(tent_engine_t engine) {
    TransferEngine* e = engineOf(engine, "tent_available");
    return e && e->available() ? 1 : 0;
}

int tent_segment_name(tent_engine_t engine, char* buf, size_t buf_len) {
    TransferEngine* e = engineOf(engine, "tent_segment_name");
    if (!e) return -1;
    return copyWhole("tent_segment_name", e->getSegmentName(), buf, buf_len);
}

int tent_rpc_server_addr_port(tent_engine_t engine, char* addr_buf,
                              size_t buf_len, uint16_t* port) {
    TransferEngine* e =
        engineFor(engine, "tent_rpc_server_addr_port", port, "port");
    if (!e) return -1;
    const uint16_t p = e->getRpcServerPort();
    // The C call reports the host and the port apart; strip the port if
    // the C++ address carries it ("host:port").
    std::string host = e->getRpcServerAddress();
    const std::string suffix = ":" + std::to_string(p);
    if (host.size() > suffix.size() &&
        host.compare(host.size() - suffix.size(), suffix.size(), suffix) == 0) {
        host.resize(host.size() - suffix.size());
    }
    if (copyWhole("tent_rpc_server_addr_port", host, addr_buf, buf_len) != 0)
        return -1;
    *port = p;
    return 0;
}

int tent_open_segment(tent_engine_t engine, tent_segment_id_t* handle,
                      const char* segment_name) {
    TransferEngine* e = engineOf(engine, "tent_open_segment");
    if (!e) return -1;
    if (!handle || !segment_name) {
        return fail(
            "tent_open_segment: handle and segment_name must not be NULL");
    }
    SegmentID id = 0;
    if (report(e->openSegment(id, segment_name)) != 0) return -1;
    *handle = id;
    return 0;
}

int tent_close_segment(tent_engine_t engine, tent_segment_id_t handle) {
    TransferEngine* e = engineOf(engine, "tent_close_segment");
    return e ? report(e->closeSegment(handle)) : -1;
}

int tent_get_segment_info(tent_engine_t engine, tent_segment_id_t handle,
                          tent_segment_info_t* info) {
    TransferEngine* e =
        engineFor(engine, "tent_get_segment_info", info, "info");
    if (!e) return -1;
    SegmentInfo desc;
    if (report(e->getSegmentInfo(handle, desc)) != 0) return -1;
    tent_buffer_info* buffers = nullptr;
    if (!desc.buffers.empty()) {
        buffers = static_cast<tent_buffer_info*>(
            std::calloc(desc.buffers.size(), sizeof(tent_buffer_info)));
        if (!buffers) {
            return fail("tent_get_segment_info: out of memory for " +
                        std::to_string(desc.buffers.size()) + " buffers");
        }
    }
    for (size_t i = 0; i < desc.buffers.size(); ++i) {
        buffers[i].base = desc.buffers[i].base;
        buffers[i].length = desc.buffers[i].length;
        mooncake::tent::capi::copyTruncated(desc.buffers[i].location,
                                            buffers[i].location,
                                            sizeof(buffers[i].location));
    }
    info->type = desc.type == SegmentInfo::File ? TYPE_FILE : TYPE_MEMORY;
    info->num_buffers = static_cast<int>(desc.buffers.size());
    info->buffers = buffers;
    return 0;
}

void tent_free_segment_info(tent_segment_info_t* info) {
    mooncake::tent::capi::freeArray(info, &tent_segment_info_t::buffers,
                                    &tent_segment_info_t::num_buffers);
}

tent_batch_id_t tent_allocate_batch(tent_engine_t engine, size_t batch_size) {
    TransferEngine* e = engineOf(engine, "tent_allocate_batch");
    if (!e) return 0;
    if (batch_size == 0) {
        fail("tent_allocate_batch: batch_size must be positive");
        return 0;
    }
    BatchID id = e->allocateBatch(batch_size);
    if (id == 0) {
        fail("tent_allocate_batch: a batch of " + std::to_string(batch_size) +
             " could not be allocated (the log says why)");
    }
    return id;
}

int tent_free_batch(tent_engine_t engine, tent_batch_id_t batch_id) {
    TransferEngine* e = engineOf(engine, "tent_free_batch");
    return e ? report(e->freeBatch(batch_id)) : -1;
}

int tent_submit(tent_engine_t engine, tent_batch_id_t batch_id,
                tent_request_t* entries, size_t count) {
    TransferEngine* e = engineOf(engine, "tent_submit");
    if (!e) return -1;
    std::vector<Request> list;
    if (mooncake::tent::capi::toRequests("tent_submit", entries, count, list) !=
        0)
        return -1;
    return report(e->submitTransfer(batch_id, list));
}

int tent_task_status(tent_engine_t engine, tent_batch_id_t batch_id,
                     size_t task_id, tent_status_t* status) {
    TransferEngine* e = engineFor(engine, "tent_task_status", status, "status");
    if (!e) return -1;
    TransferStatus s;
    if (report(e->getTransferStatus(batch_id, task_id, s)) != 0) return -1;
    toCStatus(s, status);
    return 0;
}

int tent_overall_status(tent_engine_t engine, tent_batch_id_t batch_id,
                        tent_status_t* status) {
    TransferEngine* e =
        engineFor(engine, "tent_overall_status", status, "status");
    if (!e) return -1;
    TransferStatus s;
    if (report(e->getTransferStatus(batch_id, s)) != 0) return -1;
    toCStatus(s, status);
    return 0;
}

int tent_task_status_list(tent_engine_t engine, tent_batch_id_t batch_id,
                          tent_status_t* statuses, size_t* count) {
    TransferEngine* e =
        engineFor(engine, "tent_task_status_list", count, "count");
    if (!e) return -1;
    if (!statuses && *count > 0) {
        return fail("tent_task_status_list: statuses is NULL with count " +
                    std::to_string(*count));
    }
    std::vector<TransferStatus> list;
    if (report(e->getTransferStatus(batch_id, list)) != 0) return -1;
    const size_t n = std::min(*count, list.size());
    for (size_t i = 0; i < n; ++i) toCStatus(list[i], &statuses[i]);
    *count = list.size();
    return 0;
}

}  // extern "C"
