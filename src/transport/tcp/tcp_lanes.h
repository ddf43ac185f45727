// TcpLanePool: the TCP initiator's persistent connections ("lanes"), pooled
// per peer endpoint and shared by every worker of one TcpTransport
// (private to it).
//
// A worker borrows a lane for one slice (one frame and its reply) and
// gives it back, so frames never interleave on a lane. A peer has at most
// `transports/tcp/lanes_per_peer` lanes, whatever the number of workers:
// an engine holds at most lanes_per_peer sockets per peer it talks to.
// When all of a peer's lanes are borrowed, a worker waits for one; the
// wait fails only when no lane of that peer came back for `wait_ms`
// (transports/tcp/timeout_ms), i.e. when the peer stopped making progress,
// not when it is merely busy. A lane idle for `idle_ms`
// (transports/tcp/idle_timeout_ms, the same bound the target closes idle
// connections by) is closed.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tent/common/status.h"

namespace mooncake::tent {

class TcpLanePool {
 public:
    // Closes a socket the pool gives up (the transport untracks it first).
    using Closer = std::function<void(int fd)>;

    TcpLanePool(int lanes_per_peer, int idle_ms, Closer closer);
    ~TcpLanePool();
    TcpLanePool(const TcpLanePool&) = delete;
    TcpLanePool& operator=(const TcpLanePool&) = delete;

    // What borrow() hands out: an idle lane (fd >= 0, pooled: it may have
    // gone stale since its last use), or the right to dial a new one
    // (fd == -1), which the caller settles with dialed() or dialFailed().
    struct Lane {
        int fd = -1;
        bool pooled = false;
    };
    // A lane to `endpoint`, waiting while all of its lanes are borrowed;
    // the idle lane `preferred` when it is one (the lane this worker used
    // last: its socket's state is warm in this thread's cache and CPU).
    // Fails naming transports/tcp/lanes_per_peer when none came back for
    // `wait_ms`, and once shutdown() was called.
    Status borrow(const std::string& endpoint, int wait_ms, Lane& lane,
                  int preferred = -1);
    // The dial borrow() granted failed: its place is free again.
    void dialFailed(const std::string& endpoint);
    // Returns a borrowed (or newly dialled) lane. A lane that is not
    // `reusable` (I/O error, out of step) is closed, and so are the
    // peer's idle lanes: they share the peer's fate (a restarted peer left
    // them all stale), and the next slice dials afresh.
    void giveBack(const std::string& endpoint, int fd, bool reusable);

    // Wakes every waiting borrow() and refuses new ones (uninstall).
    void shutdown();
    // Closes every idle lane; the caller made sure none is borrowed.
    void closeAll();

    // Lanes open now (idle, borrowed or being dialled), over all peers.
    size_t open() const;
    // The most lanes one peer had open at once since the pool was made.
    int peak() const;

 private:
    using Clock = std::chrono::steady_clock;
    struct Peer {
        std::vector<std::pair<int, Clock::time_point>> idle;  // LIFO
        int open = 0;
        uint64_t returns = 0;  // lanes given back: the peer's progress
        int waiters = 0;
    };
    // Moves the idle lanes of `peer` idle longer than idle_ms_ (all of them
    // when `all`) to `out`; the caller holds mu_.
    void takeIdle(Peer& peer, Clock::time_point now, bool all,
                  std::vector<int>& out);
    // Drops expired idle lanes of every peer and forgets peers with none
    // open, at most once a second; the caller holds mu_.
    void sweep(Clock::time_point now, std::vector<int>& out);
    void closeAllOf(const std::vector<int>& fds);

    const int lanes_per_peer_;
    const std::chrono::milliseconds idle_;
    const Closer closer_;

    mutable std::mutex mu_;
    std::condition_variable cv_;
    std::unordered_map<std::string, Peer> peers_;
    bool stopping_ = false;
    size_t open_ = 0;
    int peak_ = 0;
    Clock::time_point last_sweep_;
};

}  // namespace mooncake::tent
