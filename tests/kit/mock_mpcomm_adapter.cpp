#include "kit/mock_mpcomm_adapter.h"

#include <cstring>

namespace mooncake::tent::testing {

std::string MockMpcommAdapter::unavailableReason() const {
    return "mock adapter set unavailable";
}

Status MockMpcommAdapter::init(const std::string& host_id,
                               const std::string& devices, int tcp_port) {
    ++init_calls;
    std::lock_guard<std::mutex> lock(mu_);
    // The real adapter's rule: once per instance until shutdown().
    if (initialised_ && !shut_down_) {
        return Status::InvalidArgument("MPComm init called twice for host " +
                                       host_id);
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

int MockMpcommAdapter::tcpPort() const {
    std::lock_guard<std::mutex> lock(mu_);
    return port_override != 0 ? port_override : init_port_;
}

Status MockMpcommAdapter::startAcceptThread() {
    ++start_accept_calls;
    event("startAcceptThread");
    if (accept_error != 0) {
        return mpcommProviderError("startAcceptThread", accept_error);
    }
    return Status::OK();
}

void MockMpcommAdapter::stopAcceptThread() {
    ++stop_accept_calls;
    std::unique_lock<std::mutex> lock(mu_);
    events_.push_back("stopAcceptThread");
    cv_.wait(lock, [this] { return !stop_accept_held_; });
}

void MockMpcommAdapter::shutdown() {
    std::lock_guard<std::mutex> lock(mu_);
    shut_down_ = true;
    events_.push_back("shutdown");
    // Counted last, under the lock: a test that saw the count may init()
    // again without racing the rest of this call.
    ++shutdown_calls;
}

Status MockMpcommAdapter::registerMemory(void* addr, size_t length) {
    ++register_calls;
    event("registerMemory");
    if (register_error != 0) {
        return mpcommProviderError("registerMemory", register_error);
    }
    return Status::OK();
}

void MockMpcommAdapter::unregisterMemory(void* addr) {
    ++unregister_calls;
    event("unregisterMemory");
}

Status MockMpcommAdapter::publishBuffer(void* addr, size_t length,
                                        int numa_node) {
    ++publish_calls;
    event("publishBuffer");
    bool fail = publish_error != 0;
    if (fail && publish_ok_budget.load() >= 0) {
        fail = publish_ok_budget.fetch_sub(1) <= 0;
    }
    if (fail) return mpcommProviderError("publishBuffer", publish_error);
    return Status::OK();
}

void MockMpcommAdapter::unpublishBuffer(void* addr) {
    ++unpublish_calls;
    event("unpublishBuffer");
}

Status MockMpcommAdapter::connect(const std::string& host_id,
                                  const std::string& tcp_addr, int tcp_port) {
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
                                       std::to_string(tcp_port) + " (host " +
                                       host_id + ")",
                                   connect_error);
    }
    connect_failures.store(0);
    return Status::OK();
}

Status MockMpcommAdapter::queryRemoteBuffer(const std::string& host_id,
                                            const std::string& tcp_addr,
                                            int tcp_port) {
    ++query_calls;
    {
        std::unique_lock<std::mutex> lock(mu_);
        queries_.push_back({host_id, tcp_addr, tcp_port});
        cv_.wait(lock,
                 [this, &host_id] { return held_hosts_.count(host_id) == 0; });
    }
    if (query_failures.fetch_sub(1) > 0) {
        return mpcommProviderError("queryRemoteBuffer from " + tcp_addr + ":" +
                                       std::to_string(tcp_port),
                                   query_error);
    }
    query_failures.store(0);
    return Status::OK();
}

MpcommTransferHandle MockMpcommAdapter::putAsync(uintptr_t local_addr,
                                                 const std::string& host_id,
                                                 uintptr_t remote_addr,
                                                 size_t length) {
    ++put_calls;
    return issue(true, local_addr, host_id, remote_addr, length);
}

MpcommTransferHandle MockMpcommAdapter::getAsync(uintptr_t local_addr,
                                                 const std::string& host_id,
                                                 uintptr_t remote_addr,
                                                 size_t length) {
    ++get_calls;
    return issue(false, local_addr, host_id, remote_addr, length);
}

bool MockMpcommAdapter::isTransferComplete(MpcommTransferHandle handle) {
    ++is_complete_calls;
    if (on_is_complete) on_is_complete(handle);
    std::lock_guard<std::mutex> lock(mu_);
    State* state = liveLocked(handle);
    return state != nullptr && state->complete;
}

MpcommTransferOutcome MockMpcommAdapter::getTransferResult(
    MpcommTransferHandle handle) {
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

void MockMpcommAdapter::releaseTransfer(MpcommTransferHandle handle) {
    ++release_calls;
    std::lock_guard<std::mutex> lock(mu_);
    if (handle == kInvalidMpcommTransferHandle) return;
    State* state = liveLocked(handle);
    if (state != nullptr) ++state->releases;
}

void MockMpcommAdapter::releaseConnects() {
    std::lock_guard<std::mutex> lock(mu_);
    hold_connects = false;
    cv_.notify_all();
}

void MockMpcommAdapter::hold(const std::string& host_id) {
    std::lock_guard<std::mutex> lock(mu_);
    held_hosts_.insert(host_id);
}

void MockMpcommAdapter::release(const std::string& host_id) {
    std::lock_guard<std::mutex> lock(mu_);
    held_hosts_.erase(host_id);
    cv_.notify_all();
}

void MockMpcommAdapter::holdStopAccept() {
    std::lock_guard<std::mutex> lock(mu_);
    stop_accept_held_ = true;
}

void MockMpcommAdapter::releaseStopAccept() {
    std::lock_guard<std::mutex> lock(mu_);
    stop_accept_held_ = false;
    cv_.notify_all();
}

void MockMpcommAdapter::releaseAll() {
    std::lock_guard<std::mutex> lock(mu_);
    hold_connects = false;
    held_hosts_.clear();
    stop_accept_held_ = false;
    cv_.notify_all();
}

int MockMpcommAdapter::connectCallsTo(const std::string& host_id) {
    std::lock_guard<std::mutex> lock(mu_);
    return countHost(connects_, host_id);
}

int MockMpcommAdapter::queryCallsTo(const std::string& host_id) {
    std::lock_guard<std::mutex> lock(mu_);
    return countHost(queries_, host_id);
}

int MockMpcommAdapter::handlesNotReleasedOnce() {
    std::lock_guard<std::mutex> lock(mu_);
    int wrong = 0;
    for (const auto& [handle, state] : transfers_) {
        wrong += state.releases == 1 ? 0 : 1;
    }
    return wrong;
}

int MockMpcommAdapter::connectsEntered() {
    std::lock_guard<std::mutex> lock(mu_);
    return connects_entered_;
}

void MockMpcommAdapter::complete(MpcommTransferHandle handle, bool ok,
                                 size_t bytes, int native_status) {
    std::lock_guard<std::mutex> lock(mu_);
    State& state = transfers_.at(handle);
    state.complete = true;
    state.outcome = {ok, bytes, native_status};
}

int MockMpcommAdapter::releasesOf(MpcommTransferHandle handle) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = transfers_.find(handle);
    return it == transfers_.end() ? 0 : it->second.releases;
}

std::vector<MockMpcommAdapter::Transfer> MockMpcommAdapter::transfers() {
    std::lock_guard<std::mutex> lock(mu_);
    return issued_;
}

std::vector<MockMpcommAdapter::Endpoint> MockMpcommAdapter::connects() {
    std::lock_guard<std::mutex> lock(mu_);
    return connects_;
}

std::vector<MockMpcommAdapter::Endpoint> MockMpcommAdapter::queries() {
    std::lock_guard<std::mutex> lock(mu_);
    return queries_;
}

std::vector<std::string> MockMpcommAdapter::events() {
    std::lock_guard<std::mutex> lock(mu_);
    return events_;
}

std::string MockMpcommAdapter::initHost() {
    std::lock_guard<std::mutex> lock(mu_);
    return init_host_;
}

std::string MockMpcommAdapter::initDevices() {
    std::lock_guard<std::mutex> lock(mu_);
    return init_devices_;
}

int MockMpcommAdapter::initPort() {
    std::lock_guard<std::mutex> lock(mu_);
    return init_port_;
}

int MockMpcommAdapter::countHost(const std::vector<Endpoint>& calls,
                                 const std::string& host_id) {
    int n = 0;
    for (const auto& call : calls) n += call.host_id == host_id ? 1 : 0;
    return n;
}

void MockMpcommAdapter::event(const char* name) {
    std::lock_guard<std::mutex> lock(mu_);
    events_.push_back(name);
}

MpcommTransferHandle MockMpcommAdapter::issue(bool is_put, uintptr_t local,
                                              const std::string& host,
                                              uintptr_t remote, size_t length) {
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

MockMpcommAdapter::State* MockMpcommAdapter::liveLocked(
    MpcommTransferHandle handle) {
    auto it = transfers_.find(handle);
    if (shut_down_ || it == transfers_.end() || it->second.releases > 0 ||
        it->second.instance != instance_) {
        ++misuse;
        return nullptr;
    }
    return &it->second;
}

}  // namespace mooncake::tent::testing
