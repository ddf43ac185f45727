// EtcdStore: MetaStore over etcd's v3 JSON gateway (etcd 3.4:
// /v3/kv/range, /v3/kv/txn, /v3/lease/grant, /v3/lease/keepalive), with
// libcurl. Keys and values travel base64-encoded, 64-bit numbers as
// strings. Every value this client writes is attached to one lease, granted
// on the first write and again after it expired; keepAlive() renews it.
// watch() is a streaming /v3/watch on a thread of its own (etcd_watch.cpp).
#include <curl/curl.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "common/json_util.h"
#include "metastore/curl_once.h"
#include "metastore/etcd_base64.h"
#include "metastore/etcd_watch.h"
#include "metastore/server_pool.h"
#include "metastore/store_factories.h"
#include "tent/runtime/metastore.h"

namespace mooncake::tent {

namespace {

// What an etcd reply holds besides the value itself (keys, revisions,
// header).
constexpr size_t kReplyEnvelopeBytes = 64u << 10;

// A reply body being received, cut off (the transfer fails) at `cap`.
struct ReplyBody {
    std::string text;
    size_t cap = 0;
    bool over = false;
};

size_t appendBody(char* data, size_t size, size_t count, void* user) {
    auto* body = static_cast<ReplyBody*>(user);
    if (body->text.size() + size * count > body->cap) {
        body->over = true;
        return 0;
    }
    body->text.append(data, size * count);
    return size * count;
}

class EtcdStore : public MetaStore {
 public:
    EtcdStore(std::string servers_text, std::vector<std::string> servers,
              const MetaStoreOptions& options)
        : servers_text_(std::move(servers_text)),
          servers_(std::move(servers)),
          options_(options),
          pool_(servers_.size()) {
        initCurlOnce();
    }

    const char* type() const override { return "etcd"; }
    const std::string& servers() const override { return servers_text_; }

    Status ping() override {
        Json::Value reply;
        return post("/v3/maintenance/status", Json::Value(Json::objectValue),
                    reply);
    }

    Status get(const std::string& key, std::string& value,
               bool& found) override {
        Json::Value request(Json::objectValue);
        request["key"] = base64Encode(key);
        Json::Value reply;
        CHECK_STATUS(post("/v3/kv/range", request, reply));
        const Json::Value& kvs = reply["kvs"];
        found = kvs.isArray() && kvs.size() > 0;
        if (!found) return Status::OK();
        const Json::Value& kv = kvs[0];
        const std::string encoded =
            kv.isObject() ? jsonStringOr(kv["value"], "") : "";
        // The value travels base64-encoded: 3 bytes per 4, less padding.
        size_t bytes = encoded.size() / 4 * 3;
        size_t padding = 0;
        while (padding < 2 && padding < encoded.size() &&
               encoded[encoded.size() - 1 - padding] == '=') {
            ++padding;
        }
        bytes -= std::min(bytes, padding);
        if (static_cast<int64_t>(bytes) > options_.max_value_bytes) {
            return Status::InvalidEntry(
                "etcd at " + servers_text_ + ": value of " + key + " is " +
                std::to_string(bytes) +
                " bytes, above metadata/max_value_bytes=" +
                std::to_string(options_.max_value_bytes));
        }
        if (!base64Decode(encoded, value)) {
            return Status::MalformedJson("etcd at " + servers_text_ +
                                         ": value of " + key +
                                         " is not base64");
        }
        return Status::OK();
    }

    Status compareAndSet(const std::string& key, const std::string& expected,
                         const std::string& value, bool& swapped) override {
        int64_t lease = 0;
        CHECK_STATUS(currentLease(lease));
        Json::Value put(Json::objectValue);
        put["key"] = base64Encode(key);
        put["value"] = base64Encode(value);
        put["lease"] = std::to_string(lease);
        Json::Value success(Json::objectValue);
        success["request_put"] = put;
        Status s = txn(key, expected, success, swapped);
        if (s.ok() ||
            s.message().find("lease not found") == std::string::npos) {
            return s;
        }
        // The store lost the lease (an etcd that came back without its
        // data): write under a new one.
        lease_.compare_exchange_strong(lease, 0);
        CHECK_STATUS(currentLease(lease));
        success["request_put"]["lease"] = std::to_string(lease);
        return txn(key, expected, success, swapped);
    }

    Status compareAndRemove(const std::string& key, const std::string& expected,
                            bool& removed) override {
        Json::Value del(Json::objectValue);
        del["key"] = base64Encode(key);
        Json::Value success(Json::objectValue);
        success["request_delete_range"] = del;
        return txn(key, expected, success, removed);
    }

    Status keepAlive(const std::string&, bool& alive) override {
        const int64_t lease = lease_.load();
        alive = false;
        if (lease == 0) return Status::OK();
        Json::Value request(Json::objectValue);
        request["ID"] = std::to_string(lease);
        Json::Value reply;
        CHECK_STATUS(post("/v3/lease/keepalive", request, reply));
        // The gateway streams {"result":{...}}; an expired lease answers
        // without a TTL (proto3 leaves out zeros).
        const Json::Value& result =
            reply.isMember("result") ? reply["result"] : reply;
        alive = result.isObject() &&
                std::atoll(jsonStringOr(result["TTL"], "0").c_str()) > 0;
        if (!alive) {
            int64_t expect = lease;
            lease_.compare_exchange_strong(expect, 0);
        }
        return Status::OK();
    }

