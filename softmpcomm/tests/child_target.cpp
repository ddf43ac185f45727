#include "child_target.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "mpcomm.h"
#include "test_util.h"

namespace mpcomm_test {

namespace {

// Parent -> child, one write each (atomic on a pipe).
struct Command {
    char op;  // 'V' verify, 'Q' quit
    uint32_t seed;
    uint32_t length;
};

std::vector<int> openDescriptors() {
    std::vector<int> fds;
    DIR* dir = ::opendir("/proc/self/fd");
    if (dir == nullptr) return fds;
    int own = ::dirfd(dir);
    while (dirent* entry = ::readdir(dir)) {
        int fd = std::atoi(entry->d_name);
        if (entry->d_name[0] != '.' && fd != own) fds.push_back(fd);
    }
    ::closedir(dir);
    return fds;
}

// Whatever the test runner left open without close-on-exec would count
// against (and hide) a descriptor limit: keep only stdio and our pipes.
void closeInheritedDescriptors(int keep_a, int keep_b) {
    for (int fd : openDescriptors())
        if (fd > STDERR_FILENO && fd != keep_a && fd != keep_b) ::close(fd);
}

// Lowers RLIMIT_NOFILE so that about `spare` more descriptors fit.
bool limitDescriptors(int spare) {
    int highest = 0;
    for (int fd : openDescriptors()) highest = std::max(highest, fd);
    rlimit limit{};
    if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return false;
    limit.rlim_cur = static_cast<rlim_t>(highest + 1 + spare);
    return ::setrlimit(RLIMIT_NOFILE, &limit) == 0;
}

}  // namespace

int runChildTarget(int argc, char** argv) {
    if (argc != 9) return 64;
    std::string host = argv[2], devices = argv[3];
    int port = std::atoi(argv[4]);
    auto seed = static_cast<uint32_t>(std::strtoul(argv[5], nullptr, 10));
    int spare_fds = std::atoi(argv[6]);
    int to_parent = std::atoi(argv[7]);
    int from_parent = std::atoi(argv[8]);
    closeInheritedDescriptors(to_parent, from_parent);

    std::vector<uint8_t> buffer(2 * kChildHalf, 0);
    auto head = pattern(kChildHalf, seed);
    std::memcpy(buffer.data(), head.data(), kChildHalf);
    int code = 0;
    {
        mpcomm::MPComm target;
        if (port > 0)
            port = target.init(host, devices, port) == mpcomm::MPCOMM_SUCCESS
                       ? port
                       : -1;
        else
            port = initOnFreePort(target, host, devices);
        if (port > 0 && (target.startAcceptThread() != mpcomm::MPCOMM_SUCCESS ||
                         target.registerMemory(buffer.data(), buffer.size()) !=
                             mpcomm::MPCOMM_SUCCESS ||
                         target.publishBuffer(buffer.data(), buffer.size(),
                                              0) != mpcomm::MPCOMM_SUCCESS ||
                         (spare_fds > 0 && !limitDescriptors(spare_fds))))
            port = -1;
        if (::write(to_parent, &port, sizeof(port)) != sizeof(port) ||
            port <= 0)
            return 2;
        Command command{};
        // Ends on 'Q', or when the parent goes away (end of file).
        while (::read(from_parent, &command, sizeof(command)) ==
                   sizeof(command) &&
               command.op == 'V') {
            // The parent orders the put's placement before this read (ack
            // -> command) and this read before its next put (reply -> put),
            // which ThreadSanitizer cannot follow across processes.
            // Unpublishing an address never published takes the buffer
            // table's write lock, which every placement takes shared: once
            // before the read and once after it give the same orders in a
            // way it can see.
            static char never_published;
            target.unpublishBuffer(&never_published);
            size_t length = std::min<size_t>(command.length, kChildHalf);
            auto expected = pattern(length, command.seed);
            char verdict = std::memcmp(buffer.data() + kChildHalf,
                                       expected.data(), length) == 0
                               ? '1'
                               : '0';
            target.unpublishBuffer(&never_published);
            if (::write(to_parent, &verdict, 1) != 1) code = 3;
        }
    }
    return code;
}

ChildTarget::~ChildTarget() { kill(); }

bool ChildTarget::start(const ChildOptions& options) {
    int up[2], down[2];
    if (::pipe2(up, O_CLOEXEC) != 0) return false;
    if (::pipe2(down, O_CLOEXEC) != 0) {
        ::close(up[0]);
        ::close(up[1]);
        return false;
    }
    std::vector<std::string> args = {"/proc/self/exe",
                                     kChildFlag,
                                     options.host,
                                     options.devices,
                                     std::to_string(options.port),
                                     std::to_string(options.seed),
                                     std::to_string(options.spare_fds),
                                     std::to_string(up[1]),
                                     std::to_string(down[0])};
    std::vector<char*> argv;
    for (auto& arg : args) argv.push_back(&arg[0]);
    argv.push_back(nullptr);
    pid_t pid = ::fork();
    if (pid < 0) return false;
    if (pid == 0) {
        // Only async-signal-safe calls between fork and exec.
        ::fcntl(up[1], F_SETFD, 0);
        ::fcntl(down[0], F_SETFD, 0);
        if (options.stderr_fd >= 0) ::dup2(options.stderr_fd, STDERR_FILENO);
        ::execv(argv[0], argv.data());
        _exit(127);
    }
    ::close(up[1]);
    ::close(down[0]);
    pid_ = pid;
    from_child_ = up[0];
    to_child_ = down[1];
    int port = 0;
    if (!readWithDeadline(from_child_, &port, sizeof(port),
                          kChildReplyTimeoutMs) ||
        port <= 0) {
        kill();
        return false;
    }
    port_ = port;
    return true;
}

bool ChildTarget::stop() {
    if (pid_ <= 0 || ::kill(pid_, SIGSTOP) != 0) return false;
    int status = 0;
    return ::waitpid(pid_, &status, WUNTRACED) == pid_ && WIFSTOPPED(status);
}

bool ChildTarget::resume() { return pid_ > 0 && ::kill(pid_, SIGCONT) == 0; }

bool ChildTarget::reap(int* status) {
    bool reaped = ::waitpid(pid_, status, 0) == pid_;
    ::close(to_child_);
    ::close(from_child_);
    pid_ = -1;
    to_child_ = from_child_ = -1;
    port_ = 0;
    return reaped;
}

bool ChildTarget::kill() {
    if (pid_ <= 0) return false;
    ::kill(pid_, SIGKILL);
    int status = 0;
    return reap(&status) && WIFSIGNALED(status);
}

bool ChildTarget::quit() {
    if (pid_ <= 0) return false;
    Command command{'Q', 0, 0};
    // The child closes its end when it exits: wait for that end of file,
    // bounded.
    pollfd pfd{from_child_, POLLIN, 0};
    char byte;
    if (::write(to_child_, &command, sizeof(command)) != sizeof(command) ||
        ::poll(&pfd, 1, kChildReplyTimeoutMs) <= 0 ||
        ::read(from_child_, &byte, 1) != 0) {
        kill();
        return false;
    }
    int status = 0;
    return reap(&status) && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

bool ChildTarget::verify(uint32_t seed, uint32_t length) {
    Command command{'V', seed, length};
    char verdict = 0;
    return ::write(to_child_, &command, sizeof(command)) == sizeof(command) &&
           readWithDeadline(from_child_, &verdict, 1, kChildReplyTimeoutMs) &&
           verdict == '1';
}

}  // namespace mpcomm_test
