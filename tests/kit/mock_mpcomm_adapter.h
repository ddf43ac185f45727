// A programmable MpcommAdapter for the boundary suite.
//
// It counts calls per method, fails on request (connect_failures = 2 makes
// the next two connect() calls fail), lets a test decide when and how each
// transfer completes, records what put/get were asked to do (and, with
// move_bytes, copies them within this process), and flags any
// use of a handle after it was released or after shutdown(). Holds make a
// provider call block until the test releases it: a peer whose handshake
// never answers, or a teardown that is slow to return.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "tent/transport/mpcomm/mpcomm_adapter.h"

namespace mooncake::tent::testing {

class MockMpcommAdapter : public MpcommAdapter {
 public:
    struct Transfer {
        bool is_put = false;
        uintptr_t local_addr = 0;
        std::string host_id;
        uintptr_t remote_addr = 0;
        size_t length = 0;
        MpcommTransferHandle handle = kInvalidMpcommTransferHandle;
    };
    struct Endpoint {
        std::string host_id;
        std::string addr;
        int port = 0;
    };

    // --- programming ---------------------------------------------------
    bool is_available = true;
    int init_error = 0;      // non-zero: init() fails with this code
    int accept_error = 0;    // startAcceptThread() fails with this code
    int register_error = 0;  // registerMemory() fails with this code
    int publish_error = 0;   // publishBuffer() fails with this code
    // When >= 0: that many more publishBuffer() calls succeed, then every
    // later one fails with publish_error.
    std::atomic<int> publish_ok_budget{-1};
    int port_override = 0;  // tcpPort() reports this when non-zero
    std::atomic<int> connect_failures{0};  // next N connect() calls fail
    std::atomic<int> query_failures{0};    // next N queries fail
    int connect_error = -4;
    int query_error = -9;
    std::atomic<int> issue_failures{0};  // next N put/get return invalid
    // When true every transfer completes at once with full success.
    bool auto_complete = true;
    // When true put/get copy their bytes at post time, treating the remote
    // address as memory of this process: tests that must show a recovered
    // transfer is byte-exact publish a real buffer as the peer's.
    bool move_bytes = false;
    // Blocks connect() until releaseConnects() (single-flight tests).
    bool hold_connects = false;
    // Runs inside isTransferComplete() before it answers.
    std::function<void(MpcommTransferHandle)> on_is_complete;

    // --- counters ------------------------------------------------------
    std::atomic<int> init_calls{0}, start_accept_calls{0}, stop_accept_calls{0},
        shutdown_calls{0}, register_calls{0}, unregister_calls{0},
        publish_calls{0}, unpublish_calls{0}, connect_calls{0}, query_calls{0},
        put_calls{0}, get_calls{0}, is_complete_calls{0}, result_calls{0},
        release_calls{0};
    // Handle used after release/shutdown, or released twice.
    std::atomic<int> misuse{0};

    // --- MpcommAdapter --------------------------------------------------
    bool available() const noexcept override { return is_available; }
    std::string unavailableReason() const override {
        return "mock adapter set unavailable";
    }

    Status init(const std::string& host_id, const std::string& devices,
                int tcp_port) override {
        ++init_calls;
        std::lock_guard<std::mutex> lock(mu_);
        // The real adapter's rule: once per instance until shutdown().
        if (initialised_ && !shut_down_) {
            return Status::InvalidArgument(
                "MPComm init called twice for host " + host_id);
        }
        if (shut_down_) {
            shut_down_ = false;
            ++instance_;  // handles of the old instance stay dead
        }
        init_host_ = host_id;
        init_devices_ = devices;
        init_port_ = tcp_port;
        events_.push_back("init");
        if (init_error != 0) return mpcommProviderError("init", init_error);
        initialised_ = true;
        return Status::OK();
    }
    int tcpPort() const override {
        std::lock_guard<std::mutex> lock(mu_);
        return port_override != 0 ? port_override : init_port_;
    }
    Status startAcceptThread() override {
        ++start_accept_calls;
        event("startAcceptThread");
        if (accept_error != 0) {
            return mpcommProviderError("startAcceptThread", accept_error);
        }
        return Status::OK();
    }
    void stopAcceptThread() override {
        ++stop_accept_calls;
        std::unique_lock<std::mutex> lock(mu_);
        events_.push_back("stopAcceptThread");
        cv_.wait(lock, [this] { return !stop_accept_held_; });
    }
    void shutdown() override {
        std::lock_guard<std::mutex> lock(mu_);
        shut_down_ = true;
        events_.push_back("shutdown");
        // Counted last, under the lock: a test that saw the count may
        // init() again without racing the rest of this call.
        ++shutdown_calls;
    }

