// Request and completion mapping of the MPComm transport, as free functions
// over the adapter so that they are testable without a transport: WRITE ->
// putAsync, READ -> getAsync, provider outcome -> TransferStatusEnum.
//
// A task is shared by the submitting thread and any number of pollers:
//  - mpcomm_handle belongs to whichever thread exchanged it for the invalid
//    handle; only that thread asks the adapter about it and releases it (or
//    puts it back), so a handle is released exactly once.
//  - transferred_bytes is stored before status_word (release/acquire), so
//    a reader that sees a final status also sees its byte count.
#pragma once

#include <atomic>
#include <cstddef>
#include <string>

#include "tent/runtime/transport.h"
#include "tent/transport/mpcomm/mpcomm_adapter.h"

namespace mooncake::tent {

struct MpcommTask {
    Request request;
    std::atomic<TransferStatusEnum> status_word{INITIAL};
    std::atomic<size_t> transferred_bytes{0};
    std::atomic<MpcommTransferHandle> mpcomm_handle{
        kInvalidMpcommTransferHandle};

    MpcommTask() = default;
    // A snapshot only of a task no other thread polls (upstream's tests
    // build tasks by value).
    MpcommTask(const MpcommTask& other);
};

// "0x1f000": how the transport's messages print addresses.
std::string mpcommHexAddr(uint64_t addr);

// putAsync for WRITE, getAsync for READ; kInvalidMpcommTransferHandle when
// MPComm refused it.
MpcommTransferHandle issueMpcommTransfer(MpcommAdapter& adapter,
                                         const Request& request,
                                         const std::string& host_id);

// Advances a PENDING task whose handle no other poller holds: when the
// transfer is complete, releases the handle and stores COMPLETED (the
// request length) or FAILED (an error, or fewer bytes than requested).
// True when this call failed the task, so that the caller can suspect its
// peer.
bool pollMpcommTask(MpcommAdapter& adapter, MpcommTask& task);

// Marks a PENDING task FAILED without touching the adapter, whose
// shutdown() took its handle.
void abandonMpcommTask(MpcommTask& task);

}  // namespace mooncake::tent
