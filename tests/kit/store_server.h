// StoreServer: a real redis-server, etcd or HTTP metadata server for one
// test, on a free loopback port with its data in a temporary folder,
// stopped (and the folder removed) by the destructor. The binaries are
// Debian's redis-server and etcd-server packages; the HTTP server is
// python/mooncake/http_metadata_server.py run from the source tree with
// python3-aiohttp (scripts/install_deps.sh installs all three).
//
// A missing server skips a store case, naming it; with
// TENT_TEST_REQUIRE_STORES=1 (scripts/run_tests.sh sets it in CI) it fails
// the case instead, so CI cannot pass without having run the stores. Use
// TENT_SKIP_OR_FAIL_WITHOUT_STORE(type) at the top of a case or SetUp().
#pragma once

#include <sys/types.h>

#include <string>

#include "tent/common/status.h"

namespace mooncake::tent::testing {

class StoreServer {
 public:
    // How long start() and restart() wait for the server to answer.
    static constexpr int kStartBoundMs = 20000;
    // Starts on fresh ports when the server exits at start (its port was
    // taken between picking and binding).
    static constexpr int kStartAttempts = 3;
    // "1": a store whose server is missing fails its cases (see above).
    static constexpr char kRequireStoresVar[] = "TENT_TEST_REQUIRE_STORES";

    // "redis", "etcd" or "http".
    explicit StoreServer(std::string type);
    ~StoreServer();
    StoreServer(const StoreServer&) = delete;
    StoreServer& operator=(const StoreServer&) = delete;

    // The executable this type needs ("" when it needs none), and whether
    // it is on PATH.
    static std::string binaryFor(const std::string& type);
    static bool installed(const std::string& type);
    // Why a case of `type` cannot run here ("" when it can), and whether
    // that fails it (`fail`): TENT_TEST_REQUIRE_STORES=1, or a value of
    // that variable other than unset, "", "0" and "1" (named in the text).
    static std::string missing(const std::string& type, bool& fail);

    // Starts the server and waits (bounded) until it answers a ping.
    Status start();
    // SIGTERM, then SIGKILL if it has not exited within 10 s.
    void stop();
    // Starts it again on the same port; `wipe` empties its data first, so
    // that anything found in it afterwards was written after the restart
    // (the http server keeps its data in memory: it always comes back
    // empty).
    Status restart(bool wipe);

    // The metadata_servers value: "127.0.0.1:<port>", or for http
    // "http://127.0.0.1:<port>/metadata".
    std::string address() const;
    pid_t pid() const { return pid_; }

 private:
    Status spawn();

    const std::string type_;
    std::string dir_;
    int port_ = 0;
    int peer_port_ = 0;  // etcd's peer listener
    pid_t pid_ = -1;
};

}  // namespace mooncake::tent::testing

// Skips (or, under TENT_TEST_REQUIRE_STORES=1, fails) the current test when
// the server of store `type` is not installed; a macro because
// GTEST_SKIP() and FAIL() return from the function they are written in.
#define TENT_SKIP_OR_FAIL_WITHOUT_STORE(type)                                  \
    do {                                                                       \
        bool tent_store_fail_ = false;                                         \
        const std::string tent_store_why_ =                                    \
            ::mooncake::tent::testing::StoreServer::missing(type,              \
                                                            tent_store_fail_); \
        if (!tent_store_why_.empty()) {                                        \
            if (tent_store_fail_) FAIL() << tent_store_why_;                   \
            GTEST_SKIP() << tent_store_why_;                                   \
        }                                                                      \
    } while (0)