    Status registerMemory(void* addr, size_t length) override {
        ++register_calls;
        event("registerMemory");
        if (register_error != 0) {
            return mpcommProviderError("registerMemory", register_error);
        }
        return Status::OK();
    }
    void unregisterMemory(void* addr) override {
        ++unregister_calls;
        event("unregisterMemory");
    }
    Status publishBuffer(void* addr, size_t length, int numa_node) override {
        ++publish_calls;
        event("publishBuffer");
        bool fail = publish_error != 0;
        if (fail && publish_ok_budget.load() >= 0) {
            fail = publish_ok_budget.fetch_sub(1) <= 0;
        }
        if (fail) {
            return mpcommProviderError("publishBuffer", publish_error);
        }
        return Status::OK();
    }
    void unpublishBuffer(void* addr) override {
        ++unpublish_calls;
        event("unpublishBuffer");
    }

    Status connect(const std::string& host_id, const std::string& tcp_addr,
                   int tcp_port) override {
        ++connect_calls;
        std::unique_lock<std::mutex> lock(mu_);
        connects_.push_back({host_id, tcp_addr, tcp_port});
        ++connects_entered_;
        cv_.notify_all();
        cv_.wait(lock, [this, &host_id] {
            return !hold_connects && held_hosts_.count(host_id) == 0;
        });
        if (connect_failures.fetch_sub(1) > 0) {
            return mpcommProviderError("connect to " + tcp_addr + ":" +
                                           std::to_string(tcp_port) +
                                           " (host " + host_id + ")",
                                       connect_error);
        }
        connect_failures.store(0);
        return Status::OK();
    }
    Status queryRemoteBuffer(const std::string& host_id,
                             const std::string& tcp_addr,
                             int tcp_port) override {
        ++query_calls;
        {
            std::unique_lock<std::mutex> lock(mu_);
            queries_.push_back({host_id, tcp_addr, tcp_port});
            cv_.wait(lock, [this, &host_id] {
                return held_hosts_.count(host_id) == 0;
            });
        }
        if (query_failures.fetch_sub(1) > 0) {
            return mpcommProviderError("queryRemoteBuffer from " + tcp_addr +
                                           ":" + std::to_string(tcp_port),
                                       query_error);
        }
        query_failures.store(0);
        return Status::OK();
    }

    MpcommTransferHandle putAsync(uintptr_t local_addr,
                                  const std::string& host_id,
                                  uintptr_t remote_addr,
                                  size_t length) override {
        ++put_calls;
        return issue(true, local_addr, host_id, remote_addr, length);
    }
    MpcommTransferHandle getAsync(uintptr_t local_addr,
                                  const std::string& host_id,
                                  uintptr_t remote_addr,
                                  size_t length) override {
        ++get_calls;
        return issue(false, local_addr, host_id, remote_addr, length);
    }
    bool isTransferComplete(MpcommTransferHandle handle) override {
        ++is_complete_calls;
        if (on_is_complete) on_is_complete(handle);
        std::lock_guard<std::mutex> lock(mu_);
        State* state = liveLocked(handle);
        return state != nullptr && state->complete;
    }
    MpcommTransferOutcome getTransferResult(
        MpcommTransferHandle handle) override {
        ++result_calls;
        std::lock_guard<std::mutex> lock(mu_);
        State* state = liveLocked(handle);
        if (state == nullptr) return {};  // liveLocked() counted it
        if (!state->complete) {
            ++misuse;  // the contract asks isTransferComplete() first
            return {};
        }
        return state->outcome;
    }
    void releaseTransfer(MpcommTransferHandle handle) override {
        ++release_calls;
        std::lock_guard<std::mutex> lock(mu_);
        if (handle == kInvalidMpcommTransferHandle) return;
        State* state = liveLocked(handle);
        if (state != nullptr) ++state->releases;
    }

