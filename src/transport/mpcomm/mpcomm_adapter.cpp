// The only translation unit that includes mpcomm.h: with USE_MPCOMM
// (defined for this file alone) a pass-through to mpcomm::MPComm, which owns
// slicing, NIC/QP selection and its workers; without it, an unavailable
// stub.
#include "tent/transport/mpcomm/mpcomm_adapter.h"

#include <glog/logging.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>

#ifdef USE_MPCOMM
#include <atomic>
#include <mutex>
#include <vector>

#include "mpcomm.h"
#endif

namespace mooncake::tent {

namespace {
constexpr const char kErrorTag[] = ", error=";
}  // namespace

Status mpcommProviderError(const std::string& operation, int native_status) {
    return Status::RdmaError("MPComm " + operation + " failed" + kErrorTag +
                             std::to_string(native_status));
}

bool mpcommNativeStatusOf(const Status& status, int& native_status) {
    const std::string msg(status.message());
    size_t pos = msg.rfind(kErrorTag);
    if (status.ok() || pos == std::string::npos) return false;
    const char* digits = msg.c_str() + pos + sizeof(kErrorTag) - 1;
    if (*digits == '\0') return false;
    char* end = nullptr;
    errno = 0;
    long value = std::strtol(digits, &end, 10);
    if (errno != 0 || end == digits || *end != '\0') return false;
    native_status = static_cast<int>(value);
    return true;
}

#ifdef USE_MPCOMM

namespace {

static_assert(mpcomm::INVALID_TRANSFER_HANDLE == kInvalidMpcommTransferHandle,
              "MPComm's invalid handle must map onto ours unchanged");
static_assert(sizeof(mpcomm::TransferHandle) <= sizeof(MpcommTransferHandle),
              "MPComm handles must fit the neutral handle type");

std::string endpoint(const std::string& addr, int port) {
    return addr + ":" + std::to_string(port);
}

class LibMpcommAdapter : public MpcommAdapter {
 public:
    ~LibMpcommAdapter() override { shutdown(); }

    bool available() const noexcept override { return true; }

    Status init(const std::string& host_id, const std::string& device_names,
                int tcp_port) override {
        if (live()) {
            return Status::InvalidArgument(
                "MPComm init called twice for host " + host_id);
        }
        // MPComm objects are not re-initialised in place; dropping the old
        // one releases what its shutdown() left.
        if (comm_) {
            comm_.reset();
            shut_down_ = false;
            accepting_ = false;
        }
        auto comm = std::make_unique<mpcomm::MPComm>();
        int rc = comm->init(host_id, device_names, tcp_port);
        if (rc != mpcomm::MPCOMM_SUCCESS) {
            return mpcommProviderError(
                "init (host_id=" + host_id + ", devices=" +
                    (device_names.empty() ? "(none)" : device_names) +
                    ", tcp_port=" + std::to_string(tcp_port) + ")",
                rc);
        }
        comm_ = std::move(comm);
        return Status::OK();
    }

    int tcpPort() const override { return live() ? comm_->getTcpPort() : 0; }

    Status startAcceptThread() override {
        CHECK_STATUS(checkLive("startAcceptThread"));
        int rc = comm_->startAcceptThread();
        if (rc != mpcomm::MPCOMM_SUCCESS) {
            return mpcommProviderError("startAcceptThread", rc);
        }
        accepting_ = true;
        return Status::OK();
    }

    void stopAcceptThread() override {
        if (!live() || !accepting_) return;
        comm_->stopAcceptThread();
        accepting_ = false;
    }

    void shutdown() override {
        if (!live()) return;
        stopAcceptThread();
        {
            std::lock_guard<std::mutex> lock(deferred_mu_);
            reapDeferredLocked();
            deferred_.clear();
        }
        comm_->shutdown();
        shut_down_ = true;
    }

    Status registerMemory(void* addr, size_t length) override {
        CHECK_STATUS(checkLive("registerMemory"));
        return rangeCallResult("registerMemory", addr, length,
                               comm_->registerMemory(addr, length));
    }

