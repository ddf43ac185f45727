// EtcdStore::watch() against a real etcd (Debian's etcd-server): puts and
// removes under the prefix reach the callback with their key, keys outside
// it do not; a restarted etcd is watched anew after a gap; stopping is
// immediate even with etcd frozen. And against a fake gateway answering
// garbage, an oversized message, a malformed or a canceled watch: each is
// a gap and a new watch, never a crash.
#include "metastore/etcd_watch.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "kit/free_tcp_port.h"
#include "kit/store_server.h"
#include "kit/wait_until.h"
#include "tent/runtime/metastore.h"

namespace mooncake::tent {
namespace {

using testing::StoreServer;
using testing::waitUntil;

// What the callbacks saw, read from the test thread.
struct Seen {
    std::mutex mu;
    std::vector<std::string> keys;
    std::atomic<int> gaps{0};

    std::vector<std::string> snapshot() {
        std::lock_guard<std::mutex> lock(mu);
        return keys;
    }
    size_t count() { return snapshot().size(); }
};

Status startWatch(MetaStore& store, const std::string& prefix, Seen& seen,
                  std::unique_ptr<MetaStoreWatch>& out) {
    return store.watch(
        prefix,
        [&seen](const std::string& key) {
            std::lock_guard<std::mutex> lock(seen.mu);
            seen.keys.push_back(key);
        },
        [&seen] { seen.gaps.fetch_add(1); }, out);
}

TEST(EtcdPrefixEndTest, CoversExactlyThePrefix) {
    EXPECT_EQ(etcdPrefixEnd("tent/seg/"), "tent/seg0");
    EXPECT_EQ(etcdPrefixEnd(std::string("a\xff", 2)), "b");
    EXPECT_EQ(etcdPrefixEnd(std::string("\xff\xff", 2)), std::string(1, '\0'));
    EXPECT_EQ(etcdPrefixEnd(""), std::string(1, '\0'));
}

class EtcdWatchTest : public ::testing::Test {
 protected:
    void SetUp() override {
        TENT_SKIP_OR_FAIL_WITHOUT_STORE("etcd");
        server_ = std::make_unique<StoreServer>("etcd");
        Status started = server_->start();
        ASSERT_TRUE(started.ok()) << started;
        options_.timeout_ms = 1000;
        options_.watch_reconnect_max_ms = 200;
        ASSERT_TRUE(
            MetaStore::Create("etcd", server_->address(), options_, store_)
                .ok());
    }

    Status put(const std::string& key, const std::string& value) {
        bool swapped = false;
        CHECK_STATUS(store_->compareAndSet(key, "", value, swapped));
        return swapped ? Status::OK() : Status::InternalError("not swapped");
    }

    void watched() {
        ASSERT_TRUE(startWatch(*store_, "tent/seg/", seen_, watch_).ok());
        ASSERT_TRUE(waitUntil([&] { return watch_->connects() == 1; }));
    }

