// EtcdWatch: MetaStore::watch() for etcd. One thread holds one streaming
// POST /v3/watch on the v3 JSON gateway, created for the key range of the
// prefix from the current revision; the gateway answers with one JSON
// object per line, each an event batch, and this thread hands each key put
// or deleted to the callback. A stream that breaks, is canceled (a
// compacted revision, for instance) or carries a message that is not what
// etcd sends is dropped and created anew, on the next server, after a
// backoff; every watch created after the first is a gap (changes may have
// been missed in between). libcurl's multi interface lets the destructor
// wake the thread at once, whatever the server does (even frozen).
#include "metastore/etcd_watch.h"

#include <curl/curl.h>
#include <glog/logging.h>

#include <algorithm>
#include <atomic>
#include <thread>

#include "common/json_util.h"
#include "metastore/curl_once.h"
#include "metastore/etcd_base64.h"
#include "metastore/server_pool.h"

namespace mooncake::tent {

namespace {

class EtcdWatch : public MetaStoreWatch {
 public:
    EtcdWatch(std::vector<std::string> servers, const MetaStoreOptions& options,
              std::string prefix, MetaStore::KeyChanged changed,
              std::function<void()> gap)
        : servers_(std::move(servers)),
          options_(options),
          prefix_(std::move(prefix)),
          changed_(std::move(changed)),
          gap_(std::move(gap)),
          cap_(etcdWatchMessageCap(options)) {
        initCurlOnce();
        multi_ = curl_multi_init();
        thread_ = std::thread([this] { run(); });
    }

    ~EtcdWatch() override {
        stop_.store(true);
        if (multi_ != nullptr) curl_multi_wakeup(multi_);
        thread_.join();
        if (multi_ != nullptr) curl_multi_cleanup(multi_);
    }

    uint64_t connects() const override { return connects_.load(); }
    uint64_t notifications() const override { return notifications_.load(); }

 private:
    // One stream being received: the part of a message not yet ended by a
    // newline, and why the stream was dropped ("" while it is fine).
    struct Stream {
        EtcdWatch* self = nullptr;
        std::string pending;
        std::string why;
        bool created = false;
    };

    // Waits up to `ms` for the stop signal; true when stopping.
    bool waitStop(int ms) {
        if (stop_.load()) return true;
        curl_multi_poll(multi_, nullptr, 0, ms, nullptr);
        return stop_.load();
    }

    void run() {
        if (multi_ == nullptr) {
            LOG(ERROR) << "etcd watch: curl_multi_init failed; no watch";
            return;
        }
        rotateWatchServers(
            servers_.size(), options_.watch_reconnect_max_ms,
            [this](size_t server) {
                bool created = false;
                serve(servers_[server], created);
                return created;
            },
            [this](int ms) { return waitStop(ms); },
            [this] { return stop_.load(); });
    }

    static size_t onData(char* data, size_t size, size_t count, void* user) {
        auto* stream = static_cast<Stream*>(user);
        const size_t bytes = size * count;
        stream->pending.append(data, bytes);
        size_t start = 0;
        for (size_t end;
             (end = stream->pending.find('\n', start)) != std::string::npos;
             start = end + 1) {
            if (!stream->self->handle(
                    stream->pending.substr(start, end - start), *stream)) {
                return 0;  // fails the transfer: the stream is dropped
            }
        }
        stream->pending.erase(0, start);
        if (stream->pending.size() > stream->self->cap_) {
            stream->why =
                "a message of more than " + std::to_string(stream->self->cap_) +
                " bytes (metadata/max_value_bytes=" +
                std::to_string(stream->self->options_.max_value_bytes) +
                ", base64-encoded, plus " +
                std::to_string(kEtcdWatchEnvelopeBytes) + ")";
            return 0;
        }
        return bytes;
    }

