// The RPC server's request path: bytes arrive on a socket (a socketpair,
// written whole and shut), are split into frames by readFrame() under the
// server's request cap (a frame of another version than kRpcFrameVersion
// ends the stream, as it closes a connection), and each frame goes through
// parseRequest() as on a connection thread. Nothing may read past what
// arrived or allocate more than the cap, and every frame accepted began
// with the version byte.
#include <sys/socket.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "rpc/rpc_frame.h"
#include "rpc/rpc_server.h"
#include "tent/runtime/control_plane.h"

namespace {

mooncake::tent::RpcServer& server() {
    // Registered like ControlService does; never started.
    static auto* s = [] {
        auto* srv = new mooncake::tent::RpcServer();
        srv->registerHandler(mooncake::tent::kOpGetSegmentDesc,
                             mooncake::tent::ControlService::kMaxRequestSize,
                             [](const Json::Value&, Json::Value&) {
                                 return mooncake::tent::Status::OK();
                             });
        return srv;
    }();
    return *s;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace mooncake::tent;
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
        std::abort();
    }
    // Inputs stay far below the socket buffer, so this never blocks.
    if (size > 0 &&
        ::send(sv[1], data, size, MSG_NOSIGNAL) != static_cast<ssize_t>(size)) {
        std::abort();
    }
    ::shutdown(sv[1], SHUT_WR);
    const uint32_t cap = server().maxRequestBytes();
    size_t offset = 0;  // where the next frame begins in `data`
    for (;;) {
        std::string payload;
        Status s = readFrame(sv[0], payload, 1000, cap);
        if (!s.ok() || payload.empty()) break;
        if (payload.size() > cap) std::abort();
        if (data[offset] != kRpcFrameVersion) std::abort();
        offset += kFrameHeaderBytes + payload.size();
        Json::Value request;
        RpcServer::Handler handler;
        if (!server().parseRequest(payload, request, handler).ok()) break;
        if (!handler || request["op"].asString() != kOpGetSegmentDesc) {
            std::abort();
        }
    }
    ::close(sv[0]);
    ::close(sv[1]);
    return 0;
}
