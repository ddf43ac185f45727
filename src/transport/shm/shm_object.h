// ShmObject: one POSIX shared memory object and its mapping in this
// process, either created here (the exporter, which also unlinks it) or
// opened from a peer's published name (the importer).
//
// Names are /mooncake_<pid>_<8 hex digits>, created 0600 with O_EXCL. The
// creator holds an exclusive flock on the object for as long as it lives,
// so an importer can tell a live peer's object from a crash leftover: the
// lock is released by the kernel when the creator dies, even by SIGKILL,
// and whatever pid namespace either side is in.
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>

#include "tent/common/status.h"

namespace mooncake::tent {

class ShmObject {
 public:
    ~ShmObject();
    ShmObject(const ShmObject&) = delete;
    ShmObject& operator=(const ShmObject&) = delete;

    // Creates a new object of `size` bytes under a fresh name and maps it.
    static Status create(size_t size, std::unique_ptr<ShmObject>& out);
    // Maps the first `length` bytes of the peer object `name`. A name not
    // of the form above, a missing object, one owned by another user, or
    // one shorter than `length` is an error naming the value.
    static Status open(const std::string& name, uint64_t length,
                       std::unique_ptr<ShmObject>& out);

    // What the importer checks before each copy: the name still denotes
    // the object it mapped (same inode) and its creator still holds it.
    enum class Probe { kLive, kUnlinked, kReplaced, kCreatorGone };
    Probe probe() const;

    // Whether `name` has the form /mooncake_<pid>_<8 hex digits>.
    static bool validName(const std::string& name);
    // The pid a valid name carries; 0 when the name is not valid.
    static pid_t creatorPid(const std::string& name);

    const std::string& name() const { return name_; }
    void* addr() const { return addr_; }
    uint64_t length() const { return length_; }
    bool created() const { return created_; }

 private:
    ShmObject() = default;
    // The mapping and the identity (device, inode) probe() compares against.
    void adopt(void* addr, uint64_t length, const struct stat& st);

    std::string name_;
    void* addr_ = nullptr;
    uint64_t length_ = 0;
    // The creator keeps its descriptor open: it carries the flock.
    int fd_ = -1;
    bool created_ = false;
    dev_t dev_ = 0;
    ino_t ino_ = 0;
};

}  // namespace mooncake::tent
