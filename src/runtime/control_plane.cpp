// ControlService and P2PSegmentFetcher: the p2p metadata plane. The
// runtime owns what is asked and answered (the GetSegmentDesc op, the
// segment descriptor JSON); src/rpc/ only frames and serves the bytes.
#include "tent/runtime/control_plane.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <unistd.h>

#include "common/json_util.h"
#include "common/range_check.h"
#include "net/auth_handshake.h"
#include "net/socket_io.h"
#include "net/stream_server.h"
#include "rpc/rpc_frame.h"
#include "rpc/rpc_server.h"
#include "runtime/control_client.h"

namespace mooncake::tent {

ControlService::ControlService(std::shared_ptr<SegmentManager> manager)
    : manager_(std::move(manager)), server_(std::make_unique<RpcServer>()) {
    SegmentManager* segments = manager_.get();
    server_->registerHandler(
        kOpGetSegmentDesc, kMaxRequestSize,
        [segments](const Json::Value&, Json::Value& reply) {
            SegmentDescRef desc = segments ? segments->getLocal() : nullptr;
            if (!desc) {
                return Status::MetadataError("no local segment is published");
            }
            reply["segment"] = segmentToJson(*desc);
            return Status::OK();
        });
}

ControlService::~ControlService() { stop(); }

Status ControlService::configure(const Config& conf) {
    net::ServerLimits limits = RpcServer::defaultLimits();
    CHECK_STATUS(net::readServerLimits(conf, "rpc", limits));
    CHECK_STATUS(net::readAuthToken(conf, limits.auth_token));
    server_->setLimits(limits);
    // The parse limits are process-wide (see json_util.h); this is where
    // an engine's configuration first meets the network, before any frame
    // or store value is read.
    const int64_t depth =
        conf.get<int64_t>("rpc/max_json_depth", kDefaultMaxJsonDepth);
    CHECK_STATUS(
        checkInRange("rpc/max_json_depth", depth, 2, kMaxJsonDepthCeiling));
    const int64_t values = conf.get<int64_t>(
        "rpc/max_json_values", static_cast<int64_t>(kDefaultMaxJsonValues));
    CHECK_STATUS(
        checkInRange("rpc/max_json_values", values, 16, int64_t(1) << 26));
    const int64_t buffers = conf.get<int64_t>("metadata/max_segment_buffers",
                                              kDefaultMaxSegmentBuffers);
    CHECK_STATUS(checkInRange("metadata/max_segment_buffers", buffers, 1,
                              int64_t(1) << 24));
    setMaxJsonDepth(static_cast<int>(depth));
    setMaxJsonValues(static_cast<size_t>(values));
    setMaxSegmentBuffers(buffers);
    return Status::OK();
}

Status ControlService::start(uint16_t port) {
    return server_->start(port, kPortRangeBegin, kPortRangeEnd);
}

void ControlService::serveOp(const std::string& op, uint32_t max_request_bytes,
                             OpHandler handler) {
    server_->registerHandler(op, max_request_bytes, std::move(handler));
}

void ControlService::servePeerOp(const std::string& op,
                                 uint32_t max_request_bytes,
                                 PeerOpHandler handler) {
    server_->registerPeerHandler(op, max_request_bytes, std::move(handler));
}

void ControlService::stop() { server_->stop(); }

uint16_t ControlService::port() const { return server_->port(); }

Status callControlOp(int fd, const Json::Value& request, net::Deadline deadline,
                     Json::Value& reply, bool* closed_before_reply) {
    if (closed_before_reply) *closed_before_reply = false;
    const std::string op = request["op"].asString();
    CHECK_STATUS(writeFrame(fd, encodeJson(request), deadline));
    std::string payload;
    CHECK_STATUS(
        readFrame(fd, payload, deadline, ControlService::kMaxFrameSize));
    if (payload.empty()) {
        if (closed_before_reply) *closed_before_reply = true;
        return Status::RpcServiceError(
            "peer closed the connection before replying to " + op);
    }
    CHECK_STATUS(decodeJsonObject(payload, reply));
    const Json::Value& status = reply["status"];
    if (status.isString() && status.asString() == "error") {
        std::string message = reply["message"].isString()
                                  ? reply["message"].asString()
                                  : "(no message)";
        return Status::RpcServiceError("peer refused " + op + ": " + message);
    }
    if (!status.isString() || status.asString() != "ok") {
        return Status::RpcServiceError(
            "reply has no \"status\" of \"ok\" or \"error\"");
    }
    return Status::OK();
}

namespace {

Status requestSegment(int fd, net::Deadline deadline, SegmentDesc& out) {
    Json::Value request(Json::objectValue);
    request["op"] = kOpGetSegmentDesc;
    Json::Value reply;
    CHECK_STATUS(callControlOp(fd, request, deadline, reply));
    if (!reply.isMember("segment")) {
        return Status::InvalidEntry("reply has no \"segment\"");
    }
    return segmentFromJson(reply["segment"], out);
}

}  // namespace

Status P2PSegmentFetcher::fetch(const std::string& segment_name,
                                SegmentDesc& out) {
    std::string host;
    uint16_t port = 0;
    CHECK_STATUS(net::parseHostPort(segment_name, "segment name", host, port));
    // Connect, request and reply share one budget.
    const net::Deadline deadline = net::deadlineIn(timeout_ms_);
    int fd = -1;
    Status s = net::connectWithToken(host, port, auth_token_, deadline, fd);
    if (s.ok()) {
        s = requestSegment(fd, deadline, out);
        ::close(fd);
    }
    if (!s.ok()) {
        return Status(s.code(), "cannot fetch segment " + segment_name +
                                    " (timeout " + std::to_string(timeout_ms_) +
                                    " ms): " + std::string(s.message()));
    }
    return Status::OK();
}

std::string discoverLocalHostname() {
    ifaddrs* list = nullptr;
    if (::getifaddrs(&list) != 0) return "127.0.0.1";
    std::string found;
    for (ifaddrs* ifa = list; ifa; ifa = ifa->ifa_next) {
        if (!ifa->ifa_addr || ifa->ifa_addr->sa_family != AF_INET) continue;
        if (!(ifa->ifa_flags & IFF_UP) || (ifa->ifa_flags & IFF_LOOPBACK))
            continue;
        char text[INET_ADDRSTRLEN] = {0};
        auto* sin = reinterpret_cast<sockaddr_in*>(ifa->ifa_addr);
        if (inet_ntop(AF_INET, &sin->sin_addr, text, sizeof(text))) {
            found = text;
            break;
        }
    }
    ::freeifaddrs(list);
    return found.empty() ? "127.0.0.1" : found;
}

}  // namespace mooncake::tent