    Status watch(const std::string& prefix, KeyChanged changed,
                 std::function<void()> gap,
                 std::unique_ptr<MetaStoreWatch>& out) override {
        out = startEtcdWatch(servers_, options_, prefix, std::move(changed),
                             std::move(gap));
        return Status::OK();
    }

 private:
    std::string where(size_t server) const {
        return "etcd at " + servers_[server] + " (metadata/store_timeout_ms=" +
               std::to_string(options_.timeout_ms) + ")";
    }

    // The lease values are written under; granted when there is none.
    Status currentLease(int64_t& lease) {
        lease = lease_.load();
        if (lease != 0) return Status::OK();
        Json::Value request(Json::objectValue);
        // etcd counts in whole seconds: round up, never below the TTL.
        request["TTL"] = std::to_string((options_.ttl_ms + 999) / 1000);
        Json::Value reply;
        CHECK_STATUS(post("/v3/lease/grant", request, reply));
        lease = std::atoll(jsonStringOr(reply["ID"], "0").c_str());
        if (lease == 0) {
            return Status::MetadataError(
                "etcd at " + servers_text_ +
                " granted no lease: " + toCompactJson(reply));
        }
        lease_.store(lease);
        return Status::OK();
    }

    Status txn(const std::string& key, const std::string& expected,
               const Json::Value& success, bool& succeeded) {
        Json::Value compare(Json::objectValue);
        compare["key"] = base64Encode(key);
        compare["result"] = "EQUAL";
        if (expected.empty()) {
            compare["target"] = "CREATE";
            compare["create_revision"] = "0";
        } else {
            compare["target"] = "VALUE";
            compare["value"] = base64Encode(expected);
        }
        Json::Value request(Json::objectValue);
        request["compare"].append(compare);
        request["success"].append(success);
        Json::Value reply;
        CHECK_STATUS(post("/v3/kv/txn", request, reply));
        succeeded = jsonBoolOr(reply["succeeded"], false);
        return Status::OK();
    }

    // A reply carries one value base64-encoded (4 bytes per 3) in a small
    // JSON envelope.
    size_t replyCap() const {
        return static_cast<size_t>(options_.max_value_bytes) / 3 * 4 + 4 +
               kReplyEnvelopeBytes;
    }

    // An idle handle for `server`, or a new one.
    CURL* acquire(size_t server) {
        CURL* curl = pool_.take(server);
        return curl ? curl : curl_easy_init();
    }

    // POSTs `request` to `path` on the first server that answers, starting
    // from the one that answered last. An HTTP error reply is an error, not
    // a reason to try another server.
    Status post(const std::string& path, const Json::Value& request,
                Json::Value& reply) {
        const std::string body = toCompactJson(request);
        return pool_.inTurn([&](size_t server, bool& next) {
            CURL* curl = acquire(server);
            if (curl == nullptr) {
                return Status::InternalError("curl_easy_init failed");
            }
            ReplyBody received;
            received.cap = replyCap();
            const std::string& response = received.text;
            const std::string url = "http://" + servers_[server] + path;
            curl_easy_reset(curl);
            curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
            curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body.c_str());
            curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE, long(body.size()));
            curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS,
                             long(options_.timeout_ms));
            curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS,
                             long(options_.timeout_ms));
            // Timeouts by signal are not thread-safe.
            curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
            curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, appendBody);
            curl_easy_setopt(curl, CURLOPT_WRITEDATA, &received);
            CURLcode rc = curl_easy_perform(curl);
            long http = 0;
            curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &http);
            if (rc != CURLE_OK && received.over) {
                curl_easy_cleanup(curl);
                return Status::InvalidEntry(
                    where(server) + " answered " + path + " with more than " +
                    std::to_string(received.cap) +
                    " bytes (metadata/max_value_bytes=" +
                    std::to_string(options_.max_value_bytes) +
                    ", base64-encoded)");
            }
            if (rc != CURLE_OK) {
                curl_easy_cleanup(curl);
                next = true;
                return Status::MetadataError(
                    path + " on " + where(server) +
                    " failed: " + curl_easy_strerror(rc));
            }
            pool_.answered(server, curl);
            std::string errs;
            if (!parseJsonText(response, false, reply, errs) ||
                !reply.isObject()) {
                return Status::MetadataError(
                    where(server) + " answered " + path + " (HTTP " +
                    std::to_string(http) +
                    ") with no JSON object: " + response.substr(0, 200));
            }
            if (http != 200 || reply.isMember("error")) {
                return Status::MetadataError(
                    where(server) + " refused " + path + " (HTTP " +
                    std::to_string(http) + "): " + response.substr(0, 200));
            }
            return Status::OK();
        });
    }

    const std::string servers_text_;
    const std::vector<std::string> servers_;
    const MetaStoreOptions options_;
    std::atomic<int64_t> lease_{0};
    ServerPool<CURL*, curl_easy_cleanup> pool_;
};

}  // namespace

std::shared_ptr<MetaStore> makeEtcdStore(std::string servers_text,
                                         std::vector<std::string> servers,
                                         const MetaStoreOptions& options) {
    return std::make_shared<EtcdStore>(std::move(servers_text),
                                       std::move(servers), options);
}

}  // namespace mooncake::tent
