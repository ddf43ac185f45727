#include "transport/shm/shm_mapping_cache.h"

#include <utility>

namespace mooncake::tent {

Status ShmMappingCache::acquire(SegmentID target, const std::string& name,
                                uint64_t length, Pin& pin) {
    {
        std::lock_guard<std::mutex> lock(mu_);
        Objects& objects = by_target_[target];
        auto it = objects.find(name);
        if (it != objects.end() && it->second.object->length() >= length) {
            it->second.last_use = ++clock_;
            pin = it->second.object;
            return Status::OK();
        }
    }
    // Mapped without the lock: opening is a few system calls, and other
    // copies need not wait for them.
    std::unique_ptr<ShmObject> opened;
    CHECK_STATUS(ShmObject::open(name, length, opened));
    std::shared_ptr<ShmObject> object(std::move(opened));
    std::lock_guard<std::mutex> lock(mu_);
    Objects& objects = by_target_[target];
    ++stats_.opens;
    // A shorter mapping of the same name, or one another thread opened
    // meanwhile, is replaced; pins on it keep it mapped until released.
    objects.erase(name);
    trim(objects);
    objects[name] = Entry{object, ++clock_};
    pin = std::move(object);
    return Status::OK();
}

void ShmMappingCache::trim(Objects& objects) {
    while (objects.size() >= limit_) {
        auto victim = objects.end();
        for (auto it = objects.begin(); it != objects.end(); ++it) {
            // use_count() is raised only under mu_, so 1 means no copy
            // holds this mapping and none can start to.
            if (it->second.object.use_count() != 1) continue;
            if (victim == objects.end() ||
                it->second.last_use < victim->second.last_use) {
                victim = it;
            }
        }
        if (victim == objects.end()) return;  // all pinned: exceed briefly
        objects.erase(victim);
        ++stats_.evictions;
    }
}

void ShmMappingCache::drop(SegmentID target, const std::string& name) {
    std::lock_guard<std::mutex> lock(mu_);
    auto t = by_target_.find(target);
    if (t == by_target_.end()) return;
    if (t->second.erase(name)) ++stats_.drops;
}

void ShmMappingCache::clear() {
    std::lock_guard<std::mutex> lock(mu_);
    by_target_.clear();
}

size_t ShmMappingCache::mapped(SegmentID target) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto t = by_target_.find(target);
    return t == by_target_.end() ? 0 : t->second.size();
}

ShmMappingCache::Stats ShmMappingCache::stats() const {
    std::lock_guard<std::mutex> lock(mu_);
    return stats_;
}

}  // namespace mooncake::tent
