#include "tent/transport/mpcomm/mpcomm_task_mapping.h"

#include <glog/logging.h>

#include <sstream>

namespace mooncake::tent {

namespace {

const char* opName(const Request& request) {
    return request.opcode == Request::WRITE ? "WRITE" : "READ";
}

}  // namespace

MpcommSubBatch::MpcommSubBatch(size_t capacity, uint64_t generation)
    : tasks(capacity),
      generation(generation),
      next_task(capacity, MpcommSubmitSlot::kNoTask) {}

MpcommTask::MpcommTask(const MpcommTask& other) : request(other.request) {
    status_word.store(other.status_word.load(std::memory_order_acquire),
                      std::memory_order_relaxed);
    transferred_bytes.store(
        other.transferred_bytes.load(std::memory_order_relaxed),
        std::memory_order_relaxed);
    mpcomm_handle.store(other.mpcomm_handle.load(std::memory_order_acquire),
                        std::memory_order_relaxed);
}

MpcommTask& MpcommTask::operator=(const MpcommTask& other) {
    if (this == &other) return *this;
    request = other.request;
    transferred_bytes.store(
        other.transferred_bytes.load(std::memory_order_relaxed),
        std::memory_order_relaxed);
    mpcomm_handle.store(other.mpcomm_handle.load(std::memory_order_acquire),
                        std::memory_order_relaxed);
    // Last, with release, as pollMpcommTask() stores it.
    status_word.store(other.status_word.load(std::memory_order_acquire),
                      std::memory_order_release);
    return *this;
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

void logMpcommRefusal(const MpcommTask& task, const std::string& host_id) {
    LOG(ERROR) << "MpcommTransport: MPComm refused a " << opName(task.request)
               << " of " << task.request.length << " bytes to " << host_id
               << " at " << mpcommHexAddr(task.request.target_offset);
}

bool pollMpcommTask(MpcommAdapter& adapter, MpcommTask& task) {
    if (task.status_word.load(std::memory_order_acquire) != PENDING) {
        return false;
    }
    // Take the handle before asking about it: a handle is touched by one
    // thread at a time, so no poller can ask about a handle that another
    // has just released. A poller that finds none returns; the task is
    // still PENDING from its point of view.
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
        // MPComm counts bytes posted, so a count at or above the length is
        // a whole transfer; only a short one is not trusted.
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