    MetaStoreOptions options_;
    std::unique_ptr<StoreServer> server_;
    std::shared_ptr<MetaStore> store_;
    Seen seen_;
    std::unique_ptr<MetaStoreWatch> watch_;
};

TEST_F(EtcdWatchTest, PutsAndRemovesUnderThePrefixAreSeenOthersAreNot) {
    ASSERT_NO_FATAL_FAILURE(watched());
    // Outside the prefix: a sibling, the prefix's range end, a shorter key.
    ASSERT_TRUE(put("tent/segx", "1").ok());
    ASSERT_TRUE(put("tent/seg0", "1").ok());
    ASSERT_TRUE(put("tent/seg", "1").ok());
    ASSERT_TRUE(put("tent/seg/a", "1").ok());
    bool removed = false;
    ASSERT_TRUE(store_->compareAndRemove("tent/seg/a", "1", removed).ok());
    ASSERT_TRUE(removed);
    ASSERT_TRUE(waitUntil([&] { return seen_.count() >= 2; }));
    // Events arrive in revision order: had the others been sent, they
    // would be here before these.
    EXPECT_EQ(seen_.snapshot(),
              (std::vector<std::string>{"tent/seg/a", "tent/seg/a"}));
    EXPECT_EQ(watch_->notifications(), 2u);
    EXPECT_EQ(seen_.gaps.load(), 0);
}

TEST_F(EtcdWatchTest, ARestartedEtcdIsWatchedAnewAfterAGap) {
    ASSERT_NO_FATAL_FAILURE(watched());
    ASSERT_TRUE(put("tent/seg/a", "1").ok());
    ASSERT_TRUE(waitUntil([&] { return seen_.count() == 1; }));

    ASSERT_TRUE(server_->restart(/*wipe=*/true).ok());
    ASSERT_TRUE(waitUntil([&] { return watch_->connects() == 2; }));
    EXPECT_EQ(seen_.gaps.load(), 1);
    // The store's pooled connections died with the server: the write is
    // retried until one answers.
    ASSERT_TRUE(waitUntil([&] { return put("tent/seg/b", "2").ok(); }));
    ASSERT_TRUE(waitUntil([&] { return seen_.count() == 2; }));
    EXPECT_EQ(seen_.snapshot().back(), "tent/seg/b");
}

TEST_F(EtcdWatchTest, ADeadFirstServerIsPassedOver) {
    // Nothing listens on the first server: the watch moves on to etcd.
    const std::string servers =
        "127.0.0.1:" + std::to_string(testing::freeTcpPort()) + "," +
        server_->address();
    std::shared_ptr<MetaStore> store;
    ASSERT_TRUE(MetaStore::Create("etcd", servers, options_, store).ok());
    ASSERT_TRUE(startWatch(*store, "tent/seg/", seen_, watch_).ok());
    ASSERT_TRUE(waitUntil([&] { return watch_->connects() == 1; }));
    ASSERT_TRUE(put("tent/seg/a", "1").ok());
    ASSERT_TRUE(waitUntil([&] { return seen_.count() == 1; }));
    EXPECT_EQ(seen_.snapshot(), std::vector<std::string>{"tent/seg/a"});
    // No watch had been created before: nothing was missed.
    EXPECT_EQ(seen_.gaps.load(), 0);
}

TEST_F(EtcdWatchTest, StoppingWithEtcdFrozenIsImmediate) {
    // Without the wake-up a stop waits for libcurl's next timer (170 to
    // 360 ms seen; bounded by metadata/store_timeout_ms); with it, under a
    // millisecond: five stops within 100 ms each are the wake-up's doing.
    MetaStoreOptions slow = options_;
    slow.timeout_ms = 5000;
    std::shared_ptr<MetaStore> store;
    ASSERT_TRUE(
        MetaStore::Create("etcd", server_->address(), slow, store).ok());
    for (int i = 0; i < 5; ++i) {
        ASSERT_TRUE(startWatch(*store, "tent/seg/", seen_, watch_).ok());
        ASSERT_TRUE(waitUntil([&] { return watch_->connects() == 1; }));
        ASSERT_EQ(::kill(server_->pid(), SIGSTOP), 0);
        const auto start = std::chrono::steady_clock::now();
        watch_.reset();
        const auto took = std::chrono::steady_clock::now() - start;
        ASSERT_EQ(::kill(server_->pid(), SIGCONT), 0);
        EXPECT_LT(took, std::chrono::milliseconds(100))
            << "stop " << i << " took "
            << std::chrono::duration_cast<std::chrono::microseconds>(took)
                   .count()
            << " us";
    }
}

// A fake v3 gateway on a loopback port: connection i is answered with
// replies[min(i, last)] after a 200 header, then held open until the
// client closes it.
class FakeGateway {
 public:
    explicit FakeGateway(std::vector<std::string> replies)
        : replies_(std::move(replies)) {
        fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_in addr{};
        addr.sin_family = AF_INET;
        addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        socklen_t len = sizeof(addr);
        if (::bind(fd_, reinterpret_cast<sockaddr*>(&addr), len) == 0 &&
            ::listen(fd_, 16) == 0 &&
            ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
            port_ = ntohs(addr.sin_port);
        }
        thread_ = std::thread([this] { run(); });
    }
    ~FakeGateway() {
        stop_.store(true);
        thread_.join();
        ::close(fd_);
    }
    std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
    int accepted() const { return accepted_.load(); }

