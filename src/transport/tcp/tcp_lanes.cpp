#include "transport/tcp/tcp_lanes.h"

#include <algorithm>

namespace mooncake::tent {

namespace {

// How often borrow() looks at every peer's idle lanes, not only its own:
// a peer nobody sends to any more still has its lanes closed.
constexpr std::chrono::seconds kSweepEvery{1};

}  // namespace

TcpLanePool::TcpLanePool(int lanes_per_peer, int idle_ms, Closer closer)
    : lanes_per_peer_(lanes_per_peer),
      idle_(idle_ms),
      closer_(std::move(closer)),
      last_sweep_(Clock::now()) {}

TcpLanePool::~TcpLanePool() { closeAll(); }

void TcpLanePool::takeIdle(Peer& peer, Clock::time_point now, bool all,
                           std::vector<int>& out) {
    // The idle list is LIFO: the oldest lanes are at the front.
    size_t n = 0;
    while (n < peer.idle.size() &&
           (all || now - peer.idle[n].second >= idle_)) {
        out.push_back(peer.idle[n].first);
        ++n;
    }
    peer.idle.erase(peer.idle.begin(), peer.idle.begin() + n);
    peer.open -= static_cast<int>(n);
    open_ -= n;
}

void TcpLanePool::sweep(Clock::time_point now, std::vector<int>& out) {
    if (now - last_sweep_ < kSweepEvery) return;
    last_sweep_ = now;
    for (auto it = peers_.begin(); it != peers_.end();) {
        takeIdle(it->second, now, false, out);
        // A peer is only forgotten with nothing open and nobody waiting
        // on it, so no borrow() holds a reference to it.
        if (it->second.open == 0 && it->second.waiters == 0) {
            it = peers_.erase(it);
        } else {
            ++it;
        }
    }
}

void TcpLanePool::closeAllOf(const std::vector<int>& fds) {
    for (int fd : fds) closer_(fd);
}

Status TcpLanePool::borrow(const std::string& endpoint, int wait_ms, Lane& lane,
                           int preferred) {
    std::vector<int> expired;
    Status result;
    {
        std::unique_lock<std::mutex> lock(mu_);
        Clock::time_point now = Clock::now();
        sweep(now, expired);
        Peer& peer = peers_[endpoint];
        takeIdle(peer, now, false, expired);
        const std::chrono::milliseconds wait(wait_ms);
        Clock::time_point deadline = now + wait;
        uint64_t seen = peer.returns;
        for (;;) {
            if (stopping_) {
                result = Status::InternalError("tcp transport uninstalled");
                break;
            }
            if (!peer.idle.empty()) {
                // Otherwise the most recently used: the idle list is short
                // (at most lanes_per_peer), so the search is too.
                size_t pick = peer.idle.size() - 1;
                for (size_t i = 0; i < peer.idle.size(); ++i) {
                    if (peer.idle[i].first == preferred) pick = i;
                }
                lane.fd = peer.idle[pick].first;
                lane.pooled = true;
                peer.idle.erase(peer.idle.begin() + pick);
                break;
            }
            if (peer.open < lanes_per_peer_) {
                ++peer.open;
                ++open_;
                peak_ = std::max(peak_, peer.open);
                lane.fd = -1;
                lane.pooled = false;
                break;
            }
            // Every lane is busy. A lane that came back (to someone else)
            // shows the peer is moving: the bound restarts.
            if (peer.returns != seen) {
                seen = peer.returns;
                deadline = Clock::now() + wait;
            }
            ++peer.waiters;
            const bool timed_out =
                cv_.wait_until(lock, deadline) == std::cv_status::timeout;
            --peer.waiters;
            if (timed_out && peer.returns == seen && !stopping_ &&
                peer.idle.empty() && peer.open >= lanes_per_peer_) {
                result = Status::InternalError(
                    "no lane to " + endpoint +
                    " came free within transports/tcp/timeout_ms=" +
                    std::to_string(wait_ms) + " ms (all " +
                    std::to_string(lanes_per_peer_) +
                    " of transports/tcp/lanes_per_peer busy)");
                break;
            }
        }
    }
    closeAllOf(expired);
    return result;
}

void TcpLanePool::dialFailed(const std::string& endpoint) {
    {
        std::lock_guard<std::mutex> lock(mu_);
        Peer& peer = peers_[endpoint];
        --peer.open;
        --open_;
    }
    cv_.notify_all();
}

void TcpLanePool::giveBack(const std::string& endpoint, int fd, bool reusable) {
    std::vector<int> closing;
    {
        std::lock_guard<std::mutex> lock(mu_);
        Peer& peer = peers_[endpoint];
        ++peer.returns;
        if (reusable && !stopping_) {
            peer.idle.emplace_back(fd, Clock::now());
        } else {
            closing.push_back(fd);
            --peer.open;
            --open_;
            if (!reusable) takeIdle(peer, Clock::now(), true, closing);
        }
    }
    // Waiters of other peers wake too and wait again: one condition for
    // all keeps giveBack() cheap, and few workers ever wait.
    cv_.notify_all();
    closeAllOf(closing);
}

void TcpLanePool::shutdown() {
    {
        std::lock_guard<std::mutex> lock(mu_);
        stopping_ = true;
    }
    cv_.notify_all();
}

void TcpLanePool::closeAll() {
    std::vector<int> closing;
    {
        std::lock_guard<std::mutex> lock(mu_);
        const Clock::time_point now = Clock::now();
        for (auto& entry : peers_) takeIdle(entry.second, now, true, closing);
        peers_.clear();
    }
    closeAllOf(closing);
}

size_t TcpLanePool::open() const {
    std::lock_guard<std::mutex> lock(mu_);
    return open_;
}

int TcpLanePool::peak() const {
    std::lock_guard<std::mutex> lock(mu_);
    return peak_;
}

}  // namespace mooncake::tent
