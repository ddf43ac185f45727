// Scoped process state for tests: an environment variable, a temporary
// file.
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <optional>
#include <string>

namespace mooncake::tent::testing {

// Sets (or unsets, with nullopt) an environment variable for one scope,
// and puts back what was there before.
class ScopedEnv {
 public:
    // A null `value` unsets the variable too.
    ScopedEnv(const char* name, const char* value)
        : ScopedEnv(name,
                    value ? std::optional<std::string>(value) : std::nullopt) {}
    ScopedEnv(const char* name, std::optional<std::string> value)
        : name_(name) {
        const char* old = std::getenv(name);
        if (old != nullptr) old_ = old;
        if (value) {
            setenv(name, value->c_str(), 1);
        } else {
            unsetenv(name);
        }
    }
    ~ScopedEnv() {
        if (old_) {
            setenv(name_.c_str(), old_->c_str(), 1);
        } else {
            unsetenv(name_.c_str());
        }
    }

 private:
    std::string name_;
    std::optional<std::string> old_;
};

// A temporary file with the given contents, removed on scope exit.
class TempFile {
 public:
    explicit TempFile(const std::string& contents) {
        char tmpl[] = "/tmp/tent_mpcomm_test_XXXXXX";
        int fd = mkstemp(tmpl);
        path_ = tmpl;
        if (fd >= 0) close(fd);
        std::ofstream(path_) << contents;
    }
    ~TempFile() { unlink(path_.c_str()); }
    const std::string& path() const { return path_; }

 private:
    std::string path_;
};

}  // namespace mooncake::tent::testing
