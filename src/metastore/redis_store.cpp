// RedisStore: MetaStore over hiredis. Values are plain strings; a key's
// life is a PX expiry set on every write and extended by keepAlive()
// (PEXPIRE). The compare-and-write steps are Lua scripts, which Redis runs
// atomically.
#include <glog/logging.h>
#include <hiredis/hiredis.h>
#include <sys/time.h>

#include "metastore/redis_watch.h"
#include "metastore/server_pool.h"
#include "metastore/store_factories.h"
#include "net/socket_io.h"
#include "tent/runtime/metastore.h"

namespace mooncake::tent {

namespace {

// SET the key to ARGV[2] with a PX of ARGV[3] if it holds ARGV[1].
constexpr const char* kCompareAndSetScript =
    "if redis.call('GET', KEYS[1]) == ARGV[1] then "
    "redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3]) return 1 "
    "else return 0 end";
// The value of KEYS[1] if it is at most ARGV[1] bytes, else its length
// (an integer), so an oversized value never crosses the network.
constexpr const char* kBoundedGetScript =
    "local n = redis.call('STRLEN', KEYS[1]) "
    "if n > tonumber(ARGV[1]) then return n end "
    "return redis.call('GET', KEYS[1])";
constexpr const char* kCompareAndRemoveScript =
    "if redis.call('GET', KEYS[1]) == ARGV[1] then "
    "return redis.call('DEL', KEYS[1]) else return 0 end";

struct ReplyDeleter {
    void operator()(redisReply* reply) const { freeReplyObject(reply); }
};
using ReplyPtr = std::unique_ptr<redisReply, ReplyDeleter>;

class RedisStore : public MetaStore {
 public:
    RedisStore(std::string servers_text, std::vector<std::string> servers,
               const MetaStoreOptions& options)
        : servers_text_(std::move(servers_text)),
          servers_(std::move(servers)),
          options_(options),
          pool_(servers_.size()) {}

    const char* type() const override { return "redis"; }
    const std::string& servers() const override { return servers_text_; }

    Status ping() override {
        ReplyPtr reply;
        return run({"PING"}, reply);
    }

    Status get(const std::string& key, std::string& value,
               bool& found) override {
        ReplyPtr reply;
        const std::string limit = std::to_string(options_.max_value_bytes);
        CHECK_STATUS(run({"EVAL", kBoundedGetScript, "1", key, limit}, reply));
        if (reply->type == REDIS_REPLY_INTEGER) {
            return Status::InvalidEntry(
                "redis at " + servers_text_ + ": value of " + key + " is " +
                std::to_string(reply->integer) +
                " bytes, above metadata/max_value_bytes=" + limit);
        }
        found = reply->type == REDIS_REPLY_STRING;
        if (found) value.assign(reply->str, reply->len);
        return Status::OK();
    }

    Status compareAndSet(const std::string& key, const std::string& expected,
                         const std::string& value, bool& swapped) override {
        const std::string ttl = std::to_string(options_.ttl_ms);
        ReplyPtr reply;
        if (expected.empty()) {
            CHECK_STATUS(run({"SET", key, value, "NX", "PX", ttl}, reply));
            swapped = reply->type == REDIS_REPLY_STATUS;
            if (swapped) announce(key);
            return Status::OK();
        }
        CHECK_STATUS(
            run({"EVAL", kCompareAndSetScript, "1", key, expected, value, ttl},
                reply));
        swapped = reply->type == REDIS_REPLY_INTEGER && reply->integer == 1;
        if (swapped) announce(key);
        return Status::OK();
    }

    Status compareAndRemove(const std::string& key, const std::string& expected,
                            bool& removed) override {
        ReplyPtr reply;
        CHECK_STATUS(
            run({"EVAL", kCompareAndRemoveScript, "1", key, expected}, reply));
        removed = reply->type == REDIS_REPLY_INTEGER && reply->integer == 1;
        if (removed) announce(key);
        return Status::OK();
    }

