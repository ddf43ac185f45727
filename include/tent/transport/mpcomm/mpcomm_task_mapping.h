// Request and completion mapping of the MPComm transport, as free functions
// over the adapter so that they are testable without a transport around
// them: WRITE -> putAsync, READ -> getAsync (one MPComm transfer per
// request), provider outcome -> TransferStatusEnum, handle release.
//
// A task is shared between the submitting thread and any number of polling
// threads, so its state is atomic:
//  - mpcomm_handle is held by whichever thread exchanged it for the invalid
//    handle: only that thread asks the adapter about it, reads its result
//    and releases it (or puts it back when the transfer is still running).
//    So a handle is used by one thread at a time, never after its release,
//    and released exactly once however many threads poll the task.
//  - transferred_bytes is stored before status_word; status_word is stored
//    with release and read with acquire, so a reader that sees a final
//    status also sees its byte count.
#pragma once

#include <atomic>
#include <cstddef>
#include <string>
#include <vector>

#include "tent/common/types.h"
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
    // A copy loads each field of `other` on its own, so it is a snapshot
    // only of a task no other thread is polling: a task being built, or
    // one whose status is final. (Upstream's tests build tasks by value.)
    MpcommTask(const MpcommTask& other);
    MpcommTask& operator=(const MpcommTask& other);
};

// "0x1f000": how the transport's messages print addresses.
std::string mpcommHexAddr(uint64_t addr);

// Posts `request` to `host_id`: putAsync for WRITE, getAsync for READ, with
// request.source as the local address and request.target_offset as the
// remote one. kInvalidMpcommTransferHandle when MPComm refused it.
MpcommTransferHandle issueMpcommTransfer(MpcommAdapter& adapter,
                                         const Request& request,
                                         const std::string& host_id);

// Advances a PENDING task: takes the handle; if the transfer is complete,
// reads the outcome, releases the handle, and stores COMPLETED (success
// whose count of bytes posted is at least the request length; the task
// then reports the request length) or FAILED (an error, or success with
// fewer bytes than requested); else puts the handle back. Does nothing for
// a task that is not PENDING or whose handle another poller holds right
// now. Lazy: only called from status polls. True when this call failed
// the task, so that the caller can suspect its peer.
bool pollMpcommTask(MpcommAdapter& adapter, MpcommTask& task);

// Marks a PENDING task FAILED without touching the adapter (its handle is
// dropped: the provider was shut down and owns it). Used after uninstall().
void abandonMpcommTask(MpcommTask& task);

}  // namespace mooncake::tent
