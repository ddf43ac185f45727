// StoreSegmentFetcher: segment descriptors read from a metadata store.
#include "runtime/store_segment_fetcher.h"

#include "common/json_util.h"

namespace mooncake::tent {

std::string storeSegmentKey(const std::string& segment_name) {
    return "mooncake/tent/segments/" + segment_name;
}

Status StoreSegmentFetcher::fetch(const std::string& segment_name,
                                  SegmentDesc& out) {
    const std::string key = storeSegmentKey(segment_name);
    std::string value;
    bool found = false;
    Status s = store_->get(key, value, found);
    // A value refused for its size came from a store that answered: no
    // outage, and no reason to serve the last copy instead.
    if (s.IsInvalidEntry()) {
        health_->succeeded();
        return s;
    }
    if (!s.ok()) {
        health_->failed(s);
        std::lock_guard<std::mutex> lock(mu_);
        auto it = last_read_.find(segment_name);
        if (it != last_read_.end()) {
            out = it->second;
            return Status::OK();
        }
        return s;
    }
    health_->succeeded();
    if (!found) {
        std::lock_guard<std::mutex> lock(mu_);
        last_read_.erase(segment_name);
        return Status::InvalidEntry(
            "segment " + segment_name + " is not published in the " +
            store_->type() + " metadata store at " + store_->servers() +
            " (key " + key + ": no process holds that name)");
    }
    Json::Value record;
    std::string errs;
    if (!parseJsonText(value, true, record, errs)) {
        return Status::MalformedJson(
            "key " + key + " holds invalid JSON: " + foldJsonErrors(errs));
    }
    if (!record.isObject() || !record.isMember("segment")) {
        return Status::MalformedJson("key " + key +
                                     " holds no {\"segment\":...} record");
    }
    SegmentDesc desc;
    CHECK_STATUS(segmentFromJson(record["segment"], desc));
    if (desc.name != segment_name) {
        return Status::InvalidEntry("key " + key + " holds segment " +
                                    desc.name + ", not " + segment_name);
    }
    {
        std::lock_guard<std::mutex> lock(mu_);
        last_read_[segment_name] = desc;
    }
    out = std::move(desc);
    return Status::OK();
}

}  // namespace mooncake::tent

namespace mooncake::tent {

bool StoreSegmentFetcher::startWatching(
    std::function<void(const std::string&)> changed,
    std::function<void()> gap) {
    const std::string prefix = storeSegmentKey("");
    std::unique_ptr<MetaStoreWatch> watch;
    Status s = store_->watch(
        prefix,
        [prefix, changed = std::move(changed)](const std::string& key) {
            changed(key.substr(prefix.size()));
        },
        std::move(gap), watch);
    if (!s.ok()) return false;
    std::lock_guard<std::mutex> lock(watch_mu_);
    watch_ = std::move(watch);
    return true;
}

void StoreSegmentFetcher::stopWatching() {
    std::unique_ptr<MetaStoreWatch> watch;
    {
        std::lock_guard<std::mutex> lock(watch_mu_);
        watch = std::move(watch_);
    }
    // Joined outside the lock: its callbacks never take it.
}

uint64_t StoreSegmentFetcher::watchConnects() const {
    std::lock_guard<std::mutex> lock(watch_mu_);
    return watch_ ? watch_->connects() : 0;
}

}  // namespace mooncake::tent
