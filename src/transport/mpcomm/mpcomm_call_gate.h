// Who may be inside the MPComm adapter (private to the transport):
// data-path calls enter and leave concurrently; uninstall() closes the gate
// and waits for them to leave before the provider is shut down.
#pragma once

#include <atomic>
#include <condition_variable>
#include <mutex>

namespace mooncake::tent {

// Lets data-path calls into the adapter run concurrently and lets
// uninstall() wait until none is inside before shutting the adapter down.
class MpcommCallGate {
 public:
    // False once closed: the caller must not touch the adapter. Inline:
    // a request passes the gate on submit and on poll, and a call into
    // the library for each pass cost as much as the atomics themselves.
    // Both sides are sequentially consistent: a caller counts itself in
    // before it reads `closed_`, close() sets `closed_` before it reads
    // the count, so one of them always sees the other.
    bool enter() {
        active_.fetch_add(1);
        if (closed_.load()) {
            leave();
            return false;
        }
        return true;
    }
    void leave() {
        if (active_.fetch_sub(1) == 1 && closed_.load()) notifyDrained();
    }
    // Refuses new callers and waits for the ones inside to leave.
    void close();
    void open();

 private:
    void notifyDrained();

    std::atomic<bool> closed_{true};
    std::atomic<int> active_{0};
    std::mutex mu_;
    std::condition_variable drained_;
};

// Leaves the call gate on scope exit.
class MpcommGateTicket {
 public:
    explicit MpcommGateTicket(MpcommCallGate& gate) : gate_(gate) {}
    ~MpcommGateTicket() { gate_.leave(); }
    MpcommGateTicket(const MpcommGateTicket&) = delete;
    MpcommGateTicket& operator=(const MpcommGateTicket&) = delete;

 private:
    MpcommCallGate& gate_;
};

}  // namespace mooncake::tent
