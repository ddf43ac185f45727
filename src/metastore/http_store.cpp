// HttpStore: MetaStore over Mooncake's HTTP metadata protocol, with
// libcurl: GET, PUT and DELETE of `<url>?key=<key>`; 200 answers, 404 is
// "no such key". The server (python/mooncake/http_metadata_server.py, or
// upstream's) keeps bytes and knows nothing of TTLs, so this client keeps
// the expiry in the value itself (a one-line header before it, see
// docs/metadata.md) and every reader treats a record past its expiry as
// absent. Compare-and-set is a read, a comparison here, and a conditional
// write: the write carries If-Match (the ETag of what was read) or
// If-None-Match: *, which our server honours atomically (412 when the
// condition fails); a server that ignores them leaves a short race between
// the read and the write.
#include <curl/curl.h>
#include <strings.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "metastore/curl_once.h"
#include "metastore/server_pool.h"
#include "metastore/store_factories.h"
#include "tent/runtime/metastore.h"

namespace mooncake::tent {

namespace {

// A stored record is the value behind a header line of at most this many
// bytes (kRecordPrefix and the expiry), so a reply may exceed
// metadata/max_value_bytes by this much.
constexpr size_t kRecordHeaderBytes = 64;
// An ETag longer than this is not one our server or upstream's sends.
constexpr size_t kMaxEtagBytes = 256;
// Answers ping(): any HTTP answer, 404 included, means the server is up.
constexpr char kPingKey[] = "mooncake/tent/ping";
constexpr char kRecordPrefix[] = "tent-record expires_unix_ms=";

int64_t nowUnixMs() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
}

struct Reply {
    long http = 0;
    std::string body;
    std::string etag;
    bool too_large = false;
    size_t limit = 0;  // bytes of body accepted
};

size_t appendBody(char* data, size_t size, size_t count, void* user) {
    auto* reply = static_cast<Reply*>(user);
    if (reply->body.size() + size * count > reply->limit) {
        reply->too_large = true;
        return 0;
    }
    reply->body.append(data, size * count);
    return size * count;
}

// Keeps the ETag header of the reply; every other header is dropped.
size_t readHeader(char* data, size_t size, size_t count, void* user) {
    auto* reply = static_cast<Reply*>(user);
    const size_t n = size * count;
    constexpr char kName[] = "etag:";
    constexpr size_t kNameLen = sizeof(kName) - 1;
    if (n > kNameLen && strncasecmp(data, kName, kNameLen) == 0) {
        std::string value(data + kNameLen, n - kNameLen);
        const size_t begin = value.find_first_not_of(" \t");
        const size_t end = value.find_last_not_of(" \t\r\n");
        value = begin == std::string::npos
                    ? ""
                    : value.substr(begin, end - begin + 1);
        reply->etag = value.size() <= kMaxEtagBytes ? value : "";
    }
    return n;
}

// What a key holds, as this client reads it.
struct Current {
    bool present = false;  // the server has the key
    bool live = false;     // ... and its record has not expired
    std::string value;
    std::string etag;
};

class HttpStore : public MetaStore {
 public:
    HttpStore(std::string servers_text, std::vector<std::string> urls,
              const MetaStoreOptions& options)
        : servers_text_(std::move(servers_text)),
          urls_(std::move(urls)),
          options_(options),
          pool_(urls_.size()) {
        initCurlOnce();
    }

    const char* type() const override { return "http"; }
    const std::string& servers() const override { return servers_text_; }

    Status ping() override {
        Reply reply;
        CHECK_STATUS(request("GET", kPingKey, nullptr, "", reply));
        if (reply.http == 200 || reply.http == 404) return Status::OK();
        return refused("GET", kPingKey, reply);
    }

    Status get(const std::string& key, std::string& value,
               bool& found) override {
        Current cur;
        CHECK_STATUS(read(key, cur));
        found = cur.live;
        if (found) value = std::move(cur.value);
        return Status::OK();
    }

