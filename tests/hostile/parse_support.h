// Hostile inputs for the parser suites (parse_*_test.cpp): JSON nested far
// past rpc/max_json_depth, descriptors with huge buffer counts, framing and
// a fake peer that answers GetSegmentDesc with whatever it is given.
#pragma once

#include <arpa/inet.h>
#include <malloc.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <string>
#include <thread>

#include "kit/hostile_peer_support.h"
#include "rpc/rpc_frame.h"

namespace mooncake::tent::testing {

// The probe's nesting: 1,002 '[' (a 1,006-byte frame).
constexpr size_t kProbeDepth = 1002;

// The frame header (version 1, then the length) and `payload`: one frame
// as the RPC reads it.
inline std::string frameOf(const std::string& payload) {
    std::string frame(1, '\1');
    const uint32_t n = static_cast<uint32_t>(payload.size());
    frame.push_back(static_cast<char>(n >> 24));
    frame.push_back(static_cast<char>(n >> 16));
    frame.push_back(static_cast<char>(n >> 8));
    frame.push_back(static_cast<char>(n));
    return frame + payload;
}

// {"name":"<name>","type":"memory","buffers":[...]} with `count` buffers
// of 4 KiB, 8 KiB apart, as segmentToJson writes them (~70 bytes each).
inline std::string descriptorWithBuffers(const std::string& name,
                                         size_t count) {
    std::string text = "{\"name\":\"" + name +
                       "\",\"type\":\"memory\",\"machine_id\":\"x\","
                       "\"buffers\":[";
    text.reserve(text.size() + count * 48);
    for (size_t i = 0; i < count; ++i) {
        if (i) text += ',';
        text += "{\"addr\":" + std::to_string((i + 1) << 13) +
                ",\"length\":4096,\"location\":\"cpu:0\","
                "\"transports\":[0]}";
    }
    return text + "]}";
}

// Bytes malloc holds in use (not what it keeps cached after a free).
inline uint64_t heapInUse() { return mallinfo2().uordblks; }

// A fake peer on a loopback port: answers the first request on each of
// `connections` connections with the frame payload `reply` (with `raw`,
// the bytes of `reply` as they are, header and all), then closes.
class FakePeer {
 public:
    FakePeer(std::string reply, int connections, bool raw = false)
        : reply_(std::move(reply)), connections_(connections), raw_(raw) {
        fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in addr{};
        addr.sin_family = AF_INET;
        addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)),
                  0);
        EXPECT_EQ(::listen(fd_, 8), 0);
        socklen_t len = sizeof(addr);
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
        port_ = ntohs(addr.sin_port);
        thread_ = std::thread([this] { serve(); });
    }
    ~FakePeer() {
        ::shutdown(fd_, SHUT_RDWR);
        thread_.join();
        ::close(fd_);
    }
    std::string name() const { return "127.0.0.1:" + std::to_string(port_); }
    int served() const { return served_; }

 private:
    void serve() {
        for (int i = 0; i < connections_; ++i) {
            int conn = ::accept(fd_, nullptr, nullptr);
            if (conn < 0) return;
            std::string request;
            if (readFrame(conn, request, kHostileBoundMs, 1u << 20).ok() &&
                (raw_ ? rawSend(conn, reply_)
                      : writeFrame(conn, reply_, kHostileBoundMs).ok())) {
                ++served_;
            }
            ::close(conn);
        }
    }

    const std::string reply_;
    const int connections_;
    const bool raw_;
    int fd_ = -1;
    uint16_t port_ = 0;
    std::atomic<int> served_{0};
    std::thread thread_;
};

}  // namespace mooncake::tent::testing
