// The Redis store's change notifications: RedisStore PUBLISHes each key it
// writes or removes on one channel; startRedisWatch() subscribes to it.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tent/runtime/metastore.h"

namespace mooncake::tent {

// The channel RedisStore PUBLISHes each written or removed key on, and the
// subscription that turns its messages into MetaStore::watch() calls.
constexpr const char kRedisChangeChannel[] = "mooncake/tent/changes";
std::unique_ptr<MetaStoreWatch> startRedisWatch(
    std::vector<std::string> servers, const MetaStoreOptions& options,
    std::string prefix, MetaStore::KeyChanged changed,
    std::function<void()> gap);

}  // namespace mooncake::tent
