#include "kit/target_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sstream>
#include <thread>

#include "kit/wait_until.h"

namespace mooncake::tent::testing {

using Clock = std::chrono::steady_clock;

bool readLine(int fd, std::string& line, Clock::time_point deadline) {
    line.clear();
    char c;
    while (true) {
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                        deadline - Clock::now())
                        .count();
        if (left <= 0) return false;
        pollfd pfd{fd, POLLIN, 0};
        if (poll(&pfd, 1, static_cast<int>(left)) <= 0) continue;
        if (read(fd, &c, 1) <= 0) return false;
        if (c == '\n') return true;
        line.push_back(c);
    }
}

TargetProcess::~TargetProcess() { kill(); }

TargetProcess::Started TargetProcess::start(const TargetOptions& options,
                                            std::string& why,
                                            std::chrono::milliseconds bound) {
    kill();
    options_ = options;
    name_.clear();
    base_ = 0;
    // Close-on-exec everywhere, so that a second target does not inherit
    // this one's pipes (it would hold its command pipe open); the child
    // clears the flag on its own two ends only.
    int report[2], command[2];
    if (pipe2(report, O_CLOEXEC) != 0) {
        why = "pipe failed";
        return Started::kFailed;
    }
    if (pipe2(command, O_CLOEXEC) != 0) {
        close(report[0]);
        close(report[1]);
        why = "pipe failed";
        return Started::kFailed;
    }
    // Everything the child needs is built before fork(): between fork and
    // exec it may only make async-signal-safe calls. Empty texts travel as
    // "-" (see kit/target_main.cpp).
    auto text = [](const std::string& value) {
        return value.empty() ? std::string("-") : value;
    };
    const std::string args[] = {std::string(transportTypeName(options.xport)) +
                                    (options.with_tcp ? kWithTcpSuffix : ""),
                                std::to_string(options.rpc_port),
                                std::to_string(options.mpcomm_port),
                                std::to_string(report[1]),
                                std::to_string(command[0]),
                                text(options.int_conf),
                                std::to_string(options.seed),
                                text(options.metadata_type),
                                text(options.metadata_servers),
                                text(options.segment_name),
                                std::to_string(options.ttl_ms)};
    pid_ = fork();
    if (pid_ < 0) {
        why = "fork failed";
        for (int fd : {report[0], report[1], command[0], command[1]}) {
            close(fd);
        }
        return Started::kFailed;
    }
    if (pid_ == 0) {
        fcntl(report[1], F_SETFD, 0);
        fcntl(command[0], F_SETFD, 0);
        execl("/proc/self/exe", "tent_test_target", kTargetFlag,
              args[0].c_str(), args[1].c_str(), args[2].c_str(),
              args[3].c_str(), args[4].c_str(), args[5].c_str(),
              args[6].c_str(), args[7].c_str(), args[8].c_str(),
              args[9].c_str(), args[10].c_str(), nullptr);
        _exit(127);
    }
    close(report[1]);
    close(command[0]);
    command_fd_ = command[1];
    report_fd_ = report[0];

    std::string line;
    if (!readLine(report_fd_, line, Clock::now() + bound)) {
        why = "target did not report within " + std::to_string(bound.count()) +
              " ms";
        kill();
        return Started::kFailed;
    }
    for (const auto& [prefix, outcome] :
         {std::pair<std::string, Started>{"SKIP ", Started::kSkipped},
          {"ERROR ", Started::kFailed}}) {
        if (line.rfind(prefix, 0) == 0) {
            why = line.substr(prefix.size());
            kill();
            return outcome;
        }
    }
    std::istringstream is(line);
    if (!(is >> name_ >> base_) || name_.empty()) {
        why = "target reported \"" + line + "\"";
        kill();
        return Started::kFailed;
    }
    return Started::kReady;
}

TargetProcess::Started TargetProcess::restart(std::string& why) {
    const TargetOptions options = options_;
    return start(options, why);
}

std::string TargetProcess::ask(const std::string& command) {
    std::string text = command + "\n", line;
    if (write(command_fd_, text.data(), text.size()) !=
        static_cast<ssize_t>(text.size())) {
        return "write failed";
    }
    if (!readLine(report_fd_, line, Clock::now() + kReportBound)) {
        return "no answer";
    }
    return line;
}

bool TargetProcess::tell(const std::string& command) {
    std::string text = command + "\n";
    return write(command_fd_, text.data(), text.size()) ==
           static_cast<ssize_t>(text.size());
}

bool TargetProcess::stop() { return signalAndWait(SIGSTOP, WUNTRACED); }

bool TargetProcess::resume() { return signalAndWait(SIGCONT, WCONTINUED); }

void TargetProcess::kill() {
    if (pid_ > 0) {
        ::kill(pid_, SIGKILL);
        // SIGKILL cannot be caught; a child still there after the bound is
        // left to init rather than hanging the test.
        waitChild(0, kReportBound);
        pid_ = -1;
    }
    closeFds();
}

bool TargetProcess::finish(std::string& why, std::chrono::milliseconds bound) {
    if (pid_ <= 0) {
        why = "no target running";
        return false;
    }
    closeFds();  // EOF on the command pipe: the child cleans up and exits
    const int status = waitChild(0, bound);
    if (status < 0) {
        why = "target did not exit within " + std::to_string(bound.count()) +
              " ms";
        kill();
        return false;
    }
    pid_ = -1;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return true;
    why = WIFSIGNALED(status)
              ? "target died of signal " + std::to_string(WTERMSIG(status))
              : "target exited with status " +
                    std::to_string(WEXITSTATUS(status));
    return false;
}

int TargetProcess::waitChild(int options, std::chrono::milliseconds bound) {
    int status = 0;
    pid_t got = 0;
    waitUntil(
        [&] {
            got = waitpid(pid_, &status, options | WNOHANG);
            return got != 0;
        },
        bound);
    return got == pid_ ? status : -1;
}

bool TargetProcess::signalAndWait(int sig, int options) {
    if (pid_ <= 0) return false;
    ::kill(pid_, sig);
    return waitChild(options, kReportBound) >= 0;
}

void TargetProcess::closeFds() {
    if (command_fd_ >= 0) close(command_fd_);
    if (report_fd_ >= 0) close(report_fd_);
    command_fd_ = report_fd_ = -1;
}

}  // namespace mooncake::tent::testing
