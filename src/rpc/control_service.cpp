#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "rpc/rpc_frame.h"
#include "rpc/rpc_server.h"
#include "tent/runtime/control_plane.h"

namespace mooncake::tent {

ControlService::ControlService(std::shared_ptr<SegmentManager> manager)
    : manager_(std::move(manager)),
      server_(std::make_unique<RpcServer>(kMaxFrameSize)) {
    SegmentManager* segments = manager_.get();
    server_->registerHandler(
        kOpGetSegmentDesc, [segments](const Json::Value&, Json::Value& reply) {
            SegmentDescRef desc = segments ? segments->getLocal() : nullptr;
            if (!desc) {
                return Status::MetadataError("no local segment is published");
            }
            reply["segment"] = segmentToJson(*desc);
            return Status::OK();
        });
}

ControlService::~ControlService() { stop(); }

Status ControlService::start(uint16_t port) {
    return server_->start(port, kPortRangeBegin, kPortRangeEnd);
}

void ControlService::stop() { server_->stop(); }

uint16_t ControlService::port() const { return server_->port(); }

namespace {

using Clock = std::chrono::steady_clock;

// "host:port" with a non-empty host and a decimal port in 1..65535.
Status parseSegmentName(const std::string& name, std::string& host,
                        uint16_t& port) {
    size_t colon = name.rfind(':');
    if (colon == std::string::npos || colon == 0) {
        return Status::InvalidArgument("invalid segment name \"" + name +
                                       "\": expected host:port");
    }
    std::string port_text = name.substr(colon + 1);
    bool digits = !port_text.empty() && port_text.size() <= 5;
    for (char c : port_text) digits = digits && c >= '0' && c <= '9';
    unsigned long value = digits ? std::stoul(port_text) : 0;
    if (!digits || value == 0 || value > 65535) {
        return Status::InvalidArgument("invalid segment name \"" + name +
                                       "\": port \"" + port_text +
                                       "\" is not in 1..65535");
    }
    host = name.substr(0, colon);
    port = static_cast<uint16_t>(value);
    return Status::OK();
}

// Non-blocking connect bounded by the deadline; returns the connected fd.
Status connectTo(const std::string& host, uint16_t port,
                 Clock::time_point deadline, int& fd_out) {
    addrinfo hints{};
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* result = nullptr;
    int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints,
                           &result);
    if (rc != 0 || !result) {
        return Status::RpcServiceError("cannot resolve host \"" + host +
                                       "\": " + gai_strerror(rc));
    }
    sockaddr_in addr;
    std::memcpy(&addr, result->ai_addr, sizeof(addr));
    ::freeaddrinfo(result);

    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
        return Status::RpcServiceError(std::string("socket() failed: ") +
                                       std::strerror(errno));
    }
    rc = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    int err = rc == 0 ? 0 : errno;
    if (err == EINPROGRESS) {
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                        deadline - Clock::now())
                        .count();
        pollfd pfd{fd, POLLOUT, 0};
        do {
            rc = ::poll(&pfd, 1, left > 0 ? static_cast<int>(left) : 0);
        } while (rc < 0 && errno == EINTR);
        if (rc == 0) {
            ::close(fd);
            return Status::RpcServiceError("connect timed out");
        }
        socklen_t len = sizeof(err);
        if (rc < 0) {
            err = errno;
        } else if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) {
            err = errno;
        }
    }
    if (err != 0) {
        ::close(fd);
        return Status::RpcServiceError(std::string("connect failed: ") +
                                       std::strerror(err));
    }
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    fd_out = fd;
    return Status::OK();
}

Status requestSegment(int fd, int timeout_ms, SegmentDesc& out) {
    Json::Value request(Json::objectValue);
    request["op"] = kOpGetSegmentDesc;
    CHECK_STATUS(writeFrame(fd, encodeJson(request), timeout_ms));
    std::string payload;
    CHECK_STATUS(
        readFrame(fd, payload, timeout_ms, ControlService::kMaxFrameSize));
    if (payload.empty()) {
        return Status::RpcServiceError(
            "peer closed the connection before "
            "replying to GetSegmentDesc");
    }
    Json::Value reply;
    CHECK_STATUS(decodeJsonObject(payload, reply));
    const Json::Value& status = reply["status"];
    if (status.isString() && status.asString() == "error") {
        std::string message = reply["message"].isString()
                                  ? reply["message"].asString()
                                  : "(no message)";
        return Status::RpcServiceError("peer refused GetSegmentDesc: " +
                                       message);
    }
    if (!status.isString() || status.asString() != "ok") {
        return Status::RpcServiceError(
            "reply has no \"status\" of \"ok\" or \"error\"");
    }
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
    CHECK_STATUS(parseSegmentName(segment_name, host, port));
    auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms_);
    int fd = -1;
    Status s = connectTo(host, port, deadline, fd);
    if (s.ok()) {
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                        deadline - Clock::now())
                        .count();
        // The request and the reply share what is left of the budget.
        s = left > 0 ? requestSegment(fd, static_cast<int>(left), out)
                     : Status::RpcServiceError("no time left after connect");
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
