// What /proc says about a process ("self": this one): its threads and the
// inodes of its sockets, for the tests that bound them.
#pragma once

#include <dirent.h>
#include <unistd.h>

#include <cstdio>
#include <set>
#include <string>

namespace mooncake::tent::testing {

// Threads of process `pid` now (/proc/<pid>/task); 0 when it is gone.
inline size_t threadsOf(const std::string& pid = "self") {
    size_t n = 0;
    const std::string tasks = "/proc/" + pid + "/task";
    DIR* dir = ::opendir(tasks.c_str());
    if (!dir) return 0;
    while (dirent* e = ::readdir(dir)) n += e->d_name[0] != '.';
    ::closedir(dir);
    return n;
}

// The thread ids of process `pid` now (/proc/<pid>/task).
inline std::set<long> threadIdsOf(const std::string& pid = "self") {
    std::set<long> out;
    const std::string tasks = "/proc/" + pid + "/task";
    DIR* dir = ::opendir(tasks.c_str());
    if (!dir) return out;
    while (dirent* e = ::readdir(dir)) {
        if (e->d_name[0] != '.') out.insert(std::stol(e->d_name));
    }
    ::closedir(dir);
    return out;
}

// Threads of this process now that were not in `before`. A count against a
// baseline is not enough: a thread an earlier test joined can still be
// listed in /proc for a moment after pthread_join returns (the kernel wakes
// the joiner before it reaps the task), so the baseline can be one too high.
inline size_t threadsStartedSince(const std::set<long>& before) {
    size_t n = 0;
    for (long tid : threadIdsOf()) n += before.count(tid) == 0;
    return n;
}

// The inodes of the sockets process `pid` holds (/proc/<pid>/fd).
inline std::set<unsigned long> socketInodes(const std::string& pid = "self") {
    std::set<unsigned long> out;
    const std::string fds = "/proc/" + pid + "/fd";
    DIR* dir = ::opendir(fds.c_str());
    if (!dir) return out;
    while (dirent* e = ::readdir(dir)) {
        char link[64];
        const std::string path = fds + "/" + e->d_name;
        ssize_t n = ::readlink(path.c_str(), link, sizeof(link) - 1);
        if (n <= 0) continue;
        link[n] = '\0';
        unsigned long inode = 0;
        if (std::sscanf(link, "socket:[%lu]", &inode) == 1) out.insert(inode);
    }
    ::closedir(dir);
    return out;
}

}  // namespace mooncake::tent::testing