    // One message of the stream; false (with stream.why) drops the stream.
    bool handle(std::string line, Stream& stream) {
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (line.empty()) return true;
        if (line.size() > cap_) {
            stream.why = "a " + std::to_string(line.size()) +
                         "-byte message, above " + std::to_string(cap_);
            return false;
        }
        Json::Value message;
        std::string errs;
        if (!parseJsonText(line, false, message, errs) || !message.isObject()) {
            stream.why =
                "a message that is not a JSON object: " + line.substr(0, 200);
            return false;
        }
        if (message.isMember("error")) {
            stream.why = "an error: " + line.substr(0, 200);
            return false;
        }
        const Json::Value& result = message["result"];
        if (!result.isObject()) {
            stream.why = "a message without a result: " + line.substr(0, 200);
            return false;
        }
        if (jsonBoolOr(result["canceled"], false) ||
            jsonStringOr(result["compact_revision"], "0") != "0") {
            stream.why = "a canceled watch: " + line.substr(0, 200);
            return false;
        }
        if (jsonBoolOr(result["created"], false)) {
            // Every watch after the first may have missed changes; counted
            // after gap_() so that a count seen implies its effect.
            if (connects_.load() > 0 && gap_) gap_();
            connects_.fetch_add(1);
            stream.created = true;
        }
        const Json::Value& events = result["events"];
        if (events.isNull()) return true;
        if (!events.isArray()) {
            stream.why = "events that are not an array: " + line.substr(0, 200);
            return false;
        }
        for (const Json::Value& event : events) {
            const Json::Value* kv = event.isObject() && event["kv"].isObject()
                                        ? &event["kv"]
                                        : nullptr;
            std::string key;
            if (kv == nullptr ||
                !base64Decode(jsonStringOr((*kv)["key"], ""), key)) {
                stream.why =
                    "an event without a base64 key: " + line.substr(0, 200);
                return false;
            }
            // The range asked for holds only keys under the prefix; a
            // server that sends others is not trusted with them.
            if (key.compare(0, prefix_.size(), prefix_) != 0) continue;
            notifications_.fetch_add(1);
            changed_(key);
        }
        return true;
    }

    // One watch on one server, until it breaks or the watch stops.
    void serve(const std::string& address, bool& created) {
        CURL* curl = curl_easy_init();
        if (curl == nullptr) return;
        Json::Value create(Json::objectValue);
        create["key"] = base64Encode(prefix_);
        create["range_end"] = base64Encode(etcdPrefixEnd(prefix_));
        Json::Value request(Json::objectValue);
        request["create_request"] = create;
        const std::string body = toCompactJson(request);
        const std::string url = "http://" + address + "/v3/watch";
        Stream stream;
        stream.self = this;
        curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
        curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body.c_str());
        curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE, long(body.size()));
        // The stream lasts as long as the watch: only connecting is timed.
        curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS,
                         long(options_.timeout_ms));
        curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, onData);
        curl_easy_setopt(curl, CURLOPT_WRITEDATA, &stream);
        curl_multi_add_handle(multi_, curl);
        CURLcode rc = CURLE_OK;
        while (!stop_.load()) {
            int running = 0;
            if (curl_multi_perform(multi_, &running) != CURLM_OK) break;
            int left = 0;
            while (CURLMsg* msg = curl_multi_info_read(multi_, &left)) {
                if (msg->msg == CURLMSG_DONE) rc = msg->data.result;
            }
            if (running == 0) break;
            // Bounded as well, so that stop_ alone ends the wait within
            // metadata/store_timeout_ms should a wake-up be lost.
            curl_multi_poll(multi_, nullptr, 0, options_.timeout_ms, nullptr);
        }
        created = stream.created;
        if (!stop_.load()) {
            LOG(WARNING) << "etcd watch on " << address << " ended: "
                         << (!stream.why.empty() ? stream.why.c_str()
                             : rc == CURLE_OK    ? "the server closed it"
                                                 : curl_easy_strerror(rc))
                         << "; watching anew";
        }
        curl_multi_remove_handle(multi_, curl);
        curl_easy_cleanup(curl);
    }

    const std::vector<std::string> servers_;
    const MetaStoreOptions options_;
    const std::string prefix_;
    const MetaStore::KeyChanged changed_;
    const std::function<void()> gap_;
    const size_t cap_;
    CURLM* multi_ = nullptr;
    std::atomic<bool> stop_{false};
    std::atomic<uint64_t> connects_{0};
    std::atomic<uint64_t> notifications_{0};
    std::thread thread_;
};

}  // namespace

size_t etcdWatchMessageCap(const MetaStoreOptions& options) {
    return static_cast<size_t>(std::max<int64_t>(options.max_value_bytes, 0)) /
               3 * 4 +
           4 + kEtcdWatchEnvelopeBytes;
}

std::string etcdPrefixEnd(const std::string& prefix) {
    std::string end = prefix;
    while (!end.empty()) {
        if (static_cast<uint8_t>(end.back()) != 0xff) {
            end.back() =
                static_cast<char>(static_cast<uint8_t>(end.back()) + 1);
            return end;
        }
        end.pop_back();
    }
    return std::string(1, '\0');
}

std::unique_ptr<MetaStoreWatch> startEtcdWatch(std::vector<std::string> servers,
                                               const MetaStoreOptions& options,
                                               std::string prefix,
                                               MetaStore::KeyChanged changed,
                                               std::function<void()> gap) {
    return std::make_unique<EtcdWatch>(std::move(servers), options,
                                       std::move(prefix), std::move(changed),
                                       std::move(gap));
}

}  // namespace mooncake::tent
