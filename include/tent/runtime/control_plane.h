// ControlService: the p2p metadata plane, and what transports receive at
// install(): segmentManager() is the engine's SegmentManager.
//
// Each engine runs one RPC server. A peer that opens our segment by name
// ("host:port") connects to it and asks for the local segment descriptor.
// Wire format: length-prefixed frames (see src/rpc/rpc_frame.h) with a
// size cap; a malformed or oversized request is refused and logged, the
// connection is closed, and the server keeps serving others.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "tent/runtime/segment_manager.h"

namespace mooncake::tent {

class RpcServer;

class ControlService {
 public:
    static constexpr uint16_t kPortRangeBegin = 15000;
    static constexpr uint16_t kPortRangeEnd = 17000;  // inclusive
    // Largest request or reply frame accepted, in bytes.
    static constexpr uint32_t kMaxFrameSize = 64u << 20;

    // Peers asking for our descriptor are served `manager`'s getLocal().
    explicit ControlService(std::shared_ptr<SegmentManager> manager);
    ~ControlService();
    ControlService(const ControlService&) = delete;
    ControlService& operator=(const ControlService&) = delete;

    SegmentManager& segmentManager() { return *manager_; }

    // Binds all interfaces on `port`; 0 takes the first free port in
    // [kPortRangeBegin, kPortRangeEnd]. The error names the port(s).
    Status start(uint16_t port);
    void stop();
    uint16_t port() const;

 private:
    std::shared_ptr<SegmentManager> manager_;
    std::unique_ptr<RpcServer> server_;
};

// SegmentFetcher for metadata_type=p2p: "host:port" -> RPC to that
// ControlService. Bad names, unreachable peers and bad replies are errors
// naming the segment; every socket operation is bounded by `timeout_ms`.
class P2PSegmentFetcher : public SegmentFetcher {
 public:
    // metadata/rpc_timeout_ms
    static constexpr int kDefaultTimeoutMs = 5000;
    explicit P2PSegmentFetcher(int timeout_ms = kDefaultTimeoutMs)
        : timeout_ms_(timeout_ms) {}
    Status fetch(const std::string& segment_name, SegmentDesc& out) override;

 private:
    int timeout_ms_;
};

// First non-loopback IPv4 address of this host, else "127.0.0.1".
std::string discoverLocalHostname();

}  // namespace mooncake::tent
