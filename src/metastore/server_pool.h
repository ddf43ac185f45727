// The servers of a metadata store seen from its client: the order to try
// them in (the one that answered last first) and the idle connections to
// each, kept between calls so that a store does not connect anew for every
// command. The etcd and redis stores share it; the handle type and how to
// close one are theirs. Their watches share the order in which they try
// the servers again after a subscription broke (rotateWatchServers).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <mutex>
#include <vector>

#include "tent/common/status.h"

namespace mooncake::tent {

template <typename Handle, void (*Close)(Handle)>
class ServerPool {
 public:
    // Idle connections kept per server; more concurrent callers connect
    // anew.
    static constexpr size_t kMaxIdlePerServer = 8;

    explicit ServerPool(size_t servers) : idle_(servers) {}
    ~ServerPool() {
        for (auto& list : idle_) {
            for (Handle handle : list) Close(handle);
        }
    }
    ServerPool(const ServerPool&) = delete;
    ServerPool& operator=(const ServerPool&) = delete;

    // Calls `attempt(server, next)` for each server in turn, starting from
    // the one that answered last, and returns its status; an attempt that
    // sets `next` (the server did not answer) passes on to the following
    // server, and the last of those statuses is the answer when none is
    // left.
    template <typename Attempt>
    Status inTurn(Attempt&& attempt) {
        const size_t first = preferred_.load(std::memory_order_relaxed);
        Status last;
        for (size_t n = 0; n < idle_.size(); ++n) {
            bool next = false;
            last = attempt((first + n) % idle_.size(), next);
            if (!next) return last;
        }
        return last;
    }

    // An idle connection to `server`, or nullptr where there is none.
    Handle take(size_t server) {
        std::lock_guard<std::mutex> lock(mu_);
        if (idle_[server].empty()) return nullptr;
        Handle handle = idle_[server].back();
        idle_[server].pop_back();
        return handle;
    }

    // `server` answered on `handle`: keeps the handle for the next caller
    // (or closes it when `server` has enough idle ones), and tries `server`
    // first next time.
    void answered(size_t server, Handle handle) {
        preferred_.store(server, std::memory_order_relaxed);
        {
            std::lock_guard<std::mutex> lock(mu_);
            if (idle_[server].size() < kMaxIdlePerServer) {
                idle_[server].push_back(handle);
                return;
            }
        }
        Close(handle);
    }

 private:
    std::atomic<size_t> preferred_{0};
    std::mutex mu_;  // guards idle_; never held across a call
    std::vector<std::vector<Handle>> idle_;
};

// A store watch's life: `serve(server)` holds one subscription on that
// server until it breaks and returns whether it was established; the next
// server is then tried after a wait that starts at 100 ms and doubles after
// each attempt that established nothing, up to `max_backoff_ms`. Ends when
// `wait_stop(ms)` (the wait, cut short by a stop) or `stopping()` says so.
template <typename Serve, typename WaitStop, typename Stopping>
void rotateWatchServers(size_t servers, int max_backoff_ms, Serve&& serve,
                        WaitStop&& wait_stop, Stopping&& stopping) {
    constexpr int kFirstBackoffMs = 100;
    int backoff_ms = kFirstBackoffMs;
    size_t server = 0;
    while (!stopping()) {
        const bool established = serve(server);
        if (stopping()) break;
        if (established) backoff_ms = kFirstBackoffMs;
        server = (server + 1) % servers;
        if (wait_stop(backoff_ms)) break;
        backoff_ms =
            std::min(backoff_ms * 2, std::max(max_backoff_ms, kFirstBackoffMs));
    }
}

}  // namespace mooncake::tent
