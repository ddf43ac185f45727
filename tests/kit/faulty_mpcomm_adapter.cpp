#include "kit/faulty_mpcomm_adapter.h"

namespace mooncake::tent::testing {

template <typename T>
T FaultyMpcommAdapter::fieldOf(MpcommTransferHandle handle, T Entry::*field) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = transfers_.find(handle);
    return it == transfers_.end() ? T{} : it->second.*field;
}

void FaultyMpcommAdapter::killPeer(const std::string& host_id) {
    std::lock_guard<std::mutex> lock(mu_);
    dead_.insert(host_id);
    for (auto& [handle, entry] : transfers_) {
        if (entry.host_id == host_id) entry.dead = true;
    }
}

void FaultyMpcommAdapter::revivePeer(const std::string& host_id) {
    std::lock_guard<std::mutex> lock(mu_);
    dead_.erase(host_id);
}

int FaultyMpcommAdapter::releasesOf(MpcommTransferHandle handle) {
    return fieldOf(handle, &Entry::releases);
}

int FaultyMpcommAdapter::handlesIssued() {
    std::lock_guard<std::mutex> lock(mu_);
    return static_cast<int>(transfers_.size());
}

int FaultyMpcommAdapter::handlesNotReleasedOnce() {
    std::lock_guard<std::mutex> lock(mu_);
    int wrong = 0;
    for (const auto& [handle, entry] : transfers_) {
        wrong += entry.releases == 1 ? 0 : 1;
    }
    return wrong;
}

size_t FaultyMpcommAdapter::postedLength(MpcommTransferHandle handle) {
    return fieldOf(handle, &Entry::posted_length);
}

MpcommTransferHandle FaultyMpcommAdapter::lastHandle() {
    std::lock_guard<std::mutex> lock(mu_);
    return transfers_.empty() ? kInvalidMpcommTransferHandle
                              : transfers_.rbegin()->first;
}

std::string FaultyMpcommAdapter::unavailableReason() const {
    return inner_->unavailableReason();
}

Status FaultyMpcommAdapter::init(const std::string& host_id,
                                 const std::string& devices, int tcp_port) {
    ++init_calls;
    if (take(init_failures)) {
        return mpcommProviderError("init (host_id=" + host_id + ", tcp_port=" +
                                       std::to_string(tcp_port) + ")",
                                   init_error);
    }
    ++forwarded_init;
    return inner_->init(host_id, devices, tcp_port);
}

int FaultyMpcommAdapter::tcpPort() const { return inner_->tcpPort(); }

Status FaultyMpcommAdapter::startAcceptThread() {
    ++start_accept_calls;
    if (take(accept_failures)) {
        return mpcommProviderError("startAcceptThread", accept_error);
    }
    ++forwarded_accept;
    return inner_->startAcceptThread();
}

void FaultyMpcommAdapter::stopAcceptThread() {
    ++stop_accept_calls;
    inner_->stopAcceptThread();
}

void FaultyMpcommAdapter::shutdown() {
    ++shutdown_calls;
    inner_->shutdown();
}

Status FaultyMpcommAdapter::registerMemory(void* addr, size_t length) {
    ++register_calls;
    return inner_->registerMemory(addr, length);
}

void FaultyMpcommAdapter::unregisterMemory(void* addr) {
    ++unregister_calls;
    inner_->unregisterMemory(addr);
}

Status FaultyMpcommAdapter::publishBuffer(void* addr, size_t length,
                                          int numa_node) {
    ++publish_calls;
    return inner_->publishBuffer(addr, length, numa_node);
}

void FaultyMpcommAdapter::unpublishBuffer(void* addr) {
    ++unpublish_calls;
    inner_->unpublishBuffer(addr);
}

Status FaultyMpcommAdapter::connect(const std::string& host_id,
                                    const std::string& tcp_addr, int tcp_port) {
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

Status FaultyMpcommAdapter::queryRemoteBuffer(const std::string& host_id,
                                              const std::string& tcp_addr,
                                              int tcp_port) {
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

MpcommTransferHandle FaultyMpcommAdapter::putAsync(uintptr_t local_addr,
                                                   const std::string& host_id,
                                                   uintptr_t remote_addr,
                                                   size_t length) {
    ++put_calls;
    return post(true, local_addr, host_id, remote_addr, length);
}

MpcommTransferHandle FaultyMpcommAdapter::getAsync(uintptr_t local_addr,
                                                   const std::string& host_id,
                                                   uintptr_t remote_addr,
                                                   size_t length) {
    ++get_calls;
    return post(false, local_addr, host_id, remote_addr, length);
}

bool FaultyMpcommAdapter::isTransferComplete(MpcommTransferHandle handle) {
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

MpcommTransferOutcome FaultyMpcommAdapter::getTransferResult(
    MpcommTransferHandle handle) {
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

void FaultyMpcommAdapter::releaseTransfer(MpcommTransferHandle handle) {
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

bool FaultyMpcommAdapter::take(std::atomic<int>& budget) {
    int left = budget.load();
    while (left > 0) {
        if (budget.compare_exchange_weak(left, left - 1)) {
            ++injected;
            return true;
        }
    }
    return false;
}

bool FaultyMpcommAdapter::isDead(const std::string& host_id) {
    std::lock_guard<std::mutex> lock(mu_);
    if (dead_.count(host_id) == 0) return false;
    ++injected;
    return true;
}

Status FaultyMpcommAdapter::handshakeError(const std::string& operation,
                                           const std::string& host_id,
                                           const std::string& tcp_addr,
                                           int tcp_port, int code) {
    return mpcommProviderError(operation + " " + tcp_addr + ":" +
                                   std::to_string(tcp_port) + " (host " +
                                   host_id + ")",
                               code);
}

MpcommTransferHandle FaultyMpcommAdapter::post(bool is_put, uintptr_t local,
                                               const std::string& host_id,
                                               uintptr_t remote,
                                               size_t length) {
    Entry entry;
    entry.host_id = host_id;
    if (isDead(host_id)) {
        entry.dead = true;  // never reaches the provider
    } else {
        if (take(issue_refusals)) return kInvalidMpcommTransferHandle;
        entry.inject_error = take(transfer_errors);
        size_t posted = length;
        if (!entry.inject_error && length > short_by && take(short_transfers)) {
            posted = length - short_by;
        }
        entry.inner = is_put ? inner_->putAsync(local, host_id, remote, posted)
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

FaultyMpcommAdapter::Entry* FaultyMpcommAdapter::liveLocked(
    MpcommTransferHandle handle) {
    auto it = transfers_.find(handle);
    if (it == transfers_.end() || it->second.releases > 0) {
        ++misuse;
        return nullptr;
    }
    return &it->second;
}

}  // namespace mooncake::tent::testing
