#include "tent/transport/mpcomm/mpcomm_task_mapping.h"

#include <glog/logging.h>

#include <sstream>

namespace mooncake::tent {

namespace {

const char* opName(const Request& request) {
    return request.opcode == Request::WRITE ? "WRITE" : "READ";
}

}  // namespace

MpcommTask::MpcommTask(const MpcommTask& other) : request(other.request) {
    status_word.store(other.status_word.load());
    transferred_bytes.store(other.transferred_bytes.load());
    mpcomm_handle.store(other.mpcomm_handle.load());
}

std::string mpcommHexAddr(uint64_t addr) {
    std::ostringstream os;
    os << "0x" << std::hex << addr;
    return os.str();
}

MpcommTransferHandle issueMpcommTransfer(MpcommAdapter& adapter,
                                         const Request& request,
                                         const std::string& host_id) {
    auto local = reinterpret_cast<uintptr_t>(request.source);
    auto remote = static_cast<uintptr_t>(request.target_offset);
    if (request.opcode == Request::WRITE) {
        return adapter.putAsync(local, host_id, remote, request.length);
    }
    return adapter.getAsync(local, host_id, remote, request.length);
}

bool pollMpcommTask(MpcommAdapter& adapter, MpcommTask& task) {
    if (task.status_word.load(std::memory_order_acquire) != PENDING) {
        return false;
    }
    // Taken before it is asked about, so no poller asks about a handle
    // another has just released.
    MpcommTransferHandle handle = task.mpcomm_handle.exchange(
        kInvalidMpcommTransferHandle, std::memory_order_acq_rel);
    if (handle == kInvalidMpcommTransferHandle) return false;
    if (!adapter.isTransferComplete(handle)) {
        task.mpcomm_handle.store(handle, std::memory_order_release);
        return false;
    }
    MpcommTransferOutcome outcome = adapter.getTransferResult(handle);
    adapter.releaseTransfer(handle);

    TransferStatusEnum final_status = COMPLETED;
    size_t transferred = task.request.length;
    if (!outcome.ok) {
        LOG(WARNING) << "MpcommTransport: " << opName(task.request) << " of "
                     << task.request.length << " bytes to remote address "
                     << mpcommHexAddr(task.request.target_offset)
                     << " failed, error=" << outcome.native_status;
        final_status = FAILED;
        transferred = outcome.bytes_transferred;
    } else if (outcome.bytes_transferred < task.request.length) {
        // MPComm counts bytes posted: only a short count is not whole.
        LOG(WARNING) << "MpcommTransport: " << opName(task.request)
                     << " reported success after " << outcome.bytes_transferred
                     << " of " << task.request.length
                     << " bytes; marking it FAILED";
        final_status = FAILED;
        transferred = outcome.bytes_transferred;
    }
    task.transferred_bytes.store(transferred, std::memory_order_relaxed);
    task.status_word.store(final_status, std::memory_order_release);
    return final_status == FAILED;
}

void abandonMpcommTask(MpcommTask& task) {
    task.mpcomm_handle.store(kInvalidMpcommTransferHandle,
                             std::memory_order_release);
    TransferStatusEnum expected = PENDING;
    task.status_word.compare_exchange_strong(expected, FAILED,
                                             std::memory_order_acq_rel);
}

}  // namespace mooncake::tent
