// RedisWatch: MetaStore::watch() for Redis. Writers PUBLISH each key they
// write or remove on kRedisChangeChannel (RedisStore does, after a
// successful write); this thread SUBSCRIBEs to it and hands the keys under
// its prefix to the callback. A pub/sub channel rather than keyspace
// notifications: those need CONFIG SET notify-keyspace-events, which
// managed Redis services often refuse, and they report every key of the
// database. A key that expires (its writer died) publishes nothing: the
// segment cache's TTL and miss re-reads cover that.
#include "metastore/redis_watch.h"

#include <glog/logging.h>
#include <hiredis/hiredis.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <thread>

#include "metastore/server_pool.h"
#include "net/socket_io.h"

namespace mooncake::tent {

namespace {

// A key longer than this in a message is not one of ours: dropped.
constexpr size_t kMaxKeyBytes = 4096;

class RedisWatch : public MetaStoreWatch {
 public:
    RedisWatch(std::vector<std::string> servers,
               const MetaStoreOptions& options, std::string prefix,
               MetaStore::KeyChanged changed, std::function<void()> gap)
        : servers_(std::move(servers)),
          options_(options),
          prefix_(std::move(prefix)),
          changed_(std::move(changed)),
          gap_(std::move(gap)) {
        wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        thread_ = std::thread([this] { run(); });
    }

    ~RedisWatch() override {
        stop_.store(true);
        uint64_t one = 1;
        if (::write(wake_fd_, &one, sizeof(one)) < 0) {
            // The thread still sees stop_ within its poll bound.
        }
        thread_.join();
        ::close(wake_fd_);
    }

    uint64_t connects() const override { return connects_.load(); }
    uint64_t notifications() const override { return notifications_.load(); }

 private:
    // Waits up to `ms` for the stop signal; true when stopping.
    bool waitStop(int ms) {
        pollfd fd{wake_fd_, POLLIN, 0};
        ::poll(&fd, 1, ms);
        return stop_.load();
    }

    void run() {
        rotateWatchServers(
            servers_.size(), options_.watch_reconnect_max_ms,
            [this](size_t server) {
                bool subscribed = false;
                serve(servers_[server], subscribed);
                return subscribed;
            },
            [this](int ms) { return waitStop(ms); },
            [this] { return stop_.load(); });
    }

    // One subscription on one server, until it breaks or the watch stops.
    void serve(const std::string& address, bool& subscribed) {
        std::string host;
        uint16_t port = 0;
        if (!net::parseHostPort(address, "metadata server", host, port).ok()) {
            return;
        }
        timeval tv{options_.timeout_ms / 1000,
                   (options_.timeout_ms % 1000) * 1000};
        redisContext* ctx = redisConnectWithTimeout(host.c_str(), port, tv);
        if (ctx == nullptr || ctx->err) {
            if (ctx) {
                VLOG(1) << "redis watch: cannot connect to " << address << ": "
                        << ctx->errstr;
                redisFree(ctx);
            }
            return;
        }
        redisSetTimeout(ctx, tv);
        redisAppendCommand(ctx, "SUBSCRIBE %s", kRedisChangeChannel);
        int done = 0;
        while (!done) {
            if (redisBufferWrite(ctx, &done) != REDIS_OK) {
                redisFree(ctx);
                return;
            }
        }
        while (!stop_.load()) {
            void* raw = nullptr;
            if (redisGetReplyFromReader(ctx, &raw) != REDIS_OK) break;
            if (raw == nullptr) {
                pollfd fds[2] = {{ctx->fd, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
                // Bounded as well, so that stop_ alone ends the wait within
                // metadata/store_timeout_ms should a wake-up be lost.
                if (::poll(fds, 2, options_.timeout_ms) < 0 && errno != EINTR) {
                    break;
                }
                if (fds[1].revents != 0 || stop_.load()) break;
                if (fds[0].revents != 0 && redisBufferRead(ctx) != REDIS_OK) {
                    LOG(WARNING)
                        << "redis watch: subscription on " << address
                        << " broke: " << ctx->errstr << "; reconnecting";
                    break;
                }
                continue;
            }
            handle(static_cast<redisReply*>(raw), subscribed);
            freeReplyObject(raw);
        }
        redisFree(ctx);
    }

    void handle(const redisReply* reply, bool& subscribed) {
        if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 3) return;
        const redisReply* kind = reply->element[0];
        const redisReply* arg = reply->element[2];
        if (kind->type != REDIS_REPLY_STRING) return;
        const std::string what(kind->str, kind->len);
        if (what == "subscribe") {
            // Every subscription after the first may have missed changes;
            // counted after gap_() so that a count seen implies its effect.
            if (connects_.load() > 0 && gap_) gap_();
            connects_.fetch_add(1);
            subscribed = true;
            return;
        }
        if (what != "message" || arg->type != REDIS_REPLY_STRING) return;
        if (arg->len > kMaxKeyBytes) {
            LOG(WARNING) << "redis watch: dropped a " << arg->len
                         << "-byte key, above the " << kMaxKeyBytes
                         << "-byte bound";
            return;
        }
        std::string key(arg->str, arg->len);
        if (key.compare(0, prefix_.size(), prefix_) != 0) return;
        notifications_.fetch_add(1);
        changed_(key);
    }

    const std::vector<std::string> servers_;
    const MetaStoreOptions options_;
    const std::string prefix_;
    const MetaStore::KeyChanged changed_;
    const std::function<void()> gap_;
    int wake_fd_ = -1;
    std::atomic<bool> stop_{false};
    std::atomic<uint64_t> connects_{0};
    std::atomic<uint64_t> notifications_{0};
    std::thread thread_;
};

}  // namespace

std::unique_ptr<MetaStoreWatch> startRedisWatch(
    std::vector<std::string> servers, const MetaStoreOptions& options,
    std::string prefix, MetaStore::KeyChanged changed,
    std::function<void()> gap) {
    return std::make_unique<RedisWatch>(std::move(servers), options,
                                        std::move(prefix), std::move(changed),
                                        std::move(gap));
}

}  // namespace mooncake::tent
