// TransferEngineImpl memory: local allocation and buffer registration.
//
// Rules (docs/reliability.md):
//  - freeLocalMemory() refuses memory that still holds a registered buffer,
//    naming the buffer and the transports it is registered with: peers can
//    reach registered memory, so it must be unregistered first, and
//    unregistration returns only once no peer can touch it any more (each
//    transport fences its own in-flight accesses, bounded).
//  - Unregistration waits on the transports without memory_mu_, so other
//    buffers register and unregister meanwhile; the range counts as
//    registered (for freeLocalMemory) until every transport let go.
#include <glog/logging.h>

#include <algorithm>
#include <sstream>

#include "runtime/location_parse.h"
#include "runtime/transfer_engine_impl.h"
#include "tent/runtime/platform.h"

namespace mooncake::tent {

namespace {

std::string describe(const void* addr, size_t size) {
    std::ostringstream os;
    os << addr << " (length " << size << ")";
    return os.str();
}

// Where the buffer lives, as the platform sees it. A location the caller
// gave must agree on host versus device (and on the device); for host
// memory the caller's NUMA node is kept, since the platform may not know it.
Status locateBuffer(void* addr, size_t size, const Location& given,
                    Location& out) {
    MemoryLocation want;
    Status s = parseMemoryLocation(given, &want);
    if (!s.ok()) {
        return Status::InvalidArgument("cannot register buffer " +
                                       describe(addr, size) + ": " +
                                       std::string(s.message()));
    }
    std::shared_ptr<Platform> platform = currentPlatform();
    Location found;
    s = platform->locate(addr, size, found);
    if (!s.ok()) {
        return Status(s.code(), "cannot register buffer " +
                                    describe(addr, size) + ": " +
                                    std::string(s.message()));
    }
    if (want.wildcard) {
        out = found;
        return Status::OK();
    }
    MemoryLocation have;
    s = parseMemoryLocation(found, &have);
    bool agree = s.ok() && have.kind == want.kind &&
                 (!want.device() || have.index == want.index);
    if (!agree) {
        std::string why = "cannot register buffer " + describe(addr, size) +
                          " at location " + given + ": the " +
                          platform->name() + " platform locates it at " + found;
        if (want.device() && std::string(platform->name()) == "cpu") {
            why += " (device memory needs a build with USE_CUDA=ON)";
        }
        return Status::InvalidArgument(why);
    }
    out = want.device() || given == "cpu" ? found : given;
    return Status::OK();
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
    std::shared_ptr<Platform> platform = currentPlatform();
    // Refused here whatever the platform, so that no platform is asked
    // for memory of a kind the rest of the engine would not route.
    MemoryLocation where;
    Status parsed = parseMemoryLocation(options.location, &where);
    if (!parsed.ok()) {
        return Status::InvalidArgument("allocateLocalMemory: " +
                                       std::string(parsed.message()));
    }
    // With shm loaded, host memory is a shared object peers on this host
    // can map (docs/shm.md).
    Transport* shm = transportOf(SHM);
    if (shm && !where.device()) {
        void* ptr = nullptr;
        CHECK_STATUS(shm->allocateLocalMemory(&ptr, size, options));
        std::lock_guard<std::mutex> lock(memory_mu_);
        allocations_[ptr] = Allocation{size, options.location, platform, shm};
        *addr = ptr;
        return Status::OK();
    }
    void* ptr = nullptr;
    Status s = platform->allocate(&ptr, size, options.location);
    if (!s.ok()) return s;
    {
        std::lock_guard<std::mutex> lock(memory_mu_);
        allocations_[ptr] = Allocation{size, options.location, platform};
    }
    *addr = ptr;
    return Status::OK();
}

Status TransferEngineImpl::allocateSharedMemory(void** addr, size_t size) {
    if (!available()) return notAvailable();
    if (!transportOf(SHM)) {
        return Status::InvalidArgument(
            "allocateSharedMemory: the shm transport is not loaded (set "
            "transports/shm/enable to true)");
    }
    MemoryOptions options;
    options.location = "cpu";
    return allocateLocalMemory(addr, size, options);
}

Status TransferEngineImpl::freeSharedMemory(void* addr) {
    if (!available()) return notAvailable();
    {
        std::lock_guard<std::mutex> lock(memory_mu_);
        auto it = allocations_.find(addr);
        if (it == allocations_.end() || it->second.owner == nullptr) {
            std::ostringstream os;
            os << "freeSharedMemory: " << addr
               << " was not allocated by allocateSharedMemory";
            return Status::InvalidArgument(os.str());
        }
    }
    return freeLocalMemory(addr);
}

Transport* TransferEngineImpl::sharedOwnerOf(uint64_t addr,
                                             uint64_t size) const {
    for (const auto& [ptr, a] : allocations_) {
        const uint64_t base = reinterpret_cast<uint64_t>(ptr);
        bool overlap = base >= addr ? base - addr < size : addr - base < a.size;
        if (a.owner && overlap) return a.owner;
    }
    return nullptr;
}

std::vector<std::pair<uint64_t, const TransferEngineImpl::Registration*>>
TransferEngineImpl::registeredWithin(uint64_t addr, uint64_t size) const {
    std::vector<std::pair<uint64_t, const Registration*>> found;
    for (const auto& [base, reg] : registered_) {
        // [base, base + len) and [addr, addr + size) overlap; written as
        // differences so that no end address has to be computed.
        bool starts_before_end = base >= addr ? base - addr < size : true;
        bool ends_after_start = base >= addr ? true : addr - base < reg.length;
        if (starts_before_end && ends_after_start) {
            found.emplace_back(base, &reg);
        }
    }
    return found;
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
    auto still =
        registeredWithin(reinterpret_cast<uint64_t>(addr), it->second.size);
    if (!still.empty()) {
        const auto& [base, reg] = still.front();
        std::string names;
        for (const Transport* t : reg->transports) {
            names += (names.empty() ? "" : ", ") + std::string(t->getName());
        }
        return Status::InvalidArgument(
            "freeLocalMemory: buffer " +
            describe(reinterpret_cast<void*>(base), reg->length) +
            (reg->retiring ? " is still being unregistered from "
                           : " is still registered with ") +
            names + "; unregister it before freeing the memory");
    }
    const Allocation& a = it->second;
    Status s = a.owner ? a.owner->freeLocalMemory(it->first, a.size)
                       : a.platform->free(it->first, a.size, a.location);
    allocations_.erase(it);
    return s;
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
    // Located before taking memory_mu_: a device platform's query may be
    // slow, and it needs nothing the lock guards.
    Location location;
    Status located = locateBuffer(addr, size, options.location, location);
    if (!located.ok()) return located;
    std::lock_guard<std::mutex> lock(memory_mu_);
    const uint64_t base = reinterpret_cast<uint64_t>(addr);
    if (registered_.count(base)) {
        return Status::InvalidArgument("buffer " + describe(addr, size) +
                                       " is already registered");
    }
    BufferDesc desc;
    desc.addr = base;
    desc.length = size;
    desc.location = location;
    // Every loaded transport is asked, whatever its capabilities: one that
    // cannot serve this memory says so and is simply left off the list.
    std::vector<Transport*> accepted;
    // A range over memory a transport allocated must suit that transport
    // (shm: a prefix from the allocation's base); otherwise the whole
    // registration is refused with its reason, not left to the others.
    Transport* owner = sharedOwnerOf(base, size);
    for (Loaded& l : transports_) {
        const bool chosen =
            options.type == UNSPEC || options.type == l.entry->type;
        if (!chosen && l.transport.get() != owner) continue;
        // The owner not chosen by the caller only checks the range, on a
        // copy that is not published.
        BufferDesc checked = desc;
        BufferDesc& target = chosen ? desc : checked;
        Status s = l.transport->addMemoryBuffer(target, options);
        if (!s.ok() && l.transport.get() == owner) {
            for (Transport* t : accepted) t->removeMemoryBuffer(desc);
            return Status(s.code(), "cannot register buffer " +
                                        describe(addr, size) + ": " +
                                        std::string(s.message()));
        }
        if (!chosen) {
            l.transport->removeMemoryBuffer(checked);
            continue;
        }
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
    registered_[base] = Registration{size, std::move(accepted), false};
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
    const uint64_t base = reinterpret_cast<uint64_t>(addr);
    BufferDesc desc;
    std::vector<Transport*> transports;
    Status published;
    {
        std::lock_guard<std::mutex> lock(memory_mu_);
        auto it = registered_.find(base);
        if (it == registered_.end() || it->second.retiring) {
            std::ostringstream os;
            os << "unregisterLocalMemory: " << addr
               << (it == registered_.end() ? " is not registered"
                                           : " is already being unregistered");
            return Status::InvalidArgument(os.str());
        }
        if (size != 0 && size != it->second.length) {
            return Status::InvalidArgument("unregisterLocalMemory: buffer " +
                                           describe(addr, size) +
                                           " was registered with length " +
                                           std::to_string(it->second.length));
        }
        SegmentDescRef local = segments_->getLocal();
        for (const BufferDesc& b : local->getMemory().buffers) {
            if (b.addr == base) desc = b;
        }
        it->second.retiring = true;
        transports = it->second.transports;
        // Peers that fetch our descriptor from now on no longer see it.
        published = segments_->updateLocal([&](SegmentDesc& seg) {
            auto& buffers = seg.getMemory().buffers;
            buffers.erase(std::remove_if(buffers.begin(), buffers.end(),
                                         [&](const BufferDesc& b) {
                                             return b.addr == base;
                                         }),
                          buffers.end());
            ++seg.registration_epoch;
            return Status::OK();
        });
        if (published.ok()) published = segments_->synchronizeLocal();
    }
    // Outside memory_mu_: a transport may wait (boundedly) for peer
    // accesses in flight on this buffer, and nothing else needs to wait
    // for that.
    for (Transport* t : transports) {
        Status s = t->removeMemoryBuffer(desc);
        if (!s.ok()) {
            LOG(WARNING) << "Transport " << t->getName()
                         << " did not unregister buffer "
                         << describe(addr, desc.length) << ": " << s.message();
        }
    }
    std::lock_guard<std::mutex> lock(memory_mu_);
    registered_.erase(base);
    return published;
}

}  // namespace mooncake::tent
