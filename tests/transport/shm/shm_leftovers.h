// What docs/shm.md tells users to do after a crash, for the suites whose
// targets are killed: remove /dev/shm/mooncake_<pid>_* of pids that no
// longer exist, and nothing of a live process.
#pragma once

#include <dirent.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <string>
#include <vector>

namespace mooncake::tent::testing {

// The names (without the leading '/') of this host's mooncake objects
// whose creator pid is gone.
inline std::vector<std::string> deadShmLeftovers() {
    std::vector<std::string> found;
    DIR* dir = opendir("/dev/shm");
    if (!dir) return found;
    while (dirent* e = readdir(dir)) {
        std::string name = e->d_name;
        const std::string prefix = "mooncake_";
        if (name.compare(0, prefix.size(), prefix) != 0) continue;
        size_t end = name.find('_', prefix.size());
        if (end == std::string::npos) continue;
        std::string digits = name.substr(prefix.size(), end - prefix.size());
        if (digits.empty() ||
            digits.find_first_not_of("0123456789") != std::string::npos) {
            continue;
        }
        pid_t pid = static_cast<pid_t>(std::stol(digits));
        if (kill(pid, 0) != 0 && errno == ESRCH) found.push_back(name);
    }
    closedir(dir);
    return found;
}

// Removes them; returns how many were removed.
inline size_t removeDeadShmLeftovers() {
    size_t removed = 0;
    for (const std::string& name : deadShmLeftovers()) {
        if (unlink(("/dev/shm/" + name).c_str()) == 0) ++removed;
    }
    return removed;
}

}  // namespace mooncake::tent::testing
