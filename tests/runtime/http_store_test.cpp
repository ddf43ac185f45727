// The http MetaStore's own rules (docs/metadata.md, http): its URL form,
// an unreachable or silent server failing within metadata/store_timeout_ms
// naming the URL, the value bound, and a key holding something that is not
// a TENT record. The store rules it shares with redis and etcd run in
// metastore_test.cpp and store_engine_test.cpp.
#include <arpa/inet.h>
#include <curl/curl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <string>

#include "kit/free_tcp_port.h"
#include "kit/store_server.h"
#include "tent/runtime/metastore.h"

namespace mooncake::tent::testing {
namespace {

using Clock = std::chrono::steady_clock;

std::shared_ptr<MetaStore> httpStore(const std::string& servers,
                                     int timeout_ms) {
    MetaStoreOptions options;
    options.timeout_ms = timeout_ms;
    std::shared_ptr<MetaStore> store;
    Status s = MetaStore::Create("http", servers, options, store);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return store;
}

// A loopback listener that never accepts: the kernel completes the TCP
// handshake, and then nothing answers.
class SilentListener {
 public:
    SilentListener() {
        fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in addr{};
        addr.sin_family = AF_INET;
        addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        socklen_t len = sizeof(addr);
        if (fd_ < 0 || ::bind(fd_, (sockaddr*)&addr, sizeof(addr)) != 0 ||
            ::listen(fd_, 8) != 0 ||
            ::getsockname(fd_, (sockaddr*)&addr, &len) != 0) {
            return;
        }
        port_ = ntohs(addr.sin_port);
    }
    ~SilentListener() {
        if (fd_ >= 0) ::close(fd_);
    }
    int port() const { return port_; }

 private:
    int fd_ = -1;
    int port_ = 0;
};

TEST(HttpStoreTest, UrlsAreCheckedAndCompletedWithTheDefaultPath) {
    std::vector<std::string> urls;
    ASSERT_TRUE(MetaStore::parseHttpServers(
                    "http://127.0.0.1:8080/metadata, h:1 ,http://h:2/a/b", urls)
                    .ok());
    EXPECT_EQ(urls, (std::vector<std::string>{"http://127.0.0.1:8080/metadata",
                                              "http://h:1/metadata",
                                              "http://h:2/a/b"}));
    for (const std::string bad :
         {"https://h:1/metadata", "http://h/metadata", "http://h:1/a?key=b",
          "http://h:1/a b", "http://h:99999/m", ""}) {
        const std::string servers = "http://h:1/m," + bad;
        EXPECT_EQ(MetaStore::parseHttpServers(servers, urls),
                  Status::InvalidArgument(
                      "metadata_servers \"" + servers + "\": entry \"" + bad +
                      "\" is not an http URL (a comma list of "
                      "http://host:port/path is expected; the path defaults "
                      "to /metadata)"))
            << bad;
    }
    std::shared_ptr<MetaStore> store;
    MetaStoreOptions options;
    EXPECT_EQ(MetaStore::Create("http", "", options, store),
              Status::InvalidArgument("metadata_type http needs "
                                      "metadata_servers (a comma list of "
                                      "http://host:port/path)"));
}

TEST(HttpStoreTest, ARefusedUrlFailsNamingIt) {
    const std::string url =
        "http://127.0.0.1:" + std::to_string(freeTcpPort()) + "/metadata";
    auto store = httpStore(url, 500);
    ASSERT_TRUE(store);
    std::string value;
    bool found = true;
    Status s = store->get("k", value, found);
    ASSERT_TRUE(s.IsMetadataError()) << s.ToString();
    EXPECT_EQ(s.message(), "GET of k on http at " + url +
                               " (metadata/store_timeout_ms=500) failed: "
                               "Couldn't connect to server");
}

TEST(HttpStoreTest, ASilentServerFailsWithinTheTimeoutNamingIt) {
    SilentListener silent;
    ASSERT_NE(silent.port(), 0);
    const std::string url =
        "http://127.0.0.1:" + std::to_string(silent.port()) + "/metadata";
    auto store = httpStore(url, 400);
    ASSERT_TRUE(store);
    const auto start = Clock::now();
    Status s = store->ping();
    const auto elapsed = Clock::now() - start;
    ASSERT_TRUE(s.IsMetadataError()) << s.ToString();
    const std::string expected_start =
        "GET of mooncake/tent/ping on http at " + url +
        " (metadata/store_timeout_ms=400) failed: Timeout was reached";
    EXPECT_EQ(s.message(), expected_start);
    // libcurl's clock may end it a hair before ours says 400 ms.
    EXPECT_GE(elapsed, std::chrono::milliseconds(350));
    EXPECT_LT(elapsed, std::chrono::milliseconds(400 + 1000));
}

TEST(HttpStoreTest, AValueOverTheBoundIsRefusedBeforeAnyRequest) {
    // No server: the refusal comes before the network.
    auto store = httpStore("http://127.0.0.1:1/metadata", 500);
    ASSERT_TRUE(store);
    const std::string big((64u << 20) + 1, 'x');
    bool swapped = true;
    EXPECT_EQ(store->compareAndSet("big", "", big, swapped),
              Status::InvalidArgument("value of big is 67108865 bytes, above "
                                      "metadata/max_value_bytes=67108864"));
    EXPECT_FALSE(swapped);
}

size_t discard(char*, size_t size, size_t count, void*) { return size * count; }

// PUTs `body` at `key` the way any client of the protocol may.
long rawPut(const std::string& url, const std::string& key,
            const std::string& body) {
    CURL* curl = curl_easy_init();
    const std::string target = url + "?key=" + key;
    curl_easy_setopt(curl, CURLOPT_URL, target.c_str());
    curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, "PUT");
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body.c_str());
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE, long(body.size()));
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, discard);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, 5000L);
    long http = 0;
    if (curl_easy_perform(curl) == CURLE_OK) {
        curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &http);
    }
    curl_easy_cleanup(curl);
    return http;
}

