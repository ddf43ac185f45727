#include "memory_table.h"

#include <cstring>
#include <mutex>

namespace mpcomm {
namespace detail {

namespace {

// True when [addr, addr + length) lies inside [start, start + size),
// written so that no sum can overflow.
bool contains(uint64_t start, uint64_t size, uint64_t addr, uint64_t length) {
    return addr >= start && addr - start <= size &&
           length <= size - (addr - start);
}

}  // namespace

int MemoryTable::registerMemory(uint64_t addr, uint64_t length) {
    if (addr == 0 || length == 0 || addr + length < addr)
        return MPCOMM_ERR_INVALID_ARG;
    std::unique_lock<std::shared_mutex> lock(mu_);
    registered_[addr] = length;
    return MPCOMM_SUCCESS;
}

void MemoryTable::unregisterMemory(uint64_t addr) {
    std::unique_lock<std::shared_mutex> lock(mu_);
    auto it = registered_.find(addr);
    if (it == registered_.end()) return;
    uint64_t length = it->second;
    registered_.erase(it);
    for (auto pub = published_.begin(); pub != published_.end();) {
        if (contains(addr, length, pub->first, pub->second.length))
            pub = published_.erase(pub);
        else
            ++pub;
    }
}

bool MemoryTable::isRegistered(uint64_t addr, uint64_t length) const {
    std::shared_lock<std::shared_mutex> lock(mu_);
    // Regions are few (one per registered buffer), so a scan is cheap and
    // tolerates overlapping registrations.
    for (const auto& region : registered_)
        if (contains(region.first, region.second, addr, length)) return true;
    return false;
}

int MemoryTable::publish(uint64_t addr, uint64_t length, int numa_node,
                         const std::vector<uint32_t>& keys) {
    if (addr == 0 || length == 0 || addr + length < addr)
        return MPCOMM_ERR_INVALID_ARG;
    std::unique_lock<std::shared_mutex> lock(mu_);
    bool registered = false;
    for (const auto& region : registered_)
        if (contains(region.first, region.second, addr, length))
            registered = true;
    if (!registered) return MPCOMM_ERR_NOT_REGISTERED;
    published_[addr] = Published{length, numa_node, keys};
    return MPCOMM_SUCCESS;
}

void MemoryTable::unpublish(uint64_t addr) {
    std::unique_lock<std::shared_mutex> lock(mu_);
    published_.erase(addr);
}

std::vector<RemoteBufferEntry> MemoryTable::publishedList() const {
    std::shared_lock<std::shared_mutex> lock(mu_);
    std::vector<RemoteBufferEntry> list;
    for (const auto& pub : published_) {
        RemoteBufferEntry entry;
        entry.addr = pub.first;
        entry.length = pub.second.length;
        entry.numa_node = pub.second.numa_node;
        entry.rkeys = pub.second.keys;
        list.push_back(std::move(entry));
    }
    return list;
}

int MemoryTable::checkLocked(uint64_t addr, uint64_t length, uint32_t key,
                             uint32_t rail) const {
    for (const auto& pub : published_) {
        const Published& entry = pub.second;
        if (!contains(pub.first, entry.length, addr, length)) continue;
        if (rail < entry.keys.size() && entry.keys[rail] == key)
            return MPCOMM_SUCCESS;
    }
    return MPCOMM_ERR_REMOTE_ACCESS;
}

int MemoryTable::checkAccess(uint64_t addr, uint64_t length, uint32_t key,
                             uint32_t rail) const {
    std::shared_lock<std::shared_mutex> lock(mu_);
    return checkLocked(addr, length, key, rail);
}

int MemoryTable::copyIn(uint64_t addr, const void* src, size_t length,
                        uint32_t key, uint32_t rail) {
    std::shared_lock<std::shared_mutex> lock(mu_);
    int rc = checkLocked(addr, length, key, rail);
    if (rc != MPCOMM_SUCCESS) return rc;
    std::memcpy(reinterpret_cast<void*>(addr), src, length);
    return MPCOMM_SUCCESS;
}

int MemoryTable::copyOut(uint64_t addr, void* dst, size_t length, uint32_t key,
                         uint32_t rail) const {
    std::shared_lock<std::shared_mutex> lock(mu_);
    int rc = checkLocked(addr, length, key, rail);
    if (rc != MPCOMM_SUCCESS) return rc;
    std::memcpy(dst, reinterpret_cast<const void*>(addr), length);
    return MPCOMM_SUCCESS;
}

}  // namespace detail
}  // namespace mpcomm
