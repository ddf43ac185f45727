// softmpcomm: the libmpcomm 1.x API implemented over TCP sockets.
//
// This header mirrors the surface of the real MPComm library that TENT's
// MPComm transport calls, so that src/transport/mpcomm/mpcomm_adapter.cpp
// compiles unchanged against either. Only the declarations below are part
// of the contract.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace mpcomm {

constexpr int MPCOMM_SUCCESS = 0;
// Error codes (any non-zero value is an error).
constexpr int MPCOMM_ERR_INVALID_ARG = -1;
constexpr int MPCOMM_ERR_NOT_INITIALIZED = -2;
constexpr int MPCOMM_ERR_BIND = -3;
constexpr int MPCOMM_ERR_CONNECT = -4;
constexpr int MPCOMM_ERR_UNKNOWN_HOST = -5;
constexpr int MPCOMM_ERR_NOT_REGISTERED = -6;
constexpr int MPCOMM_ERR_REMOTE_ACCESS = -7;  // bad key or range at target
constexpr int MPCOMM_ERR_CONNECTION_LOST = -8;
constexpr int MPCOMM_ERR_PROTOCOL = -9;
constexpr int MPCOMM_ERR_INVALID_HANDLE = -10;
constexpr int MPCOMM_ERR_NO_DEVICE = -11;
// The peer made no progress on a data connection for the progress timeout,
// as an RC queue pair reports when its retry count is exceeded.
constexpr int MPCOMM_ERR_RETRY_EXCEEDED = -12;

using TransferHandle = uint64_t;
constexpr TransferHandle INVALID_TRANSFER_HANDLE = 0;

struct RemoteBufferEntry {
    uint64_t addr = 0;
    uint64_t length = 0;
    int numa_node = -1;
    std::vector<uint32_t> rkeys;  // one per rail
};

struct RemoteBufferInfo {
    std::string host_id;
    std::vector<RemoteBufferEntry> entries;
};

struct TransferResult {
    int error_code = MPCOMM_SUCCESS;
    size_t bytes_transferred = 0;
};

class MPComm {
 public:
    MPComm();
    ~MPComm();
    MPComm(const MPComm&) = delete;
    MPComm& operator=(const MPComm&) = delete;

    // device_names: comma-separated rail list ("" = one rail unless
    // MPCOMM_NIC_FILTER names some). Binds the handshake listener on
    // tcp_port (0 or taken -> error, no retry).
    int init(const std::string& host_id, const std::string& device_names,
             int tcp_port);
    int getTcpPort() const;
    int startAcceptThread();
    void stopAcceptThread();
    void shutdown();

    int registerMemory(void* addr, size_t length);
    void unregisterMemory(void* addr);
    int publishBuffer(void* addr, size_t length, int numa_node);
    void unpublishBuffer(void* addr);

    // Handshake with host_id at addr:port; a second connect() to the same
    // host_id replaces its record (and drops the keys it held).
    int connect(const std::string& host_id, const std::string& addr, int port);
    int queryRemoteBuffer(const std::string& host_id, const std::string& addr,
                          int port, RemoteBufferInfo& info);

    TransferHandle putAsync(uintptr_t local_addr, const std::string& host_id,
                            uintptr_t remote_addr, size_t length);
    TransferHandle getAsync(uintptr_t local_addr, const std::string& host_id,
                            uintptr_t remote_addr, size_t length);
    bool isTransferComplete(TransferHandle handle);
    TransferResult getTransferResult(TransferHandle handle);
    void releaseTransfer(TransferHandle handle);

 private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace mpcomm
