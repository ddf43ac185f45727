// What docs/shm.md tells users to do after a crash, for the suites whose
// shm targets are killed: remove /dev/shm/mooncake_<pid>_* only where that
// pid no longer exists. The objects are found exactly, as the peer objects
// this process has mapped (/proc/self/maps), so that suites running side
// by side never touch each other's objects.
#pragma once

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <set>
#include <string>

namespace mooncake::tent::testing {

// The pid in "mooncake_<pid>_<hex>"; 0 when the name has no such form.
inline pid_t shmCreatorPid(const std::string& name) {
    const std::string prefix = "mooncake_";
    if (name.compare(0, prefix.size(), prefix) != 0) return 0;
    size_t end = name.find('_', prefix.size());
    if (end == std::string::npos || end == prefix.size()) return 0;
    std::string digits = name.substr(prefix.size(), end - prefix.size());
    if (digits.find_first_not_of("0123456789") != std::string::npos) return 0;
    return static_cast<pid_t>(std::stol(digits));
}

// File names (in /dev/shm) of other processes' objects mapped here now.
inline std::set<std::string> peerShmObjectsMappedHere() {
    std::set<std::string> names;
    std::ifstream maps("/proc/self/maps");
    std::string line;
    const std::string dir = "/dev/shm/";
    while (std::getline(maps, line)) {
        size_t at = line.find(dir);
        if (at == std::string::npos) continue;
        std::string name = line.substr(at + dir.size());
        size_t space = name.find(' ');  // " (deleted)"
        if (space != std::string::npos) name.resize(space);
        pid_t pid = shmCreatorPid(name);
        if (pid > 0 && pid != getpid()) names.insert(name);
    }
    return names;
}

inline bool shmObjectExists(const std::string& name) {
    return access(("/dev/shm/" + name).c_str(), F_OK) == 0;
}

// Unlinks `name` when its creator is dead; true when it did.
inline bool removeIfCreatorDead(const std::string& name) {
    pid_t pid = shmCreatorPid(name);
    if (pid <= 0 || kill(pid, 0) == 0 || errno != ESRCH) return false;
    return unlink(("/dev/shm/" + name).c_str()) == 0;
}

}  // namespace mooncake::tent::testing