    Status keepAlive(const std::string& key, bool& alive) override {
        ReplyPtr reply;
        CHECK_STATUS(
            run({"PEXPIRE", key, std::to_string(options_.ttl_ms)}, reply));
        alive = reply->type == REDIS_REPLY_INTEGER && reply->integer == 1;
        return Status::OK();
    }

    Status watch(const std::string& prefix, KeyChanged changed,
                 std::function<void()> gap,
                 std::unique_ptr<MetaStoreWatch>& out) override {
        out = startRedisWatch(servers_, options_, prefix, std::move(changed),
                              std::move(gap));
        return Status::OK();
    }

 private:
    // Tells the watches a key changed. A lost announcement costs readers
    // only staleness up to their cache TTL, so it fails nothing.
    void announce(const std::string& key) {
        ReplyPtr reply;
        Status s = run({"PUBLISH", kRedisChangeChannel, key}, reply);
        if (!s.ok()) {
            LOG(WARNING) << "redis: change of " << key
                         << " not announced: " << s.message();
        }
    }

    std::string where(size_t server) const {
        return "redis at " + servers_[server] + " (metadata/store_timeout_ms=" +
               std::to_string(options_.timeout_ms) + ")";
    }

    // An idle connection to `server`, or a new one.
    Status acquire(size_t server, redisContext*& ctx) {
        ctx = pool_.take(server);
        if (ctx) return Status::OK();
        std::string host;
        uint16_t port = 0;
        CHECK_STATUS(net::parseHostPort(servers_[server], "metadata server",
                                        host, port));
        timeval tv{options_.timeout_ms / 1000,
                   (options_.timeout_ms % 1000) * 1000};
        ctx = redisConnectWithTimeout(host.c_str(), port, tv);
        if (ctx == nullptr || ctx->err) {
            std::string why = ctx ? ctx->errstr : "out of memory";
            if (ctx) redisFree(ctx);
            ctx = nullptr;
            return Status::MetadataError("cannot connect to " + where(server) +
                                         ": " + why);
        }
        // Bounds each command's send and reply.
        redisSetTimeout(ctx, tv);
        return Status::OK();
    }

    // Runs one command on the first server that answers, starting from the
    // one that answered last. A Redis error reply is an error, not a reason
    // to try another server.
    Status run(const std::vector<std::string>& args, ReplyPtr& out) {
        std::vector<const char*> argv;
        std::vector<size_t> lens;
        for (const std::string& arg : args) {
            argv.push_back(arg.data());
            lens.push_back(arg.size());
        }
        return pool_.inTurn([&](size_t server, bool& next) {
            redisContext* ctx = nullptr;
            Status s = acquire(server, ctx);
            if (!s.ok()) {
                next = true;
                return s;
            }
            auto* raw = static_cast<redisReply*>(redisCommandArgv(
                ctx, static_cast<int>(argv.size()), argv.data(), lens.data()));
            if (raw == nullptr) {
                s = Status::MetadataError(args[0] + " on " + where(server) +
                                          " failed: " + ctx->errstr);
                redisFree(ctx);
                next = true;
                return s;
            }
            ReplyPtr reply(raw);
            pool_.answered(server, ctx);
            if (reply->type == REDIS_REPLY_ERROR) {
                return Status::MetadataError(
                    where(server) + " refused " + args[0] + ": " +
                    std::string(reply->str, reply->len));
            }
            out = std::move(reply);
            return Status::OK();
        });
    }

    const std::string servers_text_;
    const std::vector<std::string> servers_;
    const MetaStoreOptions options_;
    ServerPool<redisContext*, redisFree> pool_;
};

}  // namespace

std::shared_ptr<MetaStore> makeRedisStore(std::string servers_text,
                                          std::vector<std::string> servers,
                                          const MetaStoreOptions& options) {
    return std::make_shared<RedisStore>(std::move(servers_text),
                                        std::move(servers), options);
}

}  // namespace mooncake::tent
