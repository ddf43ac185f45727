#include "transport/shm/shm_object.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <random>

namespace mooncake::tent {

namespace {

constexpr char kPrefix[] = "/mooncake_";
constexpr size_t kHexDigits = 8;
// O_EXCL collisions on a fresh random suffix are rare; a few retries make
// them irrelevant.
constexpr int kCreateAttempts = 8;

std::string errnoText(int err) { return std::strerror(err); }

std::string freshName() {
    static thread_local std::mt19937 rng(std::random_device{}());
    char suffix[kHexDigits + 1];
    std::snprintf(suffix, sizeof(suffix), "%08x", static_cast<unsigned>(rng()));
    return kPrefix + std::to_string(getpid()) + "_" + suffix;
}

// Error text quotes at most 64 bytes of a name a peer sent.
std::string shown(const std::string& name) {
    return "\"" + name.substr(0, 64) + (name.size() > 64 ? "...\"" : "\"");
}

}  // namespace

bool ShmObject::validName(const std::string& name) {
    return creatorPid(name) > 0;
}

pid_t ShmObject::creatorPid(const std::string& name) {
    const size_t prefix = sizeof(kPrefix) - 1;
    if (name.compare(0, prefix, kPrefix) != 0) return 0;
    size_t underscore = name.find('_', prefix);
    if (underscore == std::string::npos || underscore == prefix ||
        underscore - prefix > 9) {
        return 0;
    }
    long pid = 0;
    for (size_t i = prefix; i < underscore; ++i) {
        if (name[i] < '0' || name[i] > '9') return 0;
        pid = pid * 10 + (name[i] - '0');
    }
    if (name.size() != underscore + 1 + kHexDigits) return 0;
    for (size_t i = underscore + 1; i < name.size(); ++i) {
        char c = name[i];
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return 0;
    }
    return static_cast<pid_t>(pid);
}

ShmObject::~ShmObject() {
    if (addr_) munmap(addr_, length_);
    if (created_) shm_unlink(name_.c_str());
    if (fd_ >= 0) close(fd_);
}

Status ShmObject::create(size_t size, std::unique_ptr<ShmObject>& out) {
    if (size == 0) {
        return Status::InvalidArgument(
            "shm: cannot create an object of 0 bytes");
    }
    std::unique_ptr<ShmObject> obj(new ShmObject());
    int fd = -1;
    std::string name;
    for (int i = 0; i < kCreateAttempts && fd < 0; ++i) {
        name = freshName();
        fd = shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
        if (fd < 0 && errno != EEXIST) break;
    }
    if (fd < 0) {
        return Status::InternalError("shm: shm_open " + name +
                                     " failed: " + errnoText(errno));
    }
    obj->fd_ = fd;
    obj->name_ = name;
    obj->created_ = true;  // from here on the destructor unlinks it
    // The mode is set again: the umask may have cleared bits of 0600 the
    // owner needs; no other user gets any.
    if (fchmod(fd, 0600) != 0 || flock(fd, LOCK_EX | LOCK_NB) != 0 ||
        ftruncate(fd, static_cast<off_t>(size)) != 0) {
        return Status::InternalError("shm: preparing " + name + " (" +
                                     std::to_string(size) +
                                     " bytes) failed: " + errnoText(errno));
    }
    // Reserved now: a tmpfs that runs out later would kill the process
    // with SIGBUS on first touch instead of failing this call.
    int err = posix_fallocate(fd, 0, static_cast<off_t>(size));
    if (err != 0) {
        return Status::InternalError("shm: cannot reserve " +
                                     std::to_string(size) + " bytes for " +
                                     name + " in /dev/shm: " + errnoText(err));
    }
    void* addr = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (addr == MAP_FAILED) {
        return Status::InternalError("shm: mmap of " + name + " (" +
                                     std::to_string(size) +
                                     " bytes) failed: " + errnoText(errno));
    }
    struct stat st {};
    fstat(fd, &st);  // cannot fail on a descriptor mmap just accepted
    obj->adopt(addr, size, st);
    out = std::move(obj);
    return Status::OK();
}

Status ShmObject::open(const std::string& name, uint64_t length,
                       std::unique_ptr<ShmObject>& out) {
    if (!validName(name)) {
        return Status::InvalidArgument(
            "shm: object name " + shown(name) +
            " is not of the form /mooncake_<pid>_<8 hex digits>");
    }
    if (length == 0) {
        return Status::InvalidArgument("shm: cannot map 0 bytes of " + name);
    }
    int fd = shm_open(name.c_str(), O_RDWR, 0);
    if (fd < 0) {
        return Status::InvalidArgument("shm: cannot open " + name + ": " +
                                       errnoText(errno));
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int err = errno;
        close(fd);
        return Status::InternalError("shm: fstat of " + name +
                                     " failed: " + errnoText(err));
    }
    if (st.st_uid != geteuid()) {
        close(fd);
        return Status::InvalidArgument(
            "shm: " + name + " belongs to uid " + std::to_string(st.st_uid) +
            ", this process runs as uid " + std::to_string(geteuid()) +
            " (shm is same-user only)");
    }
    if (static_cast<uint64_t>(st.st_size) < length) {
        close(fd);
        return Status::InvalidArgument(
            "shm: " + name + " holds " + std::to_string(st.st_size) +
            " bytes, fewer than the " + std::to_string(length) +
            " the peer registered");
    }
    void* addr =
        mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    int err = errno;
    close(fd);  // the mapping keeps the object; no lock is held here
    if (addr == MAP_FAILED) {
        return Status::InternalError("shm: mmap of " + name + " (" +
                                     std::to_string(length) +
                                     " bytes) failed: " + errnoText(err));
    }
    std::unique_ptr<ShmObject> obj(new ShmObject());
    obj->name_ = name;
    obj->adopt(addr, length, st);
    out = std::move(obj);
    return Status::OK();
}

void ShmObject::adopt(void* addr, uint64_t length, const struct stat& st) {
    addr_ = addr;
    length_ = length;
    dev_ = st.st_dev;
    ino_ = st.st_ino;
}

ShmObject::Probe ShmObject::probe() const {
    int fd = shm_open(name_.c_str(), O_RDONLY, 0);
    if (fd < 0) return Probe::kUnlinked;
    struct stat st;
    Probe result = Probe::kLive;
    if (fstat(fd, &st) != 0 || st.st_dev != dev_ || st.st_ino != ino_) {
        result = Probe::kReplaced;
    } else if (flock(fd, LOCK_SH | LOCK_NB) == 0) {
        // Nobody holds the creator's exclusive lock any more. Closing the
        // descriptor below releases this shared one.
        result = Probe::kCreatorGone;
    }
    close(fd);
    return result;
}

}  // namespace mooncake::tent
