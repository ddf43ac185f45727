// etcd's change notifications: one streaming watch (POST /v3/watch on the
// v3 JSON gateway) over the keys under a prefix, per MetaStore::watch().
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tent/runtime/metastore.h"

namespace mooncake::tent {

// The largest message of the watch stream accepted: one event batch, whose
// values are base64-encoded (4 bytes per 3) and at most
// metadata/max_value_bytes each, plus this much envelope per batch. A
// longer message breaks the stream (a gap, then a new watch).
constexpr size_t kEtcdWatchEnvelopeBytes = 64u << 10;
size_t etcdWatchMessageCap(const MetaStoreOptions& options);

// The range_end that, with `prefix` as key, covers every key under it
// (etcd's convention: the prefix with its last byte below 0xff raised by
// one; "\0" when there is none: every key).
std::string etcdPrefixEnd(const std::string& prefix);

std::unique_ptr<MetaStoreWatch> startEtcdWatch(std::vector<std::string> servers,
                                               const MetaStoreOptions& options,
                                               std::string prefix,
                                               MetaStore::KeyChanged changed,
                                               std::function<void()> gap);

}  // namespace mooncake::tent
