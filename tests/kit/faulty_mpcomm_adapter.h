// FaultyMpcommAdapter: an MpcommAdapter that decorates another one (the
// mock, or the libmpcomm adapter over softmpcomm) and injects the provider
// faults a test scripts, so that the transport's recovery rules can be
// driven through MpcommTransport against any provider:
//
//   init / startAcceptThread failing   the next N calls fail; not forwarded
//   connect failing                    the next N calls fail; not forwarded,
//                                      so nothing was established
//   queryRemoteBuffer failing          the next N calls fail; not forwarded
//   issue refusal                      the next N put/get return the invalid
//                                      handle; nothing reaches the provider
//   transfer error                     the next N transfers are posted, and
//                                      complete with an error whatever the
//                                      provider says
//   short transfer                     the next N transfers are posted
//                                      `short_by` bytes short, so only that
//                                      prefix moves and the provider reports
//                                      success with fewer bytes than asked
//   peer death                         killPeer(): connect and query to the
//                                      peer fail, its transfers still in
//                                      flight and every later one complete
//                                      with an error (a dead QP flushes its
//                                      work); revivePeer() ends it
//
// Handles. The wrapper hands out its own handles and maps them to the
// provider's, so that it can count releases per handle even for transfers
// the provider never saw. Every use of a handle that was never issued, was
// already released, or whose result is read before it completed counts as
// misuse; releasesOf() and handlesNotReleasedOnce() check the "released
// exactly once" rule of mpcomm_adapter.h.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "tent/transport/mpcomm/mpcomm_adapter.h"

namespace mooncake::tent::testing {

class FaultyMpcommAdapter : public MpcommAdapter {
 public:
    explicit FaultyMpcommAdapter(std::shared_ptr<MpcommAdapter> inner)
        : inner_(std::move(inner)) {}

    // --- the script (set by the test, read under the call it affects) ---
    std::atomic<int> init_failures{0};
    int init_error = -101;
    std::atomic<int> accept_failures{0};
    int accept_error = -102;
    std::atomic<int> connect_failures{0};
    int connect_error = -103;
    std::atomic<int> query_failures{0};
    int query_error = -104;
    std::atomic<int> issue_refusals{0};
    std::atomic<int> transfer_errors{0};
    int transfer_error = -105;
    std::atomic<int> short_transfers{0};
    size_t short_by = 16;
    int peer_dead_error = -106;

    // A dead peer: calls for it fail from now on, its transfers error.
    void killPeer(const std::string& host_id);
    // Later calls reach the peer again (transfers of the dead era stay
    // failed).
    void revivePeer(const std::string& host_id);

    // --- counters: every call received, and those passed to `inner` ---
    std::atomic<int> init_calls{0}, start_accept_calls{0}, stop_accept_calls{0},
        shutdown_calls{0}, register_calls{0}, unregister_calls{0},
        publish_calls{0}, unpublish_calls{0}, connect_calls{0}, query_calls{0},
        put_calls{0}, get_calls{0}, is_complete_calls{0}, result_calls{0},
        release_calls{0};
    std::atomic<int> forwarded_init{0}, forwarded_accept{0},
        forwarded_connect{0}, forwarded_query{0}, forwarded_posts{0};
    // Faults actually injected, all kinds together.
    std::atomic<int> injected{0};
    std::atomic<int> misuse{0};

    int releasesOf(MpcommTransferHandle handle);
    int handlesIssued();
    int handlesNotReleasedOnce();
    // The length the provider was asked to move for `handle` (0: nothing
    // was posted to it).
    size_t postedLength(MpcommTransferHandle handle);
    MpcommTransferHandle lastHandle();

    // --- MpcommAdapter ---------------------------------------------------
    bool available() const noexcept override { return inner_->available(); }
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

 private:
    struct Entry {
        std::string host_id;
        MpcommTransferHandle inner = kInvalidMpcommTransferHandle;
        size_t posted_length = 0;
        bool inject_error = false;
        bool dead = false;
        bool complete = false;
        int releases = 0;
    };

    // Consumes one scripted failure; false when none is left. Exact under
    // concurrency: never goes below zero.
    bool take(std::atomic<int>& budget);
    bool isDead(const std::string& host_id);
    // Shaped like the libmpcomm adapter's errors, so that the transport's
    // messages read as they would with a real provider.
    static Status handshakeError(const std::string& operation,
                                 const std::string& host_id,
                                 const std::string& tcp_addr, int tcp_port,
                                 int code);
    MpcommTransferHandle post(bool is_put, uintptr_t local,
                              const std::string& host_id, uintptr_t remote,
                              size_t length);
    // One field of a handle's entry, read under the lock; zero for a handle
    // this adapter never issued.
    template <typename T>
    T fieldOf(MpcommTransferHandle handle, T Entry::*field);
    // The entry of a handle that may still be used; counts misuse
    // otherwise.
    Entry* liveLocked(MpcommTransferHandle handle);

    std::shared_ptr<MpcommAdapter> inner_;
    std::mutex mu_;
    std::set<std::string> dead_;
    MpcommTransferHandle next_handle_ = 1;
    std::map<MpcommTransferHandle, Entry> transfers_;
};

}  // namespace mooncake::tent::testing
