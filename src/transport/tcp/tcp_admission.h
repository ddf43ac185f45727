// TcpAdmission: how many TCP transfer tasks, and how many of their bytes,
// are submitted and not yet settled in this process (private to
// TcpTransport). The counts are process-wide, shared by every TcpTransport
// (every engine) of the process, since the memory and sockets they stand
// for are the process's; each transport holds them against its own
// transports/tcp/max_inflight_tasks and max_inflight_bytes.
#pragma once

#include <cstdint>

#include "tent/common/status.h"

namespace mooncake::tent {

class TcpAdmission {
 public:
    struct Limits {
        int64_t max_tasks = 0;
        int64_t max_bytes = 0;
    };
    // Reserves `tasks` tasks of `bytes` bytes in all, or, when either count
    // would pass its limit, reserves nothing and returns TooManyRequests
    // naming the key, its limit, what is in flight and what was asked.
    static Status admit(uint64_t tasks, uint64_t bytes, const Limits& limits);
    // Gives back what admit() reserved for one settled task.
    static void release(uint64_t tasks, uint64_t bytes);

    static uint64_t inflightTasks();
    static uint64_t inflightBytes();
};

}  // namespace mooncake::tent
