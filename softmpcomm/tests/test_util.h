// Helpers shared by the softmpcomm suites: collision-free ports, scoped
// environment variables, test patterns and bounded waits on transfers,
// pipes and threads.
#pragma once

#include <dirent.h>
#include <poll.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "mpcomm.h"

namespace mpcomm_test {

// Initialises `comm` on the first free port of a pid-derived window inside
// 20000-40000, so parallel test processes do not collide. Returns the port,
// or the negated error of the first non-bind failure.
inline int initOnFreePort(mpcomm::MPComm& comm, const std::string& host,
                          const std::string& devices) {
    static int cursor = 0;
    int base = 20000 + static_cast<int>((getpid() * 97) % 19000);
    for (int attempt = 0; attempt < 500; ++attempt) {
        int port = base + (cursor++ % 1000);
        int rc = comm.init(host, devices, port);
        if (rc == mpcomm::MPCOMM_SUCCESS) return port;
        if (rc != mpcomm::MPCOMM_ERR_BIND) return rc < 0 ? rc : -1000;
    }
    return -1000;
}

// Sets (or unsets, for nullptr) an environment variable for one scope.
class ScopedEnv {
 public:
    ScopedEnv(const char* name, const char* value) : name_(name) {
        const char* old = std::getenv(name);
        had_old_ = old != nullptr;
        if (had_old_) old_ = old;
        if (value != nullptr)
            setenv(name, value, 1);
        else
            unsetenv(name);
    }
    ~ScopedEnv() {
        if (had_old_)
            setenv(name_.c_str(), old_.c_str(), 1);
        else
            unsetenv(name_.c_str());
    }

 private:
    std::string name_;
    std::string old_;
    bool had_old_ = false;
};

// Polls until the transfer completes; false if it has not within the bound
// (a hang is the failure being tested for, so the bound is generous).
inline bool waitForTransfer(mpcomm::MPComm& comm, mpcomm::TransferHandle h,
                            int seconds = 30) {
    auto deadline =
        std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
    while (!comm.isTransferComplete(h)) {
        if (std::chrono::steady_clock::now() > deadline) return false;
        std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    return true;
}

// Waits, fetches the result and releases the handle.
inline mpcomm::TransferResult finish(mpcomm::MPComm& comm,
                                     mpcomm::TransferHandle h) {
    mpcomm::TransferResult result;
    if (!waitForTransfer(comm, h)) {
        result.error_code = 12345;  // sentinel: "hung", never a real code
        return result;
    }
    result = comm.getTransferResult(h);
    comm.releaseTransfer(h);
    return result;
}

// A reproducible byte pattern; different seeds give different bytes.
inline std::vector<uint8_t> pattern(size_t length, uint32_t seed) {
    std::vector<uint8_t> bytes(length);
    uint32_t x = seed * 2654435761u + 1;
    for (auto& b : bytes) {
        x = x * 1103515245u + 12345u;
        b = static_cast<uint8_t>(x >> 16);
    }
    return bytes;
}

// Reads exactly `length` bytes from a pipe or socket, waiting at most
// timeout_ms for each part; false on timeout, error or end of file.
inline bool readWithDeadline(int fd, void* out, size_t length, int timeout_ms) {
    char* cursor = static_cast<char*>(out);
    while (length > 0) {
        pollfd pfd{fd, POLLIN, 0};
        if (::poll(&pfd, 1, timeout_ms) <= 0) return false;
        ssize_t got = ::read(fd, cursor, length);
        if (got <= 0) return false;
        cursor += got;
        length -= static_cast<size_t>(got);
    }
    return true;
}

// Threads of this process right now (tasks under /proc/self/task).
inline int threadCount() {
    int count = 0;
    DIR* dir = ::opendir("/proc/self/task");
    if (dir == nullptr) return -1;
    while (dirent* entry = ::readdir(dir))
        if (entry->d_name[0] != '.') ++count;
    ::closedir(dir);
    return count;
}

// Polls `pred` until it holds (true) or `bound_ms` has passed (false, after
// one last look): for state with no event to wait on, such as the thread
// count, which drops only once the kernel has reaped a joined thread.
template <typename Pred>
bool waitUntil(Pred pred, int bound_ms = 10000) {
    auto deadline =
        std::chrono::steady_clock::now() + std::chrono::milliseconds(bound_ms);
    while (!pred()) {
        if (std::chrono::steady_clock::now() >= deadline) return pred();
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return true;
}

// Milliseconds since `start` on the steady clock.
inline int64_t msSince(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::steady_clock::now() - start)
        .count();
}

}  // namespace mpcomm_test
