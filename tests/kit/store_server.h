// StoreServer: a real redis-server, etcd or HTTP metadata server for one
// test, on a free loopback port with its data in a temporary folder,
// stopped (and the folder removed) by the destructor. The binaries are
// Debian's redis-server and etcd-server packages; the HTTP server is
// python/mooncake/http_metadata_server.py run from the source tree with
// python3-aiohttp (scripts/install_deps.sh installs all three).
#pragma once

#include <sys/types.h>

#include <string>

#include "tent/common/status.h"

namespace mooncake::tent::testing {

class StoreServer {
 public:
    // How long start() and restart() wait for the server to answer.
    static constexpr int kStartBoundMs = 20000;

    // "redis", "etcd" or "http".
    explicit StoreServer(std::string type);
    ~StoreServer();
    StoreServer(const StoreServer&) = delete;
    StoreServer& operator=(const StoreServer&) = delete;

    // The executable this type needs, and whether it is on PATH.
    static std::string binaryFor(const std::string& type);
    static bool installed(const std::string& type);

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
