// MpcommAdapter: the one boundary between TENT and the MPComm provider.
//
// Everything the MPComm transport asks of libmpcomm goes through this
// interface, so that only src/transport/mpcomm/mpcomm_adapter.cpp includes
// mpcomm.h and every other unit (peer registry, task mapping, transport,
// tests) builds without the provider. Tests substitute a mock here.
//
// RULES OF THE CONTRACT
//
// Types. Nothing from mpcomm.h crosses this interface. A transfer is named
// by an MpcommTransferHandle (a uint64_t; kInvalidMpcommTransferHandle, 0,
// means "not issued"). A finished transfer is described by an
// MpcommTransferOutcome that keeps MPComm's own status code next to the
// portable verdict, so that logs can quote the provider.
//
// Errors. A call that fails returns a Status whose message names the
// operation and its arguments and ends with ", error=<native code>", built
// with mpcommProviderError(); mpcommNativeStatusOf() reads the code back.
// That suffix is how layers above the adapter (which must not know MPComm's
// codes) still report the provider's number. Failures that did not come
// from the provider (not compiled in, not initialised, shut down) carry no
// suffix.
//
// Threads.
//  - Lifecycle calls (init, startAcceptThread, stopAcceptThread, shutdown)
//    are made by one thread at a time and never concurrently with any other
//    call. The transport guarantees this by draining its callers before
//    shutdown().
//  - Every other call is thread-safe and may run concurrently with any call
//    but a lifecycle one.
//  - connect() and queryRemoteBuffer() for one host id are never called
//    concurrently by the transport (the peer registry is single-flight per
//    host id), and connect() is never repeated for a host id that is
//    connected: a second connect() replaces MPComm's connection record,
//    dropping its keys and leaking its queue pairs.
//  - available() may be called anytime; tcpPort() once init() returned.
//
// Handles.
//  - putAsync()/getAsync() return kInvalidMpcommTransferHandle when the
//    transfer could not be posted; nothing needs releasing then.
//  - getTransferResult() is called only after isTransferComplete() returned
//    true for that handle.
//  - releaseTransfer() is called exactly once per valid handle; the handle
//    is not used afterwards. It also accepts a transfer that has not
//    completed yet (a sub-batch freed with work in flight): the adapter then
//    releases it on the provider once the provider is done with it.
//  - releaseTransfer(kInvalidMpcommTransferHandle) is a no-op.
//
// Re-initialisation. init() on an initialised adapter fails with
// InvalidArgument "MPComm init called twice for host <host_id>" and
// changes nothing. init() after shutdown() starts a fresh provider
// instance, so install -> uninstall -> install works; handles of the old
// instance stay dead.
//
// Idempotency and teardown.
//  - unregisterMemory() and unpublishBuffer() on an address that is not
//    registered / published are no-ops.
//  - stopAcceptThread() and shutdown() may be called repeatedly, before
//    init(), and after a failed init(); extra calls are no-ops.
//  - shutdown() quiesces the provider and takes ownership of every transfer
//    still outstanding: handles issued before shutdown() must not be passed
//    to the adapter afterwards (the transport marks such tasks FAILED
//    without touching the adapter). After shutdown() every call that
//    returns a Status fails, putAsync()/getAsync() return the invalid
//    handle, and the void calls do nothing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "tent/common/status.h"

namespace mooncake::tent {

using MpcommTransferHandle = uint64_t;
constexpr MpcommTransferHandle kInvalidMpcommTransferHandle = 0;

// What MPComm reported for a finished transfer. `ok` is MPComm's verdict
// (native_status == success); bytes_transferred counts bytes posted, which
// equals the request length on success. native_status is MPComm's own code,
// kept for logs.
struct MpcommTransferOutcome {
    bool ok = false;
    size_t bytes_transferred = 0;
    int native_status = 0;
};

class MpcommAdapter {
 public:
    virtual ~MpcommAdapter() = default;

    // False when the provider is not compiled in (the stub); install()
    // then fails with unavailableReason() and touches nothing else.
    virtual bool available() const noexcept = 0;
    // Why available() is false, for the engine's "skipped" log line.
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
    // Fetches the keys of every buffer the peer publishes now; the adapter
    // keeps them, callers only learn whether that worked.
    virtual Status queryRemoteBuffer(const std::string& host_id,
                                     const std::string& tcp_addr,
                                     int tcp_port) = 0;

    // One-sided WRITE (put) / READ (get) of `length` bytes between local
    // memory and the peer's `remote_addr`.
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

// "MPComm <operation> failed, error=<native_status>" as an RdmaError (the
// provider is an RDMA library; upstream TENT reports verbs failures so).
Status mpcommProviderError(const std::string& operation, int native_status);
// Reads the native code from a Status built by mpcommProviderError();
// false when the Status carries none.
bool mpcommNativeStatusOf(const Status& status, int& native_status);

}  // namespace mooncake::tent
