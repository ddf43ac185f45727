// StoreHealth: whether the metadata store answered last time, shared by an
// engine's SegmentPublisher and StoreSegmentFetcher so that an outage is
// logged once (one WARNING when it starts, one INFO when it ends), however
// many calls fail during it.
#pragma once

#include <glog/logging.h>

#include <atomic>
#include <string>

#include "tent/runtime/metastore.h"

namespace mooncake::tent {

class StoreHealth {
 public:
    explicit StoreHealth(const MetaStore& store)
        : what_(std::string(store.type()) + " metadata store at " +
                store.servers()) {}

    void failed(const Status& status) {
        if (!down_.exchange(true)) {
            LOG(WARNING) << what_ << " is unreachable (" << status.message()
                         << "); established transfers continue on cached "
                            "descriptors, and the local segment is "
                            "published again when the store returns";
        }
    }
    void succeeded() {
        if (down_.exchange(false)) {
            LOG(INFO) << what_ << " is reachable again";
        }
    }
    bool down() const { return down_.load(); }

 private:
    const std::string what_;
    std::atomic<bool> down_{false};
};

}  // namespace mooncake::tent
