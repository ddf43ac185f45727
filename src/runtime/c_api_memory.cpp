// The tent_* C API's memory calls: allocation and registration, plain, with
// a permission, in batches and with tent_memory_options (the _ex calls).
#include <cstring>
#include <string>
#include <vector>

#include "runtime/c_api_support.h"
#include "tent/transfer_engine.h"

using mooncake::tent::MemoryOptions;
using mooncake::tent::Permission;
using mooncake::tent::TransferEngine;
using mooncake::tent::TransportType;
using mooncake::tent::capi::engineOf;
using mooncake::tent::capi::fail;
using mooncake::tent::capi::report;

static_assert(PERM_LOCAL_READ_WRITE == mooncake::tent::kLocalReadWrite);
static_assert(PERM_GLOBAL_READ_ONLY == mooncake::tent::kGlobalReadOnly);
static_assert(PERM_GLOBAL_READ_WRITE == mooncake::tent::kGlobalReadWrite);

namespace {

int toPermission(const char* call, int permission, Permission& out) {
    if (permission < PERM_LOCAL_READ_WRITE ||
        permission > PERM_GLOBAL_READ_WRITE) {
        return fail(std::string(call) + ": bad permission " +
                    std::to_string(permission) +
                    " (PERM_LOCAL_READ_WRITE 0, PERM_GLOBAL_READ_ONLY 1, "
                    "PERM_GLOBAL_READ_WRITE 2)");
    }
    out = static_cast<Permission>(permission);
    return 0;
}

// A fixed-size char field must hold its NUL, or reading it would run past
// the struct.
int fieldText(const char* call, const char* field, const char* data,
              size_t capacity, std::string& out) {
    const void* end = std::memchr(data, '\0', capacity);
    if (!end) {
        return fail(std::string(call) + ": opts->" + field +
                    " is not NUL-terminated within its " +
                    std::to_string(capacity) + " bytes");
    }
    out.assign(data, static_cast<const char*>(end));
    return 0;
}

int toOptions(const char* call, const tent_memory_options_t* opts,
              MemoryOptions& out) {
    if (!opts) return fail(std::string(call) + ": opts is NULL");
    out = MemoryOptions();
    std::string location, shm_path;
    if (fieldText(call, "location", opts->location, sizeof(opts->location),
                  location) != 0 ||
        fieldText(call, "shm_path", opts->shm_path, sizeof(opts->shm_path),
                  shm_path) != 0 ||
        toPermission(call, opts->permission, out.perm) != 0) {
        return -1;
    }
    if (!location.empty()) out.location = location;
    if (opts->transport_type < 0 ||
        opts->transport_type >= mooncake::tent::kSupportedTransportTypes) {
        return fail(std::string(call) + ": bad transport_type " +
                    std::to_string(opts->transport_type));
    }
    out.type = static_cast<TransportType>(opts->transport_type);
    // Upstream maps a file into the buffer from these; this engine has no
    // file-backed buffers, and ignoring them would register other bytes
    // than the caller meant.
    if (!shm_path.empty() || opts->shm_offset != 0) {
        return fail(std::string(call) + ": shm_path \"" + shm_path +
                    "\" / shm_offset " + std::to_string(opts->shm_offset) +
                    " not supported: this engine has no file-backed buffers");
    }
    out.internal = opts->internal != 0;
    return 0;
}

int toLists(const char* call, void** addrs, size_t* sizes, size_t count,
            bool sizes_optional, std::vector<void*>& addr_list,
            std::vector<size_t>& size_list) {
    if (count > 0 && (!addrs || (!sizes && !sizes_optional))) {
        return fail(std::string(call) + ": addrs" +
                    (sizes_optional ? "" : " and sizes") +
                    " must not be NULL with count " + std::to_string(count));
    }
    addr_list.assign(addrs, addrs + count);
    if (sizes) size_list.assign(sizes, sizes + count);
    return 0;
}

// Registers `count` buffers `how` (a Permission or MemoryOptions) once the
// caller checked the engine and `how`.
template <typename How>
int registerBatch(const char* call, TransferEngine* e, void** addrs,
                  size_t* sizes, size_t count, How& how) {
    std::vector<void*> addr_list;
    std::vector<size_t> size_list;
    if (toLists(call, addrs, sizes, count, false, addr_list, size_list) != 0)
        return -1;
    return report(e->registerLocalMemory(addr_list, size_list, how));
}

}  // namespace

