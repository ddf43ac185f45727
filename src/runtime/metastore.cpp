// MetaStore::Create: picks the store by metadata_type. Which stores exist
// is decided at configure time (src/CMakeLists.txt).
#include "tent/runtime/metastore.h"

#include "metastore/store_factories.h"
#include "net/socket_io.h"

namespace mooncake::tent {

namespace {

std::string trim(const std::string& text) {
    size_t begin = text.find_first_not_of(" \t");
    if (begin == std::string::npos) return "";
    size_t end = text.find_last_not_of(" \t");
    return text.substr(begin, end - begin + 1);
}

// The stores this build has; null for one whose client library was not
// found at configure time.
using StoreFactory = std::shared_ptr<MetaStore> (*)(std::string,
                                                    std::vector<std::string>,
                                                    const MetaStoreOptions&);
#ifdef TENT_HAVE_REDIS
const StoreFactory kRedisFactory = makeRedisStore;
#else
const StoreFactory kRedisFactory = nullptr;
#endif
#ifdef TENT_HAVE_ETCD
const StoreFactory kEtcdFactory = makeEtcdStore;
#else
const StoreFactory kEtcdFactory = nullptr;
#endif
#ifdef TENT_HAVE_HTTP
const StoreFactory kHttpFactory = makeHttpStore;
#else
const StoreFactory kHttpFactory = nullptr;
#endif

// A URL path for the http store: printable, no query or fragment of its
// own (the client appends "?key=..."), and bounded.
constexpr size_t kMaxUrlPathBytes = 1024;
bool validUrlPath(const std::string& path) {
    if (path.empty() || path[0] != '/' || path.size() > kMaxUrlPathBytes) {
        return false;
    }
    for (char c : path) {
        if (c <= ' ' || c == 0x7f || c == '?' || c == '#') return false;
    }
    return true;
}

// The trimmed entries of a comma list, empty ones included (an empty
// entry is refused by each caller, naming it).
std::vector<std::string> commaEntries(const std::string& list) {
    std::vector<std::string> entries;
    size_t start = 0;
    while (start <= list.size()) {
        size_t comma = list.find(',', start);
        if (comma == std::string::npos) comma = list.size();
        entries.push_back(trim(list.substr(start, comma - start)));
        start = comma + 1;
    }
    return entries;
}

}  // namespace

Status MetaStore::parseServers(const std::string& servers,
                               std::vector<std::string>& out) {
    out.clear();
    for (const std::string& entry : commaEntries(servers)) {
        std::string host;
        uint16_t port = 0;
        Status s = net::parseHostPort(entry, "metadata server", host, port);
        if (entry.empty() || !s.ok()) {
            return Status::InvalidArgument(
                "metadata_servers \"" + servers + "\": entry \"" + entry +
                "\" is not host:port (a comma list of host:port is "
                "expected)");
        }
        out.push_back(entry);
    }
    return Status::OK();
}

Status MetaStore::parseHttpServers(const std::string& servers,
                                   std::vector<std::string>& out) {
    out.clear();
    for (const std::string& entry : commaEntries(servers)) {
        std::string rest = entry;
        const std::string scheme = "http://";
        if (rest.compare(0, scheme.size(), scheme) == 0) {
            rest = rest.substr(scheme.size());
        }
        const size_t slash = rest.find('/');
        const std::string authority = rest.substr(0, slash);
        const std::string path =
            slash == std::string::npos ? "/metadata" : rest.substr(slash);
        std::string host;
        uint16_t port = 0;
        Status s = net::parseHostPort(authority, "metadata server", host, port);
        if (entry.empty() || rest.find("://") != std::string::npos || !s.ok() ||
            !validUrlPath(path)) {
            return Status::InvalidArgument(
                "metadata_servers \"" + servers + "\": entry \"" + entry +
                "\" is not an http URL (a comma list of "
                "http://host:port/path is expected; the path defaults to "
                "/metadata)");
        }
        out.push_back(scheme + authority + path);
    }
    return Status::OK();
}

Status MetaStore::Create(const std::string& type, const std::string& servers,
                         const MetaStoreOptions& options,
                         std::shared_ptr<MetaStore>& out) {
    if (type != "redis" && type != "etcd" && type != "http") {
        return Status::InvalidMetadataType(
            "metadata_type " + type +
            " is not supported (p2p, etcd, redis and http are)");
    }
    if (options.timeout_ms <= 0) {
        return Status::InvalidArgument(
            "metadata/store_timeout_ms must be positive, got " +
            std::to_string(options.timeout_ms));
    }
    if (options.ttl_ms < 1000) {
        return Status::InvalidArgument(
            "metadata/ttl_ms must be at least 1000, got " +
            std::to_string(options.ttl_ms));
    }
    if (options.max_value_bytes < 1024 ||
        options.max_value_bytes > (int64_t(1) << 30)) {
        return Status::InvalidArgument(
            "metadata/max_value_bytes must be in [1024, 1073741824], got " +
            std::to_string(options.max_value_bytes));
    }
    const bool http = type == "http";
    if (servers.empty()) {
        return Status::InvalidArgument(
            "metadata_type " + type +
            " needs metadata_servers (a comma list of " +
            (http ? "http://host:port/path)" : "host:port)"));
    }
    std::vector<std::string> list;
    CHECK_STATUS(http ? parseHttpServers(servers, list)
                      : parseServers(servers, list));
    const bool redis = type == "redis";
    const StoreFactory make =
        redis ? kRedisFactory : (http ? kHttpFactory : kEtcdFactory);
    if (!make) {
        return Status::NotImplemented(
            "metadata_type " + type + " is not available: this build has no " +
            (redis ? "hiredis (install libhiredis-dev"
                   : "libcurl (install libcurl4-openssl-dev") +
            " and configure again)");
    }
    out = make(servers, std::move(list), options);
    return Status::OK();
}

}  // namespace mooncake::tent
