// A target in a separate process, started by fork + exec of the test binary
// itself, so the child is a fresh process even when the parent already runs
// MPComm threads (ThreadSanitizer does not support threads in a child forked
// from a multi-threaded parent). The test binary's main() hands control to
// runChildTarget() when it sees kChildFlag.
//
// The child publishes one buffer of 2 x kChildHalf bytes: pattern(seed) then
// zeros. It reports its port through a pipe and answers verify commands;
// every wait on it is bounded.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace mpcomm_test {

constexpr const char* kChildFlag = "--softmpcomm-child-target";
constexpr size_t kChildHalf = 16u << 20;
// How long the parent waits for the child to come up or to answer.
constexpr int kChildReplyTimeoutMs = 30000;

// Runs the child side from main(); returns the process exit code.
int runChildTarget(int argc, char** argv);

struct ChildOptions {
    std::string host = "peer";
    std::string devices = "r0";
    int port = 0;  // 0: the first free port the child finds
    uint32_t seed = 1;
    // When > 0, the child lowers RLIMIT_NOFILE to the descriptors it holds
    // after init plus this many.
    int spare_fds = 0;
    int stderr_fd = -1;  // where the child's stderr goes (-1: inherited)
};

class ChildTarget {
 public:
    ChildTarget() = default;
    ~ChildTarget();
    ChildTarget(const ChildTarget&) = delete;
    ChildTarget& operator=(const ChildTarget&) = delete;

    // Starts the child and waits for its port. With an explicit port that
    // the child cannot bind, returns false and port() is 0.
    bool start(const ChildOptions& options);
    int port() const { return port_; }
    pid_t pid() const { return pid_; }

    // SIGSTOP, returning once the child is really stopped.
    bool stop();
    bool resume();
    // SIGKILL and reap.
    bool kill();
    // Asks the child to shut down cleanly and reaps it; false on a bad exit.
    bool quit();
    // True when the second half of the child's buffer starts with
    // pattern(seed, length).
    bool verify(uint32_t seed, uint32_t length);

 private:
    bool reap(int* status);

    pid_t pid_ = -1;
    int port_ = 0;
    int to_child_ = -1;
    int from_child_ = -1;
};

}  // namespace mpcomm_test