    Status compareAndSet(const std::string& key, const std::string& expected,
                         const std::string& value, bool& swapped) override {
        swapped = false;
        if (static_cast<int64_t>(value.size()) > options_.max_value_bytes) {
            return Status::InvalidArgument(
                "value of " + key + " is " + std::to_string(value.size()) +
                " bytes, above metadata/max_value_bytes=" +
                std::to_string(options_.max_value_bytes));
        }
        Current cur;
        CHECK_STATUS(read(key, cur));
        const bool matches =
            expected.empty() ? !cur.live : cur.live && cur.value == expected;
        if (!matches) return Status::OK();
        return put(key, value, cur, swapped);
    }

    Status compareAndRemove(const std::string& key, const std::string& expected,
                            bool& removed) override {
        removed = false;
        Current cur;
        CHECK_STATUS(read(key, cur));
        if (!cur.live || cur.value != expected) return Status::OK();
        Reply reply;
        CHECK_STATUS(request("DELETE", key, nullptr, ifMatch(cur), reply));
        if (reply.http == 200) {
            removed = true;
            return Status::OK();
        }
        if (reply.http == 404 || reply.http == 412) return Status::OK();
        return refused("DELETE", key, reply);
    }

    // HTTP has no TTL: renewing rewrites the record with a later expiry,
    // on the condition that it is still the one read.
    Status keepAlive(const std::string& key, bool& alive) override {
        alive = false;
        Current cur;
        CHECK_STATUS(read(key, cur));
        if (!cur.live) return Status::OK();
        return put(key, cur.value, cur, alive);
    }

 private:
    std::string where(size_t server) const {
        return "http at " + urls_[server] + " (metadata/store_timeout_ms=" +
               std::to_string(options_.timeout_ms) + ")";
    }

    static std::string ifMatch(const Current& cur) {
        if (!cur.present) return "If-None-Match: *";
        return cur.etag.empty() ? "" : "If-Match: " + cur.etag;
    }

    Status refused(const char* method, const std::string& key,
                   const Reply& reply) const {
        return Status::MetadataError("http metadata store at " + servers_text_ +
                                     " refused " + method + " of " + key +
                                     " (HTTP " + std::to_string(reply.http) +
                                     "): " + reply.body.substr(0, 200));
    }

    // Writes `value` with an expiry one TTL from now, conditional on the
    // key still holding `cur`; `written` false when it no longer did.
    Status put(const std::string& key, const std::string& value,
               const Current& cur, bool& written) {
        written = false;
        const std::string record =
            kRecordPrefix + std::to_string(nowUnixMs() + options_.ttl_ms) +
            "\n" + value;
        Reply reply;
        CHECK_STATUS(request("PUT", key, &record, ifMatch(cur), reply));
        if (reply.http == 412) return Status::OK();
        if (reply.http != 200) return refused("PUT", key, reply);
        written = true;
        return Status::OK();
    }

    Status read(const std::string& key, Current& cur) {
        cur = Current();
        Reply reply;
        CHECK_STATUS(request("GET", key, nullptr, "", reply));
        if (reply.http == 404) return Status::OK();
        if (reply.http != 200) return refused("GET", key, reply);
        cur.present = true;
        cur.etag = std::move(reply.etag);
        // "tent-record expires_unix_ms=<ms>\n<value>"
        const std::string& body = reply.body;
        const size_t prefix = sizeof(kRecordPrefix) - 1;
        const size_t newline = body.find('\n');
        const bool shaped = body.compare(0, prefix, kRecordPrefix) == 0 &&
                            newline != std::string::npos && newline > prefix &&
                            newline - prefix <= 19;
        int64_t expires = 0;
        if (shaped) {
            const std::string digits = body.substr(prefix, newline - prefix);
            char* end = nullptr;
            expires = std::strtoll(digits.c_str(), &end, 10);
            if (*end != '\0' || digits[0] < '0' || digits[0] > '9') {
                expires = -1;
            }
        }
        if (!shaped || expires < 0) {
            return Status::MetadataError(
                "http metadata store at " + servers_text_ + ": the value of " +
                key + " is not a TENT record (\"" + kRecordPrefix +
                "<ms>\\n<value>\"): " + body.substr(0, 80));
        }
        cur.live = expires > nowUnixMs();
        cur.value = body.substr(newline + 1);
        return Status::OK();
    }

