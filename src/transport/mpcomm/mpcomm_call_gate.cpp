// Who may be inside the MPComm adapter: data-path calls enter and leave
// concurrently; uninstall() closes the gate and waits for them to leave.
#include "tent/transport/mpcomm/mpcomm_transport.h"

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
