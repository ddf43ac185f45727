// The call gate's slow side: closing, and waking the closer.
#include "mpcomm_call_gate.h"

namespace mooncake::tent {

void MpcommCallGate::notifyDrained() {
    std::lock_guard<std::mutex> lock(mu_);
    drained_.notify_all();
}

void MpcommCallGate::close() {
    closed_.store(true);
    std::unique_lock<std::mutex> lock(mu_);
    drained_.wait(lock, [this] { return active_.load() == 0; });
}

void MpcommCallGate::open() { closed_.store(false); }

}  // namespace mooncake::tent