    // An idle handle for `server`, or a new one.
    CURL* acquire(size_t server) {
        CURL* curl = pool_.take(server);
        return curl ? curl : curl_easy_init();
    }

    // One request on the first server that answers, starting from the one
    // that answered last. Any HTTP answer is the answer: only a server that
    // does not answer passes the request on.
    Status request(const char* method, const std::string& key,
                   const std::string* body, const std::string& condition,
                   Reply& reply) {
        return pool_.inTurn([&](size_t server, bool& next) {
            CURL* curl = acquire(server);
            if (curl == nullptr) {
                return Status::InternalError("curl_easy_init failed");
            }
            char* escaped = curl_easy_escape(curl, key.c_str(),
                                             static_cast<int>(key.size()));
            const std::string url =
                urls_[server] + "?key=" + (escaped ? escaped : "");
            curl_free(escaped);
            reply = Reply();
            curl_easy_reset(curl);
            curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
            curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, method);
            if (body != nullptr) {
                curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body->data());
                curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE,
                                 long(body->size()));
            } else if (std::strcmp(method, "GET") == 0) {
                curl_easy_setopt(curl, CURLOPT_HTTPGET, 1L);
            }
            curl_slist* headers = nullptr;
            // libcurl would otherwise wait for "100 Continue" on large
            // bodies, a round trip the server need not make.
            headers = curl_slist_append(headers, "Expect:");
            if (body != nullptr) {
                headers = curl_slist_append(
                    headers, "Content-Type: application/octet-stream");
            }
            if (!condition.empty()) {
                headers = curl_slist_append(headers, condition.c_str());
            }
            curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
            curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS,
                             long(options_.timeout_ms));
            curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS,
                             long(options_.timeout_ms));
            // Timeouts by signal are not thread-safe.
            curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
            curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, appendBody);
            reply.limit = static_cast<size_t>(options_.max_value_bytes) +
                          kRecordHeaderBytes;
            curl_easy_setopt(curl, CURLOPT_WRITEDATA, &reply);
            curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, readHeader);
            curl_easy_setopt(curl, CURLOPT_HEADERDATA, &reply);
            CURLcode rc = curl_easy_perform(curl);
            curl_slist_free_all(headers);
            curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &reply.http);
            if (reply.too_large) {
                // A value too large is the key's fault, not an outage.
                curl_easy_cleanup(curl);
                return Status::InvalidEntry(
                    std::string(method) + " of " + key + " on " +
                    where(server) + ": the value is above " +
                    "metadata/max_value_bytes=" +
                    std::to_string(options_.max_value_bytes));
            }
            if (rc != CURLE_OK) {
                curl_easy_cleanup(curl);
                next = true;
                return Status::MetadataError(
                    std::string(method) + " of " + key + " on " +
                    where(server) + " failed: " + curl_easy_strerror(rc));
            }
            pool_.answered(server, curl);
            return Status::OK();
        });
    }

    const std::string servers_text_;
    const std::vector<std::string> urls_;
    const MetaStoreOptions options_;
    ServerPool<CURL*, curl_easy_cleanup> pool_;
};

}  // namespace

std::shared_ptr<MetaStore> makeHttpStore(std::string servers_text,
                                         std::vector<std::string> urls,
                                         const MetaStoreOptions& options) {
    return std::make_shared<HttpStore>(std::move(servers_text), std::move(urls),
                                       options);
}

}  // namespace mooncake::tent
