// RpcServer: a small framed-JSON request server (see rpc_frame.h) on top of
// net::StreamServer, which owns the accept loop, the per-connection threads
// and the idle / frame / connection limits (config keys rpc/idle_timeout_ms,
// rpc/frame_timeout_ms, rpc/max_connections; see docs/reliability.md).
//
// Each op is registered with the largest request it can legitimately be;
// the server refuses a frame announcing more than the largest of those
// before allocating anything, and a request above its own op's cap after
// decoding. A malformed request (bad JSON, unknown op, zero or oversized
// length, truncated frame, a frame not complete within the frame deadline)
// is answered with an error frame where the connection still allows it,
// logged with the peer's address, and the connection is closed; the server
// keeps serving everyone else.
#pragma once

#include <json/json.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "net/stream_server.h"
#include "tent/common/status.h"

namespace mooncake::tent {

class RpcServer {
 public:
    // Fills `reply` (the "status" member is added by the server) or returns
    // an error that becomes {"status":"error","message":...}.
    using Handler =
        std::function<Status(const Json::Value& request, Json::Value& reply)>;
    // A Handler that is also told who asked: `peer` is the connection's
    // remote address ("a.b.c.d:port"), which the peer cannot choose the
    // way it chooses its request's contents.
    using PeerHandler =
        std::function<Status(const std::string& peer,
                             const Json::Value& request, Json::Value& reply)>;

    // The defaults of the rpc/* keys.
    static net::ServerLimits defaultLimits();

    RpcServer();
    ~RpcServer();
    RpcServer(const RpcServer&) = delete;
    RpcServer& operator=(const RpcServer&) = delete;

    // Thread-safe; a later registration of the same op replaces the
    // handler. `max_request_bytes` is the largest payload a request of this
    // op can legitimately have.
    void registerHandler(const std::string& op, uint32_t max_request_bytes,
                         Handler handler);
    // registerHandler() for a handler that reads the peer's address.
    void registerPeerHandler(const std::string& op, uint32_t max_request_bytes,
                             PeerHandler handler);
    // Applies from the next start().
    void setLimits(const net::ServerLimits& limits);

    // Binds 0.0.0.0:port. 0 picks the first free port in [begin, end].
    Status start(uint16_t port, uint16_t range_begin, uint16_t range_end);
    // Closes every connection and joins all threads.
    void stop();
    uint16_t port() const { return port_.load(); }
    bool running() const { return server_.running(); }
    net::StreamServer::Stats stats() const { return server_.stats(); }
    // The limits the server enforces: those its last start() applied.
    const net::ServerLimits& limits() const { return server_.limits(); }

    // The frame cap: the largest max_request_bytes registered.
    uint32_t maxRequestBytes() const;
    // Decodes one request payload into `request` and finds its handler:
    // MalformedJson for bad JSON or a non-object, InvalidArgument for a
    // missing/unknown op or a payload above that op's cap. Pure: what the
    // connection threads run, and what the fuzz target drives.
    Status parseRequest(const std::string& payload, Json::Value& request,
                        Handler& handler) const;

 private:
    struct Op {
        uint32_t max_request_bytes = 0;
        PeerHandler handler;
    };
    // parseRequest() returning the op's registration.
    Status findOp(const std::string& payload, Json::Value& request,
                  Op& op) const;

    bool serveFrame(const net::StreamServer::Connection& conn,
                    net::Deadline deadline);

    mutable std::mutex mu_;  // guards ops_ and limits_
    std::map<std::string, Op> ops_;
    net::ServerLimits limits_;

    std::mutex lifecycle_mu_;  // serializes start()/stop()
    std::atomic<uint16_t> port_{0};
    net::StreamServer server_;
};

}  // namespace mooncake::tent
