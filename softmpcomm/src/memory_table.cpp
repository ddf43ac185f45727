#include "memory_table.h"

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

bool MemoryTable::Access::enter() {
    if (!entry_) return false;
    entry_->users.fetch_add(1);
    if (!entry_->withdrawn.load()) return true;
    leave();
    return false;
}

void MemoryTable::Access::leave() {
    // The last one out of a withdrawn entry wakes withdraw(); an entry still
    // published has nobody waiting, so the common case takes no lock.
    if (entry_->users.fetch_sub(1) == 1 && entry_->withdrawn.load())
        table_->released();
}

void MemoryTable::released() const {
    // Under wait_mu_, so the wake-up cannot fall between withdraw()'s check
    // of the count and its wait.
    std::lock_guard<std::mutex> lock(wait_mu_);
    wait_cv_.notify_all();
}

void MemoryTable::withdraw(const Entries& entries) {
    for (const auto& entry : entries) entry->withdrawn.store(true);
    std::unique_lock<std::mutex> lock(wait_mu_);
    for (const auto& entry : entries)
        wait_cv_.wait(lock, [&] { return entry->users.load() == 0; });
}

int MemoryTable::registerMemory(uint64_t addr, uint64_t length) {
    if (addr == 0 || length == 0 || addr + length < addr)
        return MPCOMM_ERR_INVALID_ARG;
    std::unique_lock<std::shared_mutex> lock(mu_);
    registered_[addr] = length;
    return MPCOMM_SUCCESS;
}

void MemoryTable::unregisterMemory(uint64_t addr) {
    Entries gone;
    {
        std::unique_lock<std::shared_mutex> lock(mu_);
        auto it = registered_.find(addr);
        if (it == registered_.end()) return;
        uint64_t length = it->second;
        registered_.erase(it);
        for (auto pub = published_.begin(); pub != published_.end();) {
            if (contains(addr, length, pub->first, pub->second->length)) {
                gone.push_back(std::move(pub->second));
                pub = published_.erase(pub);
            } else {
                ++pub;
            }
        }
    }
    withdraw(gone);
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
    auto entry = std::make_shared<Published>();
    entry->addr = addr;
    entry->length = length;
    entry->numa_node = numa_node;
    entry->keys = keys;
    Entries replaced;
    {
        std::unique_lock<std::shared_mutex> lock(mu_);
        bool registered = false;
        for (const auto& region : registered_)
            if (contains(region.first, region.second, addr, length))
                registered = true;
        if (!registered) return MPCOMM_ERR_NOT_REGISTERED;
        auto& slot = published_[addr];
        if (slot) replaced.push_back(std::move(slot));
        slot = std::move(entry);
    }
    // Accesses under the old keys end before the new keys are handed out.
    withdraw(replaced);
    return MPCOMM_SUCCESS;
}

void MemoryTable::unpublish(uint64_t addr) {
    Entries gone;
    {
        std::unique_lock<std::shared_mutex> lock(mu_);
        auto it = published_.find(addr);
        if (it == published_.end()) return;
        gone.push_back(std::move(it->second));
        published_.erase(it);
    }
    withdraw(gone);
}

std::vector<RemoteBufferEntry> MemoryTable::publishedList() const {
    std::shared_lock<std::shared_mutex> lock(mu_);
    std::vector<RemoteBufferEntry> list;
    for (const auto& pub : published_) {
        RemoteBufferEntry entry;
        entry.addr = pub.first;
        entry.length = pub.second->length;
        entry.numa_node = pub.second->numa_node;
        entry.rkeys = pub.second->keys;
        list.push_back(std::move(entry));
    }
    return list;
}

std::shared_ptr<MemoryTable::Published> MemoryTable::findLocked(
    uint64_t addr, uint64_t length, uint32_t key, uint32_t rail) const {
    // Published buffers may overlap, so every entry starting at or below
    // addr is a candidate; walk them from the nearest down.
    for (auto it = published_.upper_bound(addr); it != published_.begin();) {
        --it;
        const Published& entry = *it->second;
        if (!contains(it->first, entry.length, addr, length)) continue;
        if (rail < entry.keys.size() && entry.keys[rail] == key)
            return it->second;
    }
    return nullptr;
}

int MemoryTable::openAccess(uint64_t addr, uint64_t length, uint32_t key,
                            uint32_t rail, Access* access) const {
    std::shared_lock<std::shared_mutex> lock(mu_);
    std::shared_ptr<Published> entry = findLocked(addr, length, key, rail);
    if (!entry) {
        *access = Access();
        return MPCOMM_ERR_REMOTE_ACCESS;
    }
    *access = Access(this, std::move(entry));
    return MPCOMM_SUCCESS;
}

}  // namespace detail
}  // namespace mpcomm