class HttpServerTest : public ::testing::Test {
 protected:
    void SetUp() override {
        TENT_SKIP_OR_FAIL_WITHOUT_STORE("http");
        server_ = std::make_unique<StoreServer>("http");
        Status s = server_->start();
        ASSERT_TRUE(s.ok()) << s.ToString();
    }
    std::unique_ptr<StoreServer> server_;
};

TEST_F(HttpServerTest, AKeyThatIsNotATentRecordIsAnErrorNamingIt) {
    ASSERT_EQ(rawPut(server_->address(), "foreign", "{\"a\":1}"), 200);
    auto store = httpStore(server_->address(), 1000);
    std::string value;
    bool found = false;
    EXPECT_EQ(store->get("foreign", value, found),
              Status::MetadataError(
                  "http metadata store at " + server_->address() +
                  ": the value of foreign is not a TENT record (\"tent-record "
                  "expires_unix_ms=<ms>\\n<value>\"): {\"a\":1}"));
    // A record whose expiry has passed reads as absent, and can be taken.
    ASSERT_EQ(rawPut(server_->address(), "old",
                     "tent-record expires_unix_ms=1000\nstale"),
              200);
    ASSERT_TRUE(store->get("old", value, found).ok());
    EXPECT_FALSE(found);
    bool swapped = false;
    ASSERT_TRUE(store->compareAndSet("old", "", "fresh", swapped).ok());
    EXPECT_TRUE(swapped);
    ASSERT_TRUE(store->get("old", value, found).ok());
    EXPECT_TRUE(found);
    EXPECT_EQ(value, "fresh");
}

TEST_F(HttpServerTest, TheServersBoundsAreAnsweredNotFatal) {
    // A key over --max-key-bytes (default 4096) is refused by the server;
    // the client reports it naming the key's owner store.
    auto store = httpStore(server_->address(), 1000);
    const std::string key(5000, 'k');
    bool swapped = true;
    Status s = store->compareAndSet(key, "", "v", swapped);
    ASSERT_TRUE(s.IsMetadataError()) << s.ToString();
    EXPECT_NE(
        s.message().find("refused GET of " + key +
                         " (HTTP 400): metadata key is 5000 bytes, more than "
                         "--max-key-bytes (4096)"),
        std::string::npos)
        << s.message().substr(0, 300);
    EXPECT_FALSE(swapped);
    // And the server still answers.
    EXPECT_TRUE(store->ping().ok());
}

}  // namespace
}  // namespace mooncake::tent::testing
