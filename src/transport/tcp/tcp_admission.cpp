#include "transport/tcp/tcp_admission.h"

#include <atomic>
#include <string>

namespace mooncake::tent {

namespace {

std::atomic<uint64_t> g_tasks{0};
std::atomic<uint64_t> g_bytes{0};

// Adds `n` to `count` unless that passes `limit`; false (and nothing
// added) when it would. A compare-and-swap, not an add and an undo, so a
// submit that does not fit never makes a concurrent one that does fit
// look over the limit.
bool reserve(std::atomic<uint64_t>& count, uint64_t n, uint64_t limit,
             uint64_t& seen) {
    seen = count.load(std::memory_order_relaxed);
    do {
        if (n > limit || seen > limit - n) return false;
    } while (!count.compare_exchange_weak(seen, seen + n,
                                          std::memory_order_relaxed));
    return true;
}

Status refuse(const char* key, int64_t limit, uint64_t inflight,
              const char* unit, uint64_t asked) {
    return Status::TooManyRequests(std::string("transports/tcp/") + key + "=" +
                                   std::to_string(limit) +
                                   " reached: " + std::to_string(inflight) +
                                   " " + unit + " in flight in this process, " +
                                   std::to_string(asked) + " more submitted");
}

}  // namespace

Status TcpAdmission::admit(uint64_t tasks, uint64_t bytes,
                           const Limits& limits) {
    uint64_t seen = 0;
    if (!reserve(g_tasks, tasks, static_cast<uint64_t>(limits.max_tasks),
                 seen)) {
        return refuse("max_inflight_tasks", limits.max_tasks, seen, "tasks",
                      tasks);
    }
    if (!reserve(g_bytes, bytes, static_cast<uint64_t>(limits.max_bytes),
                 seen)) {
        g_tasks.fetch_sub(tasks, std::memory_order_relaxed);
        return refuse("max_inflight_bytes", limits.max_bytes, seen, "bytes",
                      bytes);
    }
    return Status::OK();
}

void TcpAdmission::release(uint64_t tasks, uint64_t bytes) {
    g_tasks.fetch_sub(tasks, std::memory_order_relaxed);
    g_bytes.fetch_sub(bytes, std::memory_order_relaxed);
}

uint64_t TcpAdmission::inflightTasks() {
    return g_tasks.load(std::memory_order_relaxed);
}

uint64_t TcpAdmission::inflightBytes() {
    return g_bytes.load(std::memory_order_relaxed);
}

}  // namespace mooncake::tent
