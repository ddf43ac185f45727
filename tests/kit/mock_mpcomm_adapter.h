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
    std::string unavailableReason() const override;

    Status init(const std::string& host_id, const std::string& devices,
                int tcp_port) override;
    int tcpPort() const override;
    Status startAcceptThread() override;
    void stopAcceptThread() override;
    void shutdown() override;

    Status registerMemory(void* addr, size_t length) override;
    void unregisterMemory(void* addr) override;
    Status publishBuffer(void* addr, size_t length, int numa_node) override;
    void unpublishBuffer(void* addr) override;

    Status connect(const std::string& host_id, const std::string& tcp_addr,
                   int tcp_port) override;
    Status queryRemoteBuffer(const std::string& host_id,
                             const std::string& tcp_addr,
                             int tcp_port) override;

    MpcommTransferHandle putAsync(uintptr_t local_addr,
                                  const std::string& host_id,
                                  uintptr_t remote_addr,
                                  size_t length) override;
    MpcommTransferHandle getAsync(uintptr_t local_addr,
                                  const std::string& host_id,
                                  uintptr_t remote_addr,
                                  size_t length) override;
    bool isTransferComplete(MpcommTransferHandle handle) override;
    MpcommTransferOutcome getTransferResult(
        MpcommTransferHandle handle) override;
    void releaseTransfer(MpcommTransferHandle handle) override;

    // --- test controls --------------------------------------------------
    void releaseConnects();
    // connect() and queryRemoteBuffer() to `host_id` block from now until
    // release(host_id); calls already blocked stay blocked.
    void hold(const std::string& host_id);
    void release(const std::string& host_id);
    // stopAcceptThread() blocks until releaseStopAccept(): a teardown that
    // is still running on some thread.
    void holdStopAccept();
    void releaseStopAccept();
    // Lets every held call return (test teardown: no thread stays blocked
    // inside a mock that the test no longer watches).
    void releaseAll();
    // connect() / queryRemoteBuffer() calls to `host_id` so far, counted on
    // entry (a held call counts).
    int connectCallsTo(const std::string& host_id);
    int queryCallsTo(const std::string& host_id);
    // Handles issued and then released zero times or more than once; 0
    // once every transfer has been released exactly once.
    int handlesNotReleasedOnce();
    // connect() calls entered so far (a held one counts); tests wait on it
    // with a bound.
    int connectsEntered();
    void complete(MpcommTransferHandle handle, bool ok, size_t bytes,
                  int native_status = 0);
    int releasesOf(MpcommTransferHandle handle);
    std::vector<Transfer> transfers();
    std::vector<Endpoint> connects();
    std::vector<Endpoint> queries();
    std::vector<std::string> events();
    std::string initHost();
    std::string initDevices();
    int initPort();

 private:
    struct State {
        int instance = 0;
        bool complete = false;
        MpcommTransferOutcome outcome;
        int releases = 0;
    };

    static int countHost(const std::vector<Endpoint>& calls,
                         const std::string& host_id);
    void event(const char* name);
    MpcommTransferHandle issue(bool is_put, uintptr_t local,
                               const std::string& host, uintptr_t remote,
                               size_t length);
    // The state of a handle that may still be used; counts misuse
    // otherwise.
    State* liveLocked(MpcommTransferHandle handle);

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
