#include "peer_link.h"

#include <utility>

namespace mpcomm {
namespace detail {

PeerLink::PeerLink(size_t connections, uint32_t slots)
    : slots_(slots), busy_(connections, 0) {}

int PeerLink::place(WaitingSlice* slice) {
    int reason;
    {
        std::lock_guard<std::mutex> lock(mu_);
        if (!failed_.load(std::memory_order_relaxed)) {
            // Waiting slices go first; otherwise the least busy connection,
            // the search starting one further each time so that an idle
            // peer's slices still spread over every connection.
            if (waiting_.empty() && !busy_.empty()) {
                size_t best = busy_.size();
                for (size_t k = 0; k < busy_.size(); ++k) {
                    size_t i = (next_ + k) % busy_.size();
                    if (busy_[i] < slots_ &&
                        (best == busy_.size() || busy_[i] < busy_[best]))
                        best = i;
                }
                if (best != busy_.size()) {
                    next_ = (best + 1) % busy_.size();
                    ++busy_[best];
                    return static_cast<int>(best);
                }
            }
            waiting_.push_back(std::move(*slice));
            return -1;
        }
        reason = reason_;
    }
    WaitingSlice failed = std::move(*slice);
    failed.transfer->sliceDone(reason);
    return -1;
}

bool PeerLink::takeNext(size_t index, WaitingSlice* next) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!waiting_.empty() && !failed_.load(std::memory_order_relaxed)) {
        *next = std::move(waiting_.front());
        waiting_.pop_front();
        return true;
    }
    if (index < busy_.size() && busy_[index] > 0) --busy_[index];
    return false;
}

void PeerLink::fail(int reason) {
    std::deque<WaitingSlice> orphans;
    {
        std::lock_guard<std::mutex> lock(mu_);
        if (failed_.load(std::memory_order_relaxed)) return;
        reason_ = reason;
        failed_.store(true, std::memory_order_release);
        orphans.swap(waiting_);
    }
    for (WaitingSlice& slice : orphans) slice.transfer->sliceDone(reason);
}

}  // namespace detail
}  // namespace mpcomm
