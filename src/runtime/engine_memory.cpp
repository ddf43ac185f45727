// TransferEngineImpl memory: local allocation and buffer registration.
#include <glog/logging.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "runtime/transfer_engine_impl.h"

namespace mooncake::tent {

namespace {

std::string describe(const void* addr, size_t size) {
    std::ostringstream os;
    os << addr << " (length " << size << ")";
    return os.str();
}

}  // namespace

Status TransferEngineImpl::allocateLocalMemory(void** addr, size_t size,
                                               const MemoryOptions& options) {
    if (!available()) return notAvailable();
    if (!addr)
        return Status::InvalidArgument("allocateLocalMemory: addr is null");
    if (size == 0) {
        return Status::InvalidArgument("allocateLocalMemory: size is zero");
    }
    if (options.location.rfind("cuda", 0) == 0) {
        return Status::NotImplemented("cannot allocate at location " +
                                      options.location +
                                      ": device memory needs a USE_CUDA build");
    }
    // Page alignment keeps buffers eligible for registration by transports
    // that pin memory.
    const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
    void* ptr = nullptr;
    int rc = ::posix_memalign(&ptr, page, size);
    if (rc != 0) {
        return Status::InternalError("cannot allocate " + std::to_string(size) +
                                     " bytes: " + std::strerror(rc));
    }
    {
        std::lock_guard<std::mutex> lock(memory_mu_);
        allocations_[ptr] = size;
    }
    *addr = ptr;
    return Status::OK();
}

Status TransferEngineImpl::freeLocalMemory(void* addr) {
    if (!available()) return notAvailable();
    std::lock_guard<std::mutex> lock(memory_mu_);
    auto it = allocations_.find(addr);
    if (it == allocations_.end()) {
        std::ostringstream os;
        os << "freeLocalMemory: " << addr
           << " was not allocated by allocateLocalMemory";
        return Status::InvalidArgument(os.str());
    }
    std::free(it->first);
    allocations_.erase(it);
    return Status::OK();
}

Status TransferEngineImpl::registerLocalMemory(
    const std::vector<void*>& addr_list, const std::vector<size_t>& size_list,
    const MemoryOptions& options) {
    if (!available()) return notAvailable();
    if (addr_list.size() != size_list.size()) {
        return Status::InvalidArgument(
            "registerLocalMemory: " + std::to_string(addr_list.size()) +
            " addresses but " + std::to_string(size_list.size()) + " sizes");
    }
    for (size_t i = 0; i < addr_list.size(); ++i) {
        Status s = registerOne(addr_list[i], size_list[i], options);
        if (!s.ok()) {
            // All or nothing: undo what this call registered.
            for (size_t j = 0; j < i; ++j) unregisterOne(addr_list[j], 0);
            return s;
        }
    }
    return Status::OK();
}

Status TransferEngineImpl::registerOne(void* addr, size_t size,
                                       const MemoryOptions& options) {
    if (!addr || size == 0) {
        return Status::InvalidArgument("cannot register buffer " +
                                       describe(addr, size) +
                                       ": null address or zero length");
    }
    std::lock_guard<std::mutex> lock(memory_mu_);
    const uint64_t base = reinterpret_cast<uint64_t>(addr);
    if (registered_.count(base)) {
        return Status::InvalidArgument("buffer " + describe(addr, size) +
                                       " is already registered");
    }
    BufferDesc desc;
    desc.addr = base;
    desc.length = size;
    desc.location = options.location;
    // Every loaded transport is asked, whatever its capabilities: one that
    // cannot serve this memory says so and is simply left off the list.
    std::vector<Transport*> accepted;
    for (Loaded& l : transports_) {
        if (options.type != UNSPEC && options.type != l.entry->type) continue;
        Status s = l.transport->addMemoryBuffer(desc, options);
        if (!s.ok()) {
            LOG(WARNING) << "Transport " << l.entry->name
                         << " did not register buffer " << describe(addr, size)
                         << ": " << s.message();
            continue;
        }
        accepted.push_back(l.transport.get());
    }
    if (accepted.empty()) {
        std::string loaded;
        for (const Loaded& l : transports_) {
            loaded += (loaded.empty() ? "" : ", ") + std::string(l.entry->name);
        }
        std::string why = transports_.empty() ? "no transport is loaded"
                                              : "loaded: " + loaded;
        if (options.type != UNSPEC) {
            why += std::string("; requested transport ") +
                   transportTypeName(options.type);
        }
        return Status::InvalidArgument(
            "no loaded transport could register buffer " +
            describe(addr, size) + " (" + why + ")");
    }
    Status s = segments_->updateLocal([&](SegmentDesc& seg) {
        seg.getMemory().buffers.push_back(desc);
        ++seg.registration_epoch;
        return Status::OK();
    });
    if (s.ok()) s = segments_->synchronizeLocal();
    if (!s.ok()) {
        for (Transport* t : accepted) t->removeMemoryBuffer(desc);
        return s;
    }
    registered_[base] = std::move(accepted);
    return Status::OK();
}

Status TransferEngineImpl::unregisterLocalMemory(
    const std::vector<void*>& addr_list, const std::vector<size_t>& size_list) {
    if (!available()) return notAvailable();
    if (!size_list.empty() && size_list.size() != addr_list.size()) {
        return Status::InvalidArgument(
            "unregisterLocalMemory: " + std::to_string(addr_list.size()) +
            " addresses but " + std::to_string(size_list.size()) + " sizes");
    }
    Status first_error;
    for (size_t i = 0; i < addr_list.size(); ++i) {
        Status s =
            unregisterOne(addr_list[i], size_list.empty() ? 0 : size_list[i]);
        // Keep going: one bad entry must not leave the others registered.
        if (!s.ok() && first_error.ok()) first_error = s;
    }
    return first_error;
}

Status TransferEngineImpl::unregisterOne(void* addr, size_t size) {
    std::lock_guard<std::mutex> lock(memory_mu_);
    const uint64_t base = reinterpret_cast<uint64_t>(addr);
    auto it = registered_.find(base);
    if (it == registered_.end()) {
        std::ostringstream os;
        os << "unregisterLocalMemory: " << addr << " is not registered";
        return Status::InvalidArgument(os.str());
    }
    BufferDesc desc;
    SegmentDescRef local = segments_->getLocal();
    for (const BufferDesc& b : local->getMemory().buffers) {
        if (b.addr == base) desc = b;
    }
    if (size != 0 && size != desc.length) {
        return Status::InvalidArgument(
            "unregisterLocalMemory: buffer " + describe(addr, size) +
            " was registered with length " + std::to_string(desc.length));
    }
    for (Transport* t : it->second) {
        Status s = t->removeMemoryBuffer(desc);
        if (!s.ok()) {
            LOG(WARNING) << "Transport " << t->getName()
                         << " did not unregister buffer "
                         << describe(addr, desc.length) << ": " << s.message();
        }
    }
    registered_.erase(it);
    Status s = segments_->updateLocal([&](SegmentDesc& seg) {
        auto& buffers = seg.getMemory().buffers;
        buffers.erase(
            std::remove_if(buffers.begin(), buffers.end(),
                           [&](const BufferDesc& b) { return b.addr == base; }),
            buffers.end());
        ++seg.registration_epoch;
        return Status::OK();
    });
    if (s.ok()) s = segments_->synchronizeLocal();
    return s;
}

}  // namespace mooncake::tent
