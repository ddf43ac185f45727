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
    void killPeer(const std::string& host_id) {
        std::lock_guard<std::mutex> lock(mu_);
        dead_.insert(host_id);
        for (auto& [handle, entry] : transfers_) {
            if (entry.host_id == host_id) entry.dead = true;
        }
    }
    // Later calls reach the peer again (transfers of the dead era stay
    // failed).
    void revivePeer(const std::string& host_id) {
        std::lock_guard<std::mutex> lock(mu_);
        dead_.erase(host_id);
    }

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

    int releasesOf(MpcommTransferHandle handle) {
        return fieldOf(handle, &Entry::releases);
    }
    int handlesIssued() {
        std::lock_guard<std::mutex> lock(mu_);
        return static_cast<int>(transfers_.size());
    }
    int handlesNotReleasedOnce() {
        std::lock_guard<std::mutex> lock(mu_);
        int wrong = 0;
        for (const auto& [handle, entry] : transfers_) {
            wrong += entry.releases == 1 ? 0 : 1;
        }
        return wrong;
    }
    // The length the provider was asked to move for `handle` (0: nothing
    // was posted to it).
    size_t postedLength(MpcommTransferHandle handle) {
        return fieldOf(handle, &Entry::posted_length);
    }
    MpcommTransferHandle lastHandle() {
        std::lock_guard<std::mutex> lock(mu_);
        return transfers_.empty() ? kInvalidMpcommTransferHandle
                                  : transfers_.rbegin()->first;
    }

    // --- MpcommAdapter ---------------------------------------------------
    bool available() const noexcept override { return inner_->available(); }
    std::string unavailableReason() const override {
        return inner_->unavailableReason();
    }

    Status init(const std::string& host_id, const std::string& devices,
                int tcp_port) override {
        ++init_calls;
        if (take(init_failures)) {
            return mpcommProviderError(
                "init (host_id=" + host_id +
                    ", tcp_port=" + std::to_string(tcp_port) + ")",
                init_error);
        }
        ++forwarded_init;
        return inner_->init(host_id, devices, tcp_port);
    }
    int tcpPort() const override { return inner_->tcpPort(); }
    Status startAcceptThread() override {
        ++start_accept_calls;
        if (take(accept_failures)) {
            return mpcommProviderError("startAcceptThread", accept_error);
        }
        ++forwarded_accept;
        return inner_->startAcceptThread();
    }
    void stopAcceptThread() override {
        ++stop_accept_calls;
        inner_->stopAcceptThread();
    }
    void shutdown() override {
        ++shutdown_calls;
        inner_->shutdown();
    }

    Status registerMemory(void* addr, size_t length) override {
        ++register_calls;
        return inner_->registerMemory(addr, length);
    }
    void unregisterMemory(void* addr) override {
        ++unregister_calls;
        inner_->unregisterMemory(addr);
    }
    Status publishBuffer(void* addr, size_t length, int numa_node) override {
        ++publish_calls;
        return inner_->publishBuffer(addr, length, numa_node);
    }
    void unpublishBuffer(void* addr) override {
        ++unpublish_calls;
        inner_->unpublishBuffer(addr);
    }

    Status connect(const std::string& host_id, const std::string& tcp_addr,
                   int tcp_port) override {
        ++connect_calls;
        if (isDead(host_id)) {
            return handshakeError("connect to", host_id, tcp_addr, tcp_port,
                                  peer_dead_error);
        }
        if (take(connect_failures)) {
            return handshakeError("connect to", host_id, tcp_addr, tcp_port,
                                  connect_error);
        }
        ++forwarded_connect;
        return inner_->connect(host_id, tcp_addr, tcp_port);
    }
    Status queryRemoteBuffer(const std::string& host_id,
                             const std::string& tcp_addr,
                             int tcp_port) override {
        ++query_calls;
        if (isDead(host_id)) {
            return handshakeError("queryRemoteBuffer from", host_id, tcp_addr,
                                  tcp_port, peer_dead_error);
        }
        if (take(query_failures)) {
            return handshakeError("queryRemoteBuffer from", host_id, tcp_addr,
                                  tcp_port, query_error);
        }
        ++forwarded_query;
        return inner_->queryRemoteBuffer(host_id, tcp_addr, tcp_port);
    }

    MpcommTransferHandle putAsync(uintptr_t local_addr,
                                  const std::string& host_id,
                                  uintptr_t remote_addr,
                                  size_t length) override {
        ++put_calls;
        return post(true, local_addr, host_id, remote_addr, length);
    }
    MpcommTransferHandle getAsync(uintptr_t local_addr,
                                  const std::string& host_id,
                                  uintptr_t remote_addr,
                                  size_t length) override {
        ++get_calls;
        return post(false, local_addr, host_id, remote_addr, length);
    }

    bool isTransferComplete(MpcommTransferHandle handle) override {
        ++is_complete_calls;
        MpcommTransferHandle inner_handle = kInvalidMpcommTransferHandle;
        {
            std::lock_guard<std::mutex> lock(mu_);
            Entry* entry = liveLocked(handle);
            if (entry == nullptr) return false;
            // A dead peer's work is flushed: done, with an error.
            if (entry->dead || entry->inner == kInvalidMpcommTransferHandle) {
                entry->complete = true;
                return true;
            }
            inner_handle = entry->inner;
        }
        // Not under mu_: the provider may take its own locks here.
        bool done = inner_->isTransferComplete(inner_handle);
        std::lock_guard<std::mutex> lock(mu_);
        Entry* entry = liveLocked(handle);
        if (entry == nullptr) return false;
        entry->complete = entry->complete || done || entry->dead;
        return entry->complete;
    }

    MpcommTransferOutcome getTransferResult(
        MpcommTransferHandle handle) override {
        ++result_calls;
        Entry copy;
        {
            std::lock_guard<std::mutex> lock(mu_);
            Entry* entry = liveLocked(handle);
            if (entry == nullptr) return {};
            if (!entry->complete) {
                ++misuse;  // the contract asks isTransferComplete() first
                return {};
            }
            copy = *entry;
        }
        if (copy.dead) return {false, 0, peer_dead_error};
        if (copy.inject_error) return {false, 0, transfer_error};
        return inner_->getTransferResult(copy.inner);
    }

    void releaseTransfer(MpcommTransferHandle handle) override {
        ++release_calls;
        if (handle == kInvalidMpcommTransferHandle) return;
        MpcommTransferHandle inner_handle = kInvalidMpcommTransferHandle;
        {
            std::lock_guard<std::mutex> lock(mu_);
            auto it = transfers_.find(handle);
            if (it == transfers_.end()) {
                ++misuse;
                return;
            }
            if (++it->second.releases != 1) {
                ++misuse;
                return;
            }
            inner_handle = it->second.inner;
        }
        inner_->releaseTransfer(inner_handle);
    }

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
    bool take(std::atomic<int>& budget) {
        int left = budget.load();
        while (left > 0) {
            if (budget.compare_exchange_weak(left, left - 1)) {
                ++injected;
                return true;
            }
        }
        return false;
    }

    bool isDead(const std::string& host_id) {
        std::lock_guard<std::mutex> lock(mu_);
        if (dead_.count(host_id) == 0) return false;
        ++injected;
        return true;
    }

    // Shaped like the libmpcomm adapter's errors, so that the transport's
    // messages read as they would with a real provider.
    static Status handshakeError(const std::string& operation,
                                 const std::string& host_id,
                                 const std::string& tcp_addr, int tcp_port,
                                 int code) {
        return mpcommProviderError(operation + " " + tcp_addr + ":" +
                                       std::to_string(tcp_port) + " (host " +
                                       host_id + ")",
                                   code);
    }

    MpcommTransferHandle post(bool is_put, uintptr_t local,
                              const std::string& host_id, uintptr_t remote,
                              size_t length) {
        Entry entry;
        entry.host_id = host_id;
        if (isDead(host_id)) {
            entry.dead = true;  // never reaches the provider
        } else {
            if (take(issue_refusals)) return kInvalidMpcommTransferHandle;
            entry.inject_error = take(transfer_errors);
            size_t posted = length;
            if (!entry.inject_error && length > short_by &&
                take(short_transfers)) {
                posted = length - short_by;
            }
            entry.inner =
                is_put ? inner_->putAsync(local, host_id, remote, posted)
                       : inner_->getAsync(local, host_id, remote, posted);
            // The provider refused it: so does this adapter.
            if (entry.inner == kInvalidMpcommTransferHandle) {
                return kInvalidMpcommTransferHandle;
            }
            ++forwarded_posts;
            entry.posted_length = posted;
        }
        std::lock_guard<std::mutex> lock(mu_);
        MpcommTransferHandle handle = next_handle_++;
        transfers_[handle] = std::move(entry);
        return handle;
    }

    // One field of a handle's entry, read under the lock; zero for a handle
    // this adapter never issued.
    template <typename T>
    T fieldOf(MpcommTransferHandle handle, T Entry::*field) {
        std::lock_guard<std::mutex> lock(mu_);
        auto it = transfers_.find(handle);
        return it == transfers_.end() ? T{} : it->second.*field;
    }

    // The entry of a handle that may still be used; counts misuse
    // otherwise.
    Entry* liveLocked(MpcommTransferHandle handle) {
        auto it = transfers_.find(handle);
        if (it == transfers_.end() || it->second.releases > 0) {
            ++misuse;
            return nullptr;
        }
        return &it->second;
    }

    std::shared_ptr<MpcommAdapter> inner_;
    std::mutex mu_;
    std::set<std::string> dead_;
    MpcommTransferHandle next_handle_ = 1;
    std::map<MpcommTransferHandle, Entry> transfers_;
};

}  // namespace mooncake::tent::testing
