// RpcServer: a small framed-JSON request server (see rpc_frame.h).
//
// One accept thread plus one thread per connection. Every read is bounded
// by `io_timeout_ms`, so an idle or slow peer holds only its own thread and
// only for that long. A malformed request (bad JSON, unknown op, zero or
// oversized length, truncated frame) is answered with an error frame where
// the connection still allows it, logged with the peer's address, and the
// connection is closed; the server keeps serving everyone else.
#pragma once

#include <json/json.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "tent/common/status.h"

namespace mooncake::tent {

class RpcServer {
 public:
    // Fills `reply` (the "status" member is added by the server) or returns
    // an error that becomes {"status":"error","message":...}.
    using Handler =
        std::function<Status(const Json::Value& request, Json::Value& reply)>;

    static constexpr int kDefaultIoTimeoutMs = 30000;
    static constexpr size_t kMaxConnections = 256;

    explicit RpcServer(uint32_t max_frame_size,
                       int io_timeout_ms = kDefaultIoTimeoutMs);
    ~RpcServer();
    RpcServer(const RpcServer&) = delete;
    RpcServer& operator=(const RpcServer&) = delete;

    // Thread-safe; a later registration of the same op replaces the handler.
    void registerHandler(const std::string& op, Handler handler);

    // Binds 0.0.0.0:port. 0 picks the first free port in [begin, end].
    Status start(uint16_t port, uint16_t range_begin, uint16_t range_end);
    // Wakes the accept loop, closes every connection and joins all threads.
    void stop();
    uint16_t port() const { return port_.load(); }
    bool running() const { return running_.load(); }

 private:
    struct Connection {
        int fd = -1;
        std::string peer;
        std::thread thread;
        std::atomic<bool> done{false};
    };

    Status bindPort(uint16_t port, int& fd_out, int& err_out);
    void acceptLoop();
    void serveConnection(Connection* conn);
    // Handles one request payload; false means close the connection.
    bool handlePayload(Connection* conn, const std::string& payload);
    void reapFinished(bool all);

    const uint32_t max_frame_size_;
    const int io_timeout_ms_;

    std::mutex handlers_mu_;
    std::map<std::string, Handler> handlers_;

    std::mutex lifecycle_mu_;  // serializes start()/stop()
    std::atomic<bool> running_{false};
    std::atomic<bool> stopping_{false};
    std::atomic<uint16_t> port_{0};
    int listen_fd_ = -1;
    int wake_pipe_[2] = {-1, -1};
    std::thread accept_thread_;

    std::mutex conns_mu_;
    std::list<std::unique_ptr<Connection>> conns_;
};

}  // namespace mooncake::tent
