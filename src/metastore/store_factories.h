// The concrete MetaStores behind MetaStore::Create(); each is compiled only
// when its client library was found (TENT_HAVE_REDIS, TENT_HAVE_ETCD,
// TENT_HAVE_HTTP).
#pragma once

#include <memory>
#include <string>
#include <vector>

namespace mooncake::tent {

// Declared, not included: metastore.cpp includes this header to call the
// factories, and the stores include metastore.h themselves.
class MetaStore;
struct MetaStoreOptions;

// `servers_text` as configured (for messages); `servers` parsed from it.
std::shared_ptr<MetaStore> makeRedisStore(std::string servers_text,
                                          std::vector<std::string> servers,
                                          const MetaStoreOptions& options);
std::shared_ptr<MetaStore> makeEtcdStore(std::string servers_text,
                                         std::vector<std::string> servers,
                                         const MetaStoreOptions& options);
// `urls` are "http://host:port/path", as MetaStore::parseHttpServers gives.
std::shared_ptr<MetaStore> makeHttpStore(std::string servers_text,
                                         std::vector<std::string> urls,
                                         const MetaStoreOptions& options);
}  // namespace mooncake::tent