    // --- test controls --------------------------------------------------
    void releaseConnects() {
        std::lock_guard<std::mutex> lock(mu_);
        hold_connects = false;
        cv_.notify_all();
    }
    // connect() and queryRemoteBuffer() to `host_id` block from now until
    // release(host_id); calls already blocked stay blocked.
    void hold(const std::string& host_id) {
        std::lock_guard<std::mutex> lock(mu_);
        held_hosts_.insert(host_id);
    }
    void release(const std::string& host_id) {
        std::lock_guard<std::mutex> lock(mu_);
        held_hosts_.erase(host_id);
        cv_.notify_all();
    }
    // stopAcceptThread() blocks until releaseStopAccept(): a teardown that
    // is still running on some thread.
    void holdStopAccept() {
        std::lock_guard<std::mutex> lock(mu_);
        stop_accept_held_ = true;
    }
    void releaseStopAccept() {
        std::lock_guard<std::mutex> lock(mu_);
        stop_accept_held_ = false;
        cv_.notify_all();
    }
    // Lets every held call return (test teardown: no thread stays blocked
    // inside a mock that the test no longer watches).
    void releaseAll() {
        std::lock_guard<std::mutex> lock(mu_);
        hold_connects = false;
        held_hosts_.clear();
        stop_accept_held_ = false;
        cv_.notify_all();
    }
    // connect() / queryRemoteBuffer() calls to `host_id` so far, counted on
    // entry (a held call counts).
    int connectCallsTo(const std::string& host_id) {
        std::lock_guard<std::mutex> lock(mu_);
        return countHost(connects_, host_id);
    }
    int queryCallsTo(const std::string& host_id) {
        std::lock_guard<std::mutex> lock(mu_);
        return countHost(queries_, host_id);
    }
    // Handles issued and then released zero times or more than once; 0
    // once every transfer has been released exactly once.
    int handlesNotReleasedOnce() {
        std::lock_guard<std::mutex> lock(mu_);
        int wrong = 0;
        for (const auto& [handle, state] : transfers_) {
            wrong += state.releases == 1 ? 0 : 1;
        }
        return wrong;
    }
    // Waits (bounded by the caller's loop) for n connect() entries.
    int connectsEntered() {
        std::lock_guard<std::mutex> lock(mu_);
        return connects_entered_;
    }
    void complete(MpcommTransferHandle handle, bool ok, size_t bytes,
                  int native_status = 0) {
        std::lock_guard<std::mutex> lock(mu_);
        State& state = transfers_.at(handle);
        state.complete = true;
        state.outcome = {ok, bytes, native_status};
    }
    int releasesOf(MpcommTransferHandle handle) {
        std::lock_guard<std::mutex> lock(mu_);
        auto it = transfers_.find(handle);
        return it == transfers_.end() ? 0 : it->second.releases;
    }
    std::vector<Transfer> transfers() {
        std::lock_guard<std::mutex> lock(mu_);
        return issued_;
    }
    std::vector<Endpoint> connects() {
        std::lock_guard<std::mutex> lock(mu_);
        return connects_;
    }
    std::vector<Endpoint> queries() {
        std::lock_guard<std::mutex> lock(mu_);
        return queries_;
    }
    std::vector<std::string> events() {
        std::lock_guard<std::mutex> lock(mu_);
        return events_;
    }
    std::string initHost() {
        std::lock_guard<std::mutex> lock(mu_);
        return init_host_;
    }
    std::string initDevices() {
        std::lock_guard<std::mutex> lock(mu_);
        return init_devices_;
    }
    int initPort() {
        std::lock_guard<std::mutex> lock(mu_);
        return init_port_;
    }

 private:
    struct State {
        int instance = 0;
        bool complete = false;
        MpcommTransferOutcome outcome;
        int releases = 0;
    };

    static int countHost(const std::vector<Endpoint>& calls,
                         const std::string& host_id) {
        int n = 0;
        for (const auto& call : calls) n += call.host_id == host_id ? 1 : 0;
        return n;
    }

    void event(const char* name) {
        std::lock_guard<std::mutex> lock(mu_);
        events_.push_back(name);
    }

    MpcommTransferHandle issue(bool is_put, uintptr_t local,
                               const std::string& host, uintptr_t remote,
                               size_t length) {
        std::lock_guard<std::mutex> lock(mu_);
        if (shut_down_) ++misuse;
        if (issue_failures.fetch_sub(1) > 0) {
            issued_.push_back({is_put, local, host, remote, length,
                               kInvalidMpcommTransferHandle});
            return kInvalidMpcommTransferHandle;
        }
        issue_failures.store(0);
        if (move_bytes) {
            auto* remote_bytes = reinterpret_cast<char*>(remote);
            auto* local_bytes = reinterpret_cast<char*>(local);
            std::memcpy(is_put ? remote_bytes : local_bytes,
                        is_put ? local_bytes : remote_bytes, length);
        }
        MpcommTransferHandle handle = next_handle_++;
        State& state = transfers_[handle];
        state.instance = instance_;
        if (auto_complete) {
            state.complete = true;
            state.outcome = {true, length, 0};
        }
        issued_.push_back({is_put, local, host, remote, length, handle});
        return handle;
    }

    // The state of a handle that may still be used; counts misuse
    // otherwise.
    State* liveLocked(MpcommTransferHandle handle) {
        auto it = transfers_.find(handle);
        if (shut_down_ || it == transfers_.end() || it->second.releases > 0 ||
            it->second.instance != instance_) {
            ++misuse;
            return nullptr;
        }
        return &it->second;
    }

    mutable std::mutex mu_;
    std::condition_variable cv_;
    std::string init_host_, init_devices_;
    int init_port_ = 0;
    bool initialised_ = false;
    bool shut_down_ = false;
    int instance_ = 0;
    int connects_entered_ = 0;
    std::set<std::string> held_hosts_;
    bool stop_accept_held_ = false;
    MpcommTransferHandle next_handle_ = 1;
    std::map<MpcommTransferHandle, State> transfers_;
    std::vector<Transfer> issued_;
    std::vector<Endpoint> connects_, queries_;
    std::vector<std::string> events_;
};

}  // namespace mooncake::tent::testing
