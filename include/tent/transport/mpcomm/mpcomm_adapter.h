// MpcommAdapter: the one boundary between TENT and the MPComm provider.
// Only src/transport/mpcomm/mpcomm_adapter.cpp includes mpcomm.h; every
// other unit and test builds without the provider, and tests substitute a
// mock here.
//
// RULES OF THE CONTRACT
//
// Types. Nothing from mpcomm.h crosses this interface. A transfer is an
// MpcommTransferHandle (kInvalidMpcommTransferHandle, 0, means "not
// issued"); a finished one an MpcommTransferOutcome, which keeps MPComm's
// own status code next to the portable verdict.
//
// Errors. A provider failure is a Status naming the operation and its
// arguments and ending ", error=<native code>" (mpcommProviderError();
// mpcommNativeStatusOf() reads the code back). Failures not from the
// provider (not compiled in, not initialised, shut down) carry no suffix.
//
// Threads.
//  - Lifecycle calls (init, startAcceptThread, stopAcceptThread, shutdown)
//    come from one thread at a time, never concurrently with any other
//    call (the transport drains its callers before shutdown()).
//  - Every other call is thread-safe.
//  - connect() and queryRemoteBuffer() for one host id are never
//    concurrent, and connect() is never repeated for a connected host id:
//    it would replace MPComm's record, dropping its keys and leaking its
//    queue pairs.
//  - available() may be called anytime; tcpPort() once init() returned.
//
// Handles.
//  - putAsync()/getAsync() return kInvalidMpcommTransferHandle when the
//    transfer could not be posted; nothing needs releasing then.
//  - getTransferResult() only after isTransferComplete() returned true.
//  - releaseTransfer() exactly once per valid handle, which is dead after
//    it; a transfer not yet complete is released by the adapter once the
//    provider is done with it. Releasing the invalid handle is a no-op.
//
// Re-initialisation. init() on an initialised adapter fails with
// InvalidArgument "MPComm init called twice for host <host_id>" and
// changes nothing. init() after shutdown() starts a fresh provider
// instance; handles of the old one stay dead.
//
// Idempotency and teardown.
//  - unregisterMemory()/unpublishBuffer() of an unknown address, and
//    repeated stopAcceptThread()/shutdown() (also before init() or after
//    a failed one), are no-ops.
//  - shutdown() takes ownership of every transfer still outstanding: its
//    handles are never passed to the adapter again. After shutdown() every
//    Status call fails, putAsync()/getAsync() return the invalid handle,
//    and the void calls do nothing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "tent/common/status.h"

namespace mooncake::tent {

using MpcommTransferHandle = uint64_t;
constexpr MpcommTransferHandle kInvalidMpcommTransferHandle = 0;

// `ok`: native_status is MPComm's success; bytes_transferred counts bytes
// posted (the request length on success).
struct MpcommTransferOutcome {
    bool ok = false;
    size_t bytes_transferred = 0;
    int native_status = 0;
};

class MpcommAdapter {
 public:
    virtual ~MpcommAdapter() = default;

    // False for the stub (not compiled in); install() then fails with
    // unavailableReason() and touches nothing else.
    virtual bool available() const noexcept = 0;
    virtual std::string unavailableReason() const {
        return "the MPComm adapter reports itself unavailable";
    }

    // host_id: this process's MPComm identity (the local segment name).
    // device_names: comma-separated RDMA devices ("" lets MPComm choose).
    // tcp_port: the handshake listener port, 1..65535.
    virtual Status init(const std::string& host_id,
                        const std::string& device_names, int tcp_port) = 0;
    // The port the handshake listener is bound to (0 before init()).
    virtual int tcpPort() const = 0;
    virtual Status startAcceptThread() = 0;
    virtual void stopAcceptThread() = 0;
    virtual void shutdown() = 0;

    virtual Status registerMemory(void* addr, size_t length) = 0;
    virtual void unregisterMemory(void* addr) = 0;
    // numa_node -1: let MPComm detect the placement.
    virtual Status publishBuffer(void* addr, size_t length, int numa_node) = 0;
    virtual void unpublishBuffer(void* addr) = 0;

    // Handshake with the peer's listener; see the thread rules above.
    virtual Status connect(const std::string& host_id,
                           const std::string& tcp_addr, int tcp_port) = 0;
    // Fetches the keys of every buffer the peer publishes now; MPComm
    // keeps them.
    virtual Status queryRemoteBuffer(const std::string& host_id,
                                     const std::string& tcp_addr,
                                     int tcp_port) = 0;

    // One-sided WRITE (put) / READ (get) to or from the peer's
    // `remote_addr`.
    virtual MpcommTransferHandle putAsync(uintptr_t local_addr,
                                          const std::string& host_id,
                                          uintptr_t remote_addr,
                                          size_t length) = 0;
    virtual MpcommTransferHandle getAsync(uintptr_t local_addr,
                                          const std::string& host_id,
                                          uintptr_t remote_addr,
                                          size_t length) = 0;
    // Non-blocking.
    virtual bool isTransferComplete(MpcommTransferHandle handle) = 0;
    virtual MpcommTransferOutcome getTransferResult(
        MpcommTransferHandle handle) = 0;
    virtual void releaseTransfer(MpcommTransferHandle handle) = 0;
};

// The libmpcomm-backed adapter in a USE_MPCOMM build, else the unavailable
// stub (available() false; every Status call fails naming the build option).
std::shared_ptr<MpcommAdapter> createDefaultMpcommAdapter();

// "MPComm <operation> failed, error=<native_status>" as an RdmaError, as
// upstream TENT reports verbs failures; mpcommNativeStatusOf() reads the
// code back (false when there is none).
Status mpcommProviderError(const std::string& operation, int native_status);
bool mpcommNativeStatusOf(const Status& status, int& native_status);

}  // namespace mooncake::tent
