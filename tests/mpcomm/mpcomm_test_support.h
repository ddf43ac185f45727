// Helpers shared by the MPComm boundary suite: log capture, a segment
// fetcher that reads other SegmentManagers' published snapshots, scoped
// environment variables and files.
#pragma once

#include <glog/logging.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "log_capture.h"
#include "tent/runtime/segment_manager.h"

namespace mooncake::tent::testing {

// Resolves a segment name to another manager's published snapshot, the way
// the p2p metadata RPC would.
class SnapshotFetcher : public SegmentFetcher {
 public:
    void add(const std::string& name, std::shared_ptr<SegmentManager> sm) {
        std::lock_guard<std::mutex> lock(mu_);
        peers_[name] = std::move(sm);
    }
    Status fetch(const std::string& name, SegmentDesc& out) override {
        std::lock_guard<std::mutex> lock(mu_);
        ++fetches;
        auto it = peers_.find(name);
        std::shared_ptr<SegmentManager> peer =
            it == peers_.end() ? nullptr : it->second.lock();
        if (!peer) return Status::MetadataError("no segment named " + name);
        out = *peer->getLocal();
        return Status::OK();
    }
    // Read by tests while submitting threads fetch.
    std::atomic<int> fetches{0};

 private:
    std::mutex mu_;
    // Weak: the managers own this fetcher, so strong references would form
    // a cycle and leak both.
    std::map<std::string, std::weak_ptr<SegmentManager>> peers_;
};

// The endpoint attribute `desc` publishes for `type`; "" when none.
inline std::string attrOf(const SegmentDesc& desc, TransportType type) {
    const std::string* attr = desc.getMemory().getTransportAttrs(type);
    return attr ? *attr : "";
}

// Sets (or unsets, with nullopt) an environment variable for one scope.
class ScopedEnv {
 public:
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

// Waits for `done` with a bounded deadline; false if it never held.
template <typename Pred>
bool waitFor(Pred done, std::chrono::seconds limit = std::chrono::seconds(20)) {
    auto deadline = std::chrono::steady_clock::now() + limit;
    while (!done()) {
        if (std::chrono::steady_clock::now() > deadline) return false;
        std::this_thread::yield();
    }
    return true;
}

}  // namespace mooncake::tent::testing
