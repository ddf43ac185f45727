#include "rpc/rpc_server.h"

#include <glog/logging.h>

#include <cerrno>

#include "rpc/rpc_frame.h"

namespace mooncake::tent {

namespace {

// Best effort: the connection is being refused anyway, so a failed write
// only means the peer never learns why.
void sendError(int fd, const std::string& message, net::Deadline deadline) {
    writeFrame(fd, encodeJson(makeErrorReply(message)), deadline);
}

}  // namespace

net::ServerLimits RpcServer::defaultLimits() {
    net::ServerLimits limits;
    limits.idle_timeout_ms = 60000;
    limits.frame_timeout_ms = 10000;
    limits.max_connections = 256;
    limits.key_prefix = "rpc";
    return limits;
}

RpcServer::RpcServer()
    : limits_(defaultLimits()),
      server_("RpcServer", [this](const net::StreamServer::Connection& conn,
                                  net::Deadline deadline) {
          return serveFrame(conn, deadline);
      }) {}

RpcServer::~RpcServer() { stop(); }

void RpcServer::registerHandler(const std::string& op,
                                uint32_t max_request_bytes, Handler handler) {
    registerPeerHandler(
        op, max_request_bytes,
        [handler = std::move(handler)](
            const std::string&, const Json::Value& request,
            Json::Value& reply) { return handler(request, reply); });
}

void RpcServer::registerPeerHandler(const std::string& op,
                                    uint32_t max_request_bytes,
                                    PeerHandler handler) {
    std::lock_guard<std::mutex> lock(mu_);
    ops_[op] = Op{max_request_bytes, std::move(handler)};
}

void RpcServer::setLimits(const net::ServerLimits& limits) {
    std::lock_guard<std::mutex> lock(mu_);
    limits_ = limits;
}

uint32_t RpcServer::maxRequestBytes() const {
    std::lock_guard<std::mutex> lock(mu_);
    uint32_t cap = 0;
    for (const auto& entry : ops_) {
        cap = std::max(cap, entry.second.max_request_bytes);
    }
    return cap;
}

Status RpcServer::start(uint16_t port, uint16_t range_begin,
                        uint16_t range_end) {
    std::lock_guard<std::mutex> lock(lifecycle_mu_);
    if (server_.running()) {
        return Status::InvalidArgument("RPC server already running on port " +
                                       std::to_string(port_.load()));
    }
    int fd = -1;
    int err = 0;
    uint16_t bound = 0;
    if (port != 0) {
        CHECK_STATUS(net::listenOn(port, fd, bound, &err));
    } else {
        for (uint32_t p = range_begin; p <= range_end; ++p) {
            Status s = net::listenOn(static_cast<uint16_t>(p), fd, bound, &err);
            if (s.ok()) break;
            // Only a taken port is worth skipping; anything else would fail
            // the same way on every port.
            if (err != EADDRINUSE) return s;
        }
        if (fd < 0) {
            return Status::RpcServiceError("no free port in " +
                                           std::to_string(range_begin) + ".." +
                                           std::to_string(range_end));
        }
    }
    net::ServerLimits limits;
    {
        std::lock_guard<std::mutex> guard(mu_);
        limits = limits_;
    }
    CHECK_STATUS(server_.start(fd, limits));
    port_ = bound;
    return Status::OK();
}

void RpcServer::stop() {
    std::lock_guard<std::mutex> lock(lifecycle_mu_);
    server_.stop();
}

Status RpcServer::parseRequest(const std::string& payload, Json::Value& request,
                               Handler& handler) const {
    Op op;
    CHECK_STATUS(findOp(payload, request, op));
    handler = [peer_handler = std::move(op.handler)](const Json::Value& req,
                                                     Json::Value& reply) {
        return peer_handler("", req, reply);
    };
    return Status::OK();
}

Status RpcServer::findOp(const std::string& payload, Json::Value& request,
                         Op& op) const {
    CHECK_STATUS(decodeJsonObject(payload, request));
    if (!request.isMember("op") || !request["op"].isString()) {
        return Status::InvalidArgument("request has no string \"op\"");
    }
    const std::string name = request["op"].asString();
    std::lock_guard<std::mutex> lock(mu_);
    auto it = ops_.find(name);
    if (it == ops_.end()) {
        return Status::InvalidArgument("unknown op \"" + name + "\"");
    }
    if (payload.size() > it->second.max_request_bytes) {
        return Status::InvalidArgument(
            "request of " + std::to_string(payload.size()) + " bytes exceeds " +
            name + "'s limit of " +
            std::to_string(it->second.max_request_bytes) + " bytes");
    }
    op = it->second;
    return Status::OK();
}

bool RpcServer::serveFrame(const net::StreamServer::Connection& conn,
                           net::Deadline deadline) {
    std::string payload;
    Status s = readFrame(conn.fd, payload, deadline, maxRequestBytes());
    if (s.ok() && payload.empty()) return false;  // orderly close
    Json::Value request;
    Op op;
    if (s.ok()) s = findOp(payload, request, op);
    if (!s.ok()) {
        if (server_.stopping()) return false;  // stop() shut us down
        std::string why(s.message());
        if (net::Clock::now() >= deadline) {
            why = "request not complete within rpc/frame_timeout_ms=" +
                  std::to_string(server_.limits().frame_timeout_ms) + " ms";
        }
        LOG(WARNING) << "RpcServer: bad request from " << conn.peer << ": "
                     << why << "; closing the connection";
        // A bad length prefix or payload leaves the connection writable,
        // so the peer can be told why; after a truncated frame or a fired
        // deadline nobody reads.
        if (s.IsInvalidArgument() || s.IsMalformedJson()) {
            sendError(conn.fd, why, deadline);
        }
        return false;
    }
    Json::Value reply(Json::objectValue);
    s = op.handler(conn.peer, request, reply);
    if (!s.ok()) {
        reply = makeErrorReply(s.ToString());
    } else {
        reply["status"] = "ok";
    }
    Status w = writeFrame(conn.fd, encodeJson(reply), deadline);
    if (!w.ok()) {
        LOG(WARNING) << "RpcServer: cannot reply to " << conn.peer << ": "
                     << w.message();
        return false;
    }
    return true;
}

}  // namespace mooncake::tent
