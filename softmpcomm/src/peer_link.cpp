#include "peer_link.h"

#include <algorithm>
#include <utility>

namespace mpcomm {
namespace detail {

PeerLink::PeerLink(size_t connections, uint32_t slots, uint64_t put_budget)
    : slots_(slots), put_budget_(put_budget), load_(connections) {}

bool PeerLink::fits(const Load& load, const WaitingSlice& slice) const {
    if (load.slices >= slots_) return false;
    // A PUT larger than the budget never goes out whole, whatever the
    // connection carries, so only the slot count bounds it.
    if (load.slices == 0 || slice.is_get || put_budget_ == 0 ||
        slice.length > put_budget_)
        return true;
    return load.put_bytes + slice.length <= put_budget_;
}

void PeerLink::take(Load& load, const WaitingSlice& slice) {
    ++load.slices;
    if (!slice.is_get) load.put_bytes += slice.length;
}

int PeerLink::place(WaitingSlice* slice) {
    int reason;
    {
        std::lock_guard<std::mutex> lock(mu_);
        if (!failed_.load(std::memory_order_relaxed)) {
            // Waiting slices go first; otherwise the least busy connection
            // with room, the search starting one further each time so that
            // an idle peer's slices still spread over every connection.
            if (waiting_.empty() && !load_.empty()) {
                const size_t n = load_.size();
                size_t best = n;
                for (size_t k = 0; k < n; ++k) {
                    size_t i = (next_ + k) % n;
                    if (fits(load_[i], *slice) &&
                        (best == n || load_[i].slices < load_[best].slices))
                        best = i;
                }
                if (best != n) {
                    next_ = (best + 1) % n;
                    take(load_[best], *slice);
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

bool PeerLink::takeNext(size_t index, bool finished_get,
                        uint64_t finished_length, WaitingSlice* next) {
    std::lock_guard<std::mutex> lock(mu_);
    if (index >= load_.size()) return false;
    Load& load = load_[index];
    if (load.slices > 0) --load.slices;
    if (!finished_get)
        load.put_bytes -= std::min(load.put_bytes, finished_length);
    if (waiting_.empty() || failed_.load(std::memory_order_relaxed) ||
        !fits(load, waiting_.front()))
        return false;
    *next = std::move(waiting_.front());
    waiting_.pop_front();
    take(load, *next);
    return true;
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
