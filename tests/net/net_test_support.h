// Shared pieces of the src/net suites (net_test.cpp, net_server_test.cpp):
// loopback clients, an echo StreamServer, and the send buffer a socket
// gets.
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <functional>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "kit/wait_until.h"
#include "net/socket_io.h"
#include "net/stream_server.h"

namespace mooncake::tent::net {

// Far above anything these cases need; it only turns a hang into a failure.
constexpr int kBoundMs = 20000;

inline int connectLoopback(uint16_t port) {
    int fd = -1;
    Status s = connectTo("127.0.0.1", port, deadlineIn(kBoundMs), fd);
    EXPECT_TRUE(s.ok()) << s;
    return fd;
}

// Sends `byte` and reads the echo; "" when the server closed instead.
inline std::string roundTrip(int fd, char byte) {
    if (!sendAll(fd, &byte, 1, deadlineIn(kBoundMs)).ok()) return "";
    char back = 0;
    if (!recvAll(fd, &back, 1, deadlineIn(kBoundMs)).ok()) return "";
    return std::string(1, back);
}

// True when the server closed `fd`: the next read sees end of stream or a
// reset, within the bound.
inline bool closedByServer(int fd) {
    char byte;
    size_t got = 0;
    bool closed = false;
    Status s = recvAll(fd, &byte, 1, deadlineIn(kBoundMs), &got, &closed);
    return closed || s.message() == "recv failed: Connection reset by peer";
}

// A StreamServer whose requests are one byte, echoed, except two:
//   'w'  the handler waits until release() (keeps its connection busy
//        without reading);
//   'l'  a 4-byte request ('l' and three more), answered with its last
//        byte: a request a client can send slowly.
class EchoServer {
 public:
    explicit EchoServer(ServerLimits limits,
                        StreamServer::IdleHook idle_hook = nullptr) {
        limits.key_prefix = "test";
        server_ = std::make_unique<StreamServer>(
            "EchoServer",
            [this](const StreamServer::Connection& c, Deadline deadline) {
                char byte;
                if (!recvAll(c.fd, &byte, 1, deadline).ok()) return false;
                char rest[3];
                if (byte == 'l') {
                    if (!recvAll(c.fd, rest, 3, deadline).ok()) return false;
                    byte = rest[2];
                }
                if (byte == 'w') {
                    std::unique_lock<std::mutex> lock(mu_);
                    ++waiting_;
                    cv_.notify_all();
                    cv_.wait_until(lock, deadline, [&] { return released_; });
                }
                return sendAll(c.fd, &byte, 1, deadline).ok();
            });
        if (idle_hook) server_->setIdleHookForTest(std::move(idle_hook));
        int fd = -1;
        EXPECT_TRUE(listenOn(0, fd, port_).ok());
        EXPECT_TRUE(server_->start(fd, limits).ok());
    }
    ~EchoServer() {
        release();
        server_->stop();
    }
    uint16_t port() const { return port_; }
    StreamServer& server() { return *server_; }
    void release() {
        std::lock_guard<std::mutex> lock(mu_);
        released_ = true;
        cv_.notify_all();
    }
    bool waitForWaiters(int n) {
        std::unique_lock<std::mutex> lock(mu_);
        return cv_.wait_for(lock, std::chrono::milliseconds(kBoundMs),
                            [&] { return waiting_ >= n; });
    }
    // Polls the stats until `pred` holds: the server offers no event for
    // these counters, and the bound turns a miss into a failure.
    template <typename Pred>
    bool waitForStats(Pred pred) {
        return testing::waitUntil([&] { return pred(server_->stats()); },
                                  std::chrono::milliseconds(kBoundMs));
    }

 private:
    std::unique_ptr<StreamServer> server_;
    uint16_t port_ = 0;
    std::mutex mu_;
    std::condition_variable cv_;
    bool released_ = false;
    int waiting_ = 0;
};

// What getsockopt(SO_SNDBUF) reads after setSendBuffer(bytes): the kernel
// clamps the request to net.core.wmem_max and doubles it.
inline int expectedSendBuffer(int bytes) {
    FILE* f = std::fopen("/proc/sys/net/core/wmem_max", "r");
    long wmem_max = 0;
    if (f != nullptr) {
        if (std::fscanf(f, "%ld", &wmem_max) != 1) wmem_max = 0;
        std::fclose(f);
    }
    EXPECT_GT(wmem_max, 0) << "cannot read net.core.wmem_max";
    return 2 * static_cast<int>(std::min<long>(bytes, wmem_max));
}

inline int sendBufferOf(int fd) {
    int value = 0;
    socklen_t len = sizeof(value);
    EXPECT_EQ(::getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &value, &len), 0);
    return value;
}

}  // namespace mooncake::tent::net