extern "C" {

int tent_allocate_memory(tent_engine_t engine, void** addr, size_t size,
                         const char* location) {
    TransferEngine* e = engineOf(engine, "tent_allocate_memory");
    if (!e) return -1;
    MemoryOptions options;
    if (location && *location) options.location = location;
    return report(e->allocateLocalMemory(addr, size, options));
}

int tent_free_memory(tent_engine_t engine, void* addr) {
    TransferEngine* e = engineOf(engine, "tent_free_memory");
    return e ? report(e->freeLocalMemory(addr)) : -1;
}

int tent_register_memory(tent_engine_t engine, void* addr, size_t size) {
    TransferEngine* e = engineOf(engine, "tent_register_memory");
    return e ? report(e->registerLocalMemory(addr, size)) : -1;
}

int tent_unregister_memory(tent_engine_t engine, void* addr, size_t size) {
    TransferEngine* e = engineOf(engine, "tent_unregister_memory");
    return e ? report(e->unregisterLocalMemory(addr, size)) : -1;
}

int tent_register_memory_with_perm(tent_engine_t engine, void* addr,
                                   size_t size, int permission) {
    const char* call = "tent_register_memory_with_perm";
    TransferEngine* e = engineOf(engine, call);
    Permission perm;
    if (!e || toPermission(call, permission, perm) != 0) return -1;
    return report(e->registerLocalMemory(addr, size, perm));
}

int tent_register_memory_batch(tent_engine_t engine, void** addrs,
                               size_t* sizes, size_t count, int permission) {
    const char* call = "tent_register_memory_batch";
    TransferEngine* e = engineOf(engine, call);
    Permission perm;
    if (!e || toPermission(call, permission, perm) != 0) return -1;
    return registerBatch(call, e, addrs, sizes, count, perm);
}

int tent_unregister_memory_batch(tent_engine_t engine, void** addrs,
                                 size_t* sizes, size_t count) {
    const char* call = "tent_unregister_memory_batch";
    TransferEngine* e = engineOf(engine, call);
    std::vector<void*> addr_list;
    std::vector<size_t> size_list;
    if (!e ||
        toLists(call, addrs, sizes, count, true, addr_list, size_list) != 0)
        return -1;
    return report(e->unregisterLocalMemory(addr_list, size_list));
}

int tent_allocate_memory_ex(tent_engine_t engine, void** addr, size_t size,
                            tent_memory_options_t* opts) {
    const char* call = "tent_allocate_memory_ex";
    TransferEngine* e = engineOf(engine, call);
    MemoryOptions options;
    if (!e || toOptions(call, opts, options) != 0) return -1;
    return report(e->allocateLocalMemory(addr, size, options));
}

int tent_register_memory_ex(tent_engine_t engine, void* addr, size_t size,
                            tent_memory_options_t* opts) {
    const char* call = "tent_register_memory_ex";
    TransferEngine* e = engineOf(engine, call);
    MemoryOptions options;
    if (!e || toOptions(call, opts, options) != 0) return -1;
    return report(e->registerLocalMemory(addr, size, options));
}

int tent_register_memory_batch_ex(tent_engine_t engine, void** addrs,
                                  size_t* sizes, size_t count,
                                  tent_memory_options_t* opts) {
    const char* call = "tent_register_memory_batch_ex";
    TransferEngine* e = engineOf(engine, call);
    MemoryOptions options;
    if (!e || toOptions(call, opts, options) != 0) return -1;
    return registerBatch(call, e, addrs, sizes, count, options);
}

}  // extern "C"