    void unregisterMemory(void* addr) override {
        if (live()) comm_->unregisterMemory(addr);
    }

    Status publishBuffer(void* addr, size_t length, int numa_node) override {
        CHECK_STATUS(checkLive("publishBuffer"));
        return rangeCallResult("publishBuffer", addr, length,
                               comm_->publishBuffer(addr, length, numa_node));
    }

    void unpublishBuffer(void* addr) override {
        if (live()) comm_->unpublishBuffer(addr);
    }

    Status connect(const std::string& host_id, const std::string& tcp_addr,
                   int tcp_port) override {
        CHECK_STATUS(checkLive("connect"));
        LOG(INFO) << "MPComm: Connecting to " << host_id << " at "
                  << endpoint(tcp_addr, tcp_port);
        int rc = comm_->connect(host_id, tcp_addr, tcp_port);
        if (rc != mpcomm::MPCOMM_SUCCESS) {
            return mpcommProviderError("connect to " +
                                           endpoint(tcp_addr, tcp_port) +
                                           " (host " + host_id + ")",
                                       rc);
        }
        return Status::OK();
    }

    Status queryRemoteBuffer(const std::string& host_id,
                             const std::string& tcp_addr,
                             int tcp_port) override {
        CHECK_STATUS(checkLive("queryRemoteBuffer"));
        mpcomm::RemoteBufferInfo info;
        int rc = comm_->queryRemoteBuffer(host_id, tcp_addr, tcp_port, info);
        if (rc != mpcomm::MPCOMM_SUCCESS) {
            return mpcommProviderError("queryRemoteBuffer from " +
                                           endpoint(tcp_addr, tcp_port) +
                                           " (host " + host_id + ")",
                                       rc);
        }
        // MPComm keeps the keys; the entries are only counted.
        VLOG(1) << "MPComm: " << info.entries.size() << " remote buffers from "
                << host_id;
        return Status::OK();
    }

    MpcommTransferHandle putAsync(uintptr_t local_addr,
                                  const std::string& host_id,
                                  uintptr_t remote_addr,
                                  size_t length) override {
        if (!live()) return kInvalidMpcommTransferHandle;
        return comm_->putAsync(local_addr, host_id, remote_addr, length);
    }

    MpcommTransferHandle getAsync(uintptr_t local_addr,
                                  const std::string& host_id,
                                  uintptr_t remote_addr,
                                  size_t length) override {
        if (!live()) return kInvalidMpcommTransferHandle;
        return comm_->getAsync(local_addr, host_id, remote_addr, length);
    }

    bool isTransferComplete(MpcommTransferHandle handle) override {
        if (!live() || handle == kInvalidMpcommTransferHandle) return true;
        return comm_->isTransferComplete(handle);
    }

    MpcommTransferOutcome getTransferResult(
        MpcommTransferHandle handle) override {
        MpcommTransferOutcome outcome;
        if (!live() || handle == kInvalidMpcommTransferHandle) {
            outcome.native_status = mpcomm::MPCOMM_ERR_INVALID_HANDLE;
            return outcome;
        }
        mpcomm::TransferResult r = comm_->getTransferResult(handle);
        outcome.ok = r.error_code == mpcomm::MPCOMM_SUCCESS;
        outcome.bytes_transferred = r.bytes_transferred;
        outcome.native_status = r.error_code;
        return outcome;
    }

    void releaseTransfer(MpcommTransferHandle handle) override {
        if (!live() || handle == kInvalidMpcommTransferHandle) return;
        std::lock_guard<std::mutex> lock(deferred_mu_);
        // One still in flight is released by a later call, once done.
        if (comm_->isTransferComplete(handle)) {
            comm_->releaseTransfer(handle);
        } else {
            deferred_.push_back(handle);
        }
        reapDeferredLocked();
    }

 private:
    bool live() const { return comm_ != nullptr && !shut_down_; }

