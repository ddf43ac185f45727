// MetaStore: a shared key-value store that holds segment descriptors, for
// metadata_type "redis" (hiredis), "etcd" (the v3 JSON gateway over
// libcurl) and "http" (Mooncake's HTTP metadata server, over libcurl).
// metadata_type "p2p" needs none: peers ask each other.
//
// The store knows keys and values only; what a value means is the
// SegmentPublisher's and the StoreSegmentFetcher's business. Every value a
// client writes is bound to that client's liveness: a TTL on the key
// (Redis), the client's lease (etcd) or an expiry written into the value
// that readers honour (http), which keepAlive() extends. A client
// that stops calling keepAlive() loses its keys within the TTL.
//
// Contract for implementations:
// - Every call is thread-safe, and none holds a lock across the network:
//   connections come from a pool.
// - Every call is bounded: each server in the list is tried at most once,
//   each attempt within `timeout_ms` (metadata/store_timeout_ms).
// - A transport failure is MetadataError naming the store type, the server
//   and the timeout; "not found" and "comparison failed" are results, not
//   errors.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tent/common/status.h"

namespace mooncake::tent {

struct MetaStoreOptions {
    // metadata/store_timeout_ms: one attempt on one server (connect,
    // request and reply).
    static constexpr int kDefaultTimeoutMs = 3000;
    // metadata/ttl_ms: how long a written key outlives its writer.
    static constexpr int kDefaultTtlMs = 10000;
    // metadata/max_value_bytes: the largest value get() accepts; a larger
    // one is InvalidEntry naming its size, refused before it is read into
    // memory (Redis) or as soon as the reply passes it (etcd).
    static constexpr int64_t kDefaultMaxValueBytes = int64_t(64) << 20;
    int timeout_ms = kDefaultTimeoutMs;
    int ttl_ms = kDefaultTtlMs;
    int64_t max_value_bytes = kDefaultMaxValueBytes;
    // metadata/watch_reconnect_max_ms: the longest wait between two
    // attempts to re-establish a broken change subscription (the waits
    // start at 100 ms and double up to this).
    static constexpr int kDefaultWatchReconnectMaxMs = 5000;
    int watch_reconnect_max_ms = kDefaultWatchReconnectMaxMs;
};

// A live subscription to a store's change notifications (MetaStore::watch);
// destroying it stops it, waiting at most metadata/store_timeout_ms.
class MetaStoreWatch {
 public:
    virtual ~MetaStoreWatch() = default;
    // Subscriptions (re-)established so far, and notifications delivered.
    virtual uint64_t connects() const = 0;
    virtual uint64_t notifications() const = 0;
};

class MetaStore {
 public:
    virtual ~MetaStore() = default;

    // `type` is "redis", "etcd" or "http"; `servers` a comma list of
    // host:port (http: of http://host:port/path URLs).
    // InvalidArgument names a bad server entry; NotImplemented says which
    // package a build without that store's client library lacked. No
    // connection is made here: see ping().
    static Status Create(const std::string& type, const std::string& servers,
                         const MetaStoreOptions& options,
                         std::shared_ptr<MetaStore>& out);

    // Splits and validates "host:port[,host:port...]" (spaces around the
    // entries are ignored); the error names the bad entry.
    static Status parseServers(const std::string& servers,
                               std::vector<std::string>& out);

    // Splits and validates "http://host:port/path[,...]" (the scheme may be
    // left out, the path defaults to /metadata) into full URLs.
    static Status parseHttpServers(const std::string& servers,
                                   std::vector<std::string>& out);

    // Calls `changed(key)` on a thread of the watch for each key under
    // `prefix` written or removed through any client of this store, and
    // `gap()` each time the subscription is re-established after it broke
    // (notifications may have been lost meanwhile). NotImplemented for a
    // store without notifications (http).
    using KeyChanged = std::function<void(const std::string& key)>;
    virtual Status watch(const std::string& prefix, KeyChanged changed,
                         std::function<void()> gap,
                         std::unique_ptr<MetaStoreWatch>& out) {
        (void)prefix;
        (void)changed;
        (void)gap;
        (void)out;
        return Status::NotImplemented(std::string(type()) +
                                      " store has no change notifications");
    }

    virtual const char* type() const = 0;
    // The servers as configured, for messages.
    virtual const std::string& servers() const = 0;

    // One round trip to the first server that answers.
    virtual Status ping() = 0;
    // `found` false (and OK) when the key does not exist.
    virtual Status get(const std::string& key, std::string& value,
                       bool& found) = 0;
    // Writes `value`, bound to this client's TTL or lease, if and only if
    // the key now holds `expected` ("" = the key must not exist). `swapped`
    // says whether it did; the comparison and the write are one atomic
    // step in the store.
    virtual Status compareAndSet(const std::string& key,
                                 const std::string& expected,
                                 const std::string& value, bool& swapped) = 0;
    // Deletes the key if and only if it holds `expected`.
    virtual Status compareAndRemove(const std::string& key,
                                    const std::string& expected,
                                    bool& removed) = 0;
    // Extends the life of `key`, written by this client, by the TTL.
    // `alive` false when it is gone already (expired, or the lease is).
    virtual Status keepAlive(const std::string& key, bool& alive) = 0;
};

}  // namespace mooncake::tent
