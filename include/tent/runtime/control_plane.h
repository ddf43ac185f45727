// ControlService: the p2p metadata plane, and what transports receive at
// install(): segmentManager() is the engine's SegmentManager.
//
// Each engine runs one RPC server. A peer that opens our segment by name
// ("host:port") connects to it and asks for the local segment descriptor.
// Wire format: length-prefixed frames (see src/rpc/rpc_frame.h). A request
// frame is capped at kMaxRequestSize before anything is allocated, a reply
// at kMaxFrameSize on the client side; a malformed or oversized request is
// refused and logged, the connection is closed, and the server keeps
// serving others. Idle and trickling clients are dropped by the rpc/* keys
// configure() reads (docs/reliability.md).
//
// Implemented in src/runtime/control_plane.cpp: the runtime serves and
// fetches descriptors over src/rpc/ (frames and the server), which knows
// nothing of segments.
#pragma once

#include <json/json.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "tent/common/config.h"
#include "tent/runtime/segment_manager.h"

namespace mooncake::tent {

class RpcServer;

// The control plane's one request, {"op":"GetSegmentDesc"}; the reply is
// {"status":"ok","segment":<descriptor>}. The RPC layer (src/rpc/) carries
// ops by name and knows none of them.
inline constexpr const char* kOpGetSegmentDesc = "GetSegmentDesc";
// Further ops the engine serves through serveOp(): a notification for this
// engine, and a liveness probe (an empty request, an empty reply).
inline constexpr const char* kOpNotify = "Notify";
inline constexpr const char* kOpProbe = "Probe";

class ControlService {
 public:
    static constexpr uint16_t kPortRangeBegin = 15000;
    static constexpr uint16_t kPortRangeEnd = 17000;  // inclusive
    // Largest reply frame a client accepts, in bytes: a descriptor with
    // many buffers is large, and the client asked for it.
    static constexpr uint32_t kMaxFrameSize = 64u << 20;
    // Largest GetSegmentDesc request payload the server reads:
    // {"op":"GetSegmentDesc"} is 23 bytes; the rest is slack for
    // whitespace, not room for a hostile length prefix to allocate. Ops
    // added with serveOp() bring their own cap; the largest caps a frame.
    static constexpr uint32_t kMaxRequestSize = 1024;

    // Peers asking for our descriptor are served `manager`'s getLocal().
    explicit ControlService(std::shared_ptr<SegmentManager> manager);
    ~ControlService();
    ControlService(const ControlService&) = delete;
    ControlService& operator=(const ControlService&) = delete;

    SegmentManager& segmentManager() { return *manager_; }

    // Fills `reply` (the server adds "status") or returns the error the
    // peer receives.
    using OpHandler =
        std::function<Status(const Json::Value& request, Json::Value& reply)>;
    // Serves `op` beside GetSegmentDesc; a request payload above
    // `max_request_bytes` is refused before it is decoded.
    void serveOp(const std::string& op, uint32_t max_request_bytes,
                 OpHandler handler);
    // serveOp() for a handler that is also given the address the request
    // came from ("a.b.c.d:port" of the connection): what the engine can
    // hold a peer to, unlike any name the request carries.
    using PeerOpHandler =
        std::function<Status(const std::string& peer,
                             const Json::Value& request, Json::Value& reply)>;
    void servePeerOp(const std::string& op, uint32_t max_request_bytes,
                     PeerOpHandler handler);

    // Reads the server limits rpc/idle_timeout_ms, rpc/frame_timeout_ms and
    // rpc/max_connections (defaults 60000, 10000, 256); they apply from the
    // next start(). InvalidArgument names a bad key.
    Status configure(const Config& conf);

    // Binds all interfaces on `port`; 0 takes the first free port in
    // [kPortRangeBegin, kPortRangeEnd]. The error names the port(s).
    Status start(uint16_t port);
    void stop();
    uint16_t port() const;
    // The RPC server (its limits and stats), for diagnostics and tests.
    const RpcServer& server() const { return *server_; }

 private:
    std::shared_ptr<SegmentManager> manager_;
    std::unique_ptr<RpcServer> server_;
};

// SegmentFetcher for metadata_type=p2p: "host:port" -> RPC to that
// ControlService. Bad names, unreachable peers and bad replies are errors
// naming the segment; connect, request and reply together are bounded by
// `timeout_ms` (the engine passes rpc/timeout_ms).
class P2PSegmentFetcher : public SegmentFetcher {
 public:
    static constexpr int kDefaultTimeoutMs = 5000;
    // `auth_token`: the cluster token each connection proves it knows
    // (rpc/auth_token); empty: none.
    explicit P2PSegmentFetcher(int timeout_ms = kDefaultTimeoutMs,
                               std::string auth_token = "")
        : timeout_ms_(timeout_ms), auth_token_(std::move(auth_token)) {}
    Status fetch(const std::string& segment_name, SegmentDesc& out) override;
    int timeoutMs() const { return timeout_ms_; }

 private:
    int timeout_ms_;
    std::string auth_token_;
};

// First non-loopback IPv4 address of this host, else "127.0.0.1".
std::string discoverLocalHostname();

}  // namespace mooncake::tent
