// FakeTcpPeer: a TCP target written by hand for the TCP suites that script
// what the peer answers (tcp_slice_test.cpp, tcp_admission_test.cpp). It
// listens on an ephemeral loopback port and serves each accepted connection
// on a thread of its own with the subclass's serve(); stop() ends them all.
#pragma once

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "net/socket_io.h"

namespace mooncake::tent::testing {

class FakeTcpPeer {
 public:
    FakeTcpPeer() { EXPECT_TRUE(net::listenOn(0, listen_fd_, port_).ok()); }
    virtual ~FakeTcpPeer() { stop(); }
    FakeTcpPeer(const FakeTcpPeer&) = delete;
    FakeTcpPeer& operator=(const FakeTcpPeer&) = delete;

    std::string endpoint() const {
        return "127.0.0.1:" + std::to_string(port_);
    }
    size_t connections() {
        std::lock_guard<std::mutex> lock(mu_);
        return fds_.size();
    }

 protected:
    // Frames of connection number `index` until it ends or the peer stops
    // (stopping_, under mu_); returning closes nothing, the peer's stop()
    // does.
    virtual void serve(int fd, int index) = 0;

    // The subclass's constructor calls it last: serve() may run from then on.
    void start() {
        acceptor_ = std::thread([this] { acceptLoop(); });
    }
    // The subclass's destructor calls it first, while what serve() uses is
    // still alive. Idempotent.
    void stop() {
        {
            std::lock_guard<std::mutex> lock(mu_);
            if (stopped_) return;
            stopped_ = stopping_ = true;
            for (int fd : fds_) ::shutdown(fd, SHUT_RDWR);
        }
        cv_.notify_all();
        // Wakes the blocked accept().
        ::shutdown(listen_fd_, SHUT_RDWR);
        if (acceptor_.joinable()) acceptor_.join();
        for (std::thread& t : handlers_) t.join();
        for (int fd : fds_) ::close(fd);
        ::close(listen_fd_);
    }

    std::mutex mu_;
    std::condition_variable cv_;
    bool stopping_ = false;  // under mu_

 private:
    void acceptLoop() {
        for (;;) {
            int fd = ::accept(listen_fd_, nullptr, nullptr);
            if (fd < 0) return;
            std::lock_guard<std::mutex> lock(mu_);
            if (stopping_) {
                ::close(fd);
                return;
            }
            const int index = static_cast<int>(fds_.size());
            fds_.push_back(fd);
            handlers_.emplace_back([this, fd, index] { serve(fd, index); });
        }
    }

    int listen_fd_ = -1;
    uint16_t port_ = 0;
    bool stopped_ = false;  // under mu_
    std::vector<int> fds_;
    std::vector<std::thread> handlers_;
    std::thread acceptor_;
};

}  // namespace mooncake::tent::testing