    Status checkLive(const char* operation) const {
        if (!comm_) {
            return Status::InvalidArgument(std::string("MPComm ") + operation +
                                           " called before init()");
        }
        if (shut_down_) {
            return Status::InvalidArgument(std::string("MPComm ") + operation +
                                           " called after shutdown()");
        }
        return Status::OK();
    }

    void reapDeferredLocked() {
        for (size_t i = 0; i < deferred_.size();) {
            if (comm_->isTransferComplete(deferred_[i])) {
                comm_->releaseTransfer(deferred_[i]);
                deferred_[i] = deferred_.back();
                deferred_.pop_back();
            } else {
                ++i;
            }
        }
    }

    // e.g. "MPComm registerMemory(0x7f00, 4096) failed, error=<rc>".
    static Status rangeCallResult(const char* operation, void* addr,
                                  size_t length, int rc) {
        if (rc == mpcomm::MPCOMM_SUCCESS) return Status::OK();
        char buf[32];
        snprintf(buf, sizeof(buf), "%p", addr);
        return mpcommProviderError(std::string(operation) + "(" + buf + ", " +
                                       std::to_string(length) + ")",
                                   rc);
    }

    std::unique_ptr<mpcomm::MPComm> comm_;
    bool accepting_ = false;              // lifecycle calls are single-threaded
    std::atomic<bool> shut_down_{false};  // written by shutdown() only

    std::mutex deferred_mu_;
    std::vector<MpcommTransferHandle> deferred_;
};

}  // namespace

std::shared_ptr<MpcommAdapter> createDefaultMpcommAdapter() {
    return std::make_shared<LibMpcommAdapter>();
}

#else  // !USE_MPCOMM

namespace {

constexpr const char kNotCompiledIn[] =
    "MPComm support is not compiled in (built with USE_MPCOMM=OFF; rebuild "
    "with -DUSE_MPCOMM=ON -DMPCOMM_ROOT=<prefix>)";

// Fails every call the same way.
class UnavailableMpcommAdapter : public MpcommAdapter {
 public:
    bool available() const noexcept override { return false; }
    std::string unavailableReason() const override { return kNotCompiledIn; }
    Status init(const std::string&, const std::string&, int) override {
        return Status::NotImplemented(kNotCompiledIn);
    }
    int tcpPort() const override { return 0; }
    Status startAcceptThread() override {
        return Status::NotImplemented(kNotCompiledIn);
    }
    void stopAcceptThread() override {}
    void shutdown() override {}
    Status registerMemory(void*, size_t) override {
        return Status::NotImplemented(kNotCompiledIn);
    }
    void unregisterMemory(void*) override {}
    Status publishBuffer(void*, size_t, int) override {
        return Status::NotImplemented(kNotCompiledIn);
    }
    void unpublishBuffer(void*) override {}
    Status connect(const std::string&, const std::string&, int) override {
        return Status::NotImplemented(kNotCompiledIn);
    }
    Status queryRemoteBuffer(const std::string&, const std::string&,
                             int) override {
        return Status::NotImplemented(kNotCompiledIn);
    }
    MpcommTransferHandle putAsync(uintptr_t, const std::string&, uintptr_t,
                                  size_t) override {
        return kInvalidMpcommTransferHandle;
    }
    MpcommTransferHandle getAsync(uintptr_t, const std::string&, uintptr_t,
                                  size_t) override {
        return kInvalidMpcommTransferHandle;
    }
    bool isTransferComplete(MpcommTransferHandle) override { return true; }
    MpcommTransferOutcome getTransferResult(MpcommTransferHandle) override {
        return MpcommTransferOutcome{};
    }
    void releaseTransfer(MpcommTransferHandle) override {}
};

}  // namespace

std::shared_ptr<MpcommAdapter> createDefaultMpcommAdapter() {
    return std::make_shared<UnavailableMpcommAdapter>();
}

#endif  // USE_MPCOMM

}  // namespace mooncake::tent