 private:
    // Each wait is 50 ms, so that stop_ ends the thread promptly.
    void run() {
        std::vector<int> open;
        while (!stop_.load()) {
            pollfd fd{fd_, POLLIN, 0};
            if (::poll(&fd, 1, 50) == 1) {
                int conn = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
                if (conn >= 0) {
                    // Counted before the reply, which the test may see
                    // first.
                    serve(conn, accepted_.fetch_add(1));
                    open.push_back(conn);
                }
            }
        }
        for (int conn : open) ::close(conn);
    }

    void serve(int conn, size_t index) {
        // The request: read until its body (JSON) has arrived.
        std::string request;
        char buf[4096];
        while (request.find("create_request") == std::string::npos ||
               request.back() != '}') {
            pollfd fd{conn, POLLIN, 0};
            if (::poll(&fd, 1, 1000) != 1) return;
            ssize_t n = ::recv(conn, buf, sizeof(buf), 0);
            if (n <= 0) return;
            request.append(buf, n);
        }
        const std::string reply =
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
            "Connection: close\r\n\r\n" +
            replies_[std::min(index, replies_.size() - 1)];
        size_t sent = 0;
        while (sent < reply.size()) {
            ssize_t n = ::send(conn, reply.data() + sent, reply.size() - sent,
                               MSG_NOSIGNAL);
            if (n <= 0) return;
            sent += n;
        }
    }

    const std::vector<std::string> replies_;
    int fd_ = -1;
    int port_ = 0;
    std::atomic<bool> stop_{false};
    std::atomic<int> accepted_{0};
    std::thread thread_;
};

TEST(EtcdWatchHostileTest, AMalformedStreamIsAGapAndANewWatch) {
    MetaStoreOptions options;
    options.timeout_ms = 1000;
    options.max_value_bytes = 1024;
    options.watch_reconnect_max_ms = 100;
    const std::string created = "{\"result\":{\"created\":true}}\n";
    // "tent/seg/k" and "other/k", base64.
    const std::string events =
        "{\"result\":{\"events\":[{\"kv\":{\"key\":\"b3RoZXIvaw==\"}},"
        "{\"type\":\"DELETE\",\"kv\":{\"key\":\"dGVudC9zZWcvaw==\"}}]}}\n";
    FakeGateway gateway({
        created + "garbage\n",
        created + std::string(etcdWatchMessageCap(options) + 1000, 'x'),
        created + "{\"result\":{\"events\":5}}\n",
        created + "{\"result\":{\"events\":[{\"kv\":\"k\"}]}}\n",
        created + "[1,2]\n",
        created + "{\"error\":{\"grpc_code\":14,\"message\":\"down\"}}\n",
        created + "{\"result\":{\"canceled\":true,"
                  "\"compact_revision\":\"7\"}}\n",
        created + events,
    });
    std::shared_ptr<MetaStore> store;
    ASSERT_TRUE(
        MetaStore::Create("etcd", gateway.address(), options, store).ok());
    Seen seen;
    std::unique_ptr<MetaStoreWatch> watch;
    ASSERT_TRUE(startWatch(*store, "tent/seg/", seen, watch).ok());
    ASSERT_TRUE(waitUntil([&] { return seen.count() == 1; }));
    EXPECT_EQ(seen.snapshot(), std::vector<std::string>{"tent/seg/k"});
    // Seven broken streams, each followed by a new watch and its gap.
    EXPECT_EQ(watch->connects(), 8u);
    EXPECT_EQ(seen.gaps.load(), 7);
    EXPECT_EQ(gateway.accepted(), 8);
    EXPECT_EQ(watch->notifications(), 1u);
}

}  // namespace
}  // namespace mooncake::tent
