// Sub-batches of the MPComm transport: one MPComm transfer per request,
// polled lazily. A submission resolves each distinct target once, starts
// every handshake it needs at once, and waits for them together, at most
// connect_timeout_ms: a peer that does not answer fails only its own tasks,
// and the others' tasks are issued as soon as their peers are ready.
#include <glog/logging.h>

#include <utility>
#include <vector>

#include "tent/transport/mpcomm/mpcomm_transport.h"

namespace mooncake::tent {

namespace {

// The tasks of one submission bound for one target segment.
struct PeerSlot {
    SegmentID target = LOCAL_SEGMENT_ID;
    Status status;
    MpcommPeerView view;
    MpcommPeerRegistry::Ticket ticket;
    bool settled = false;
    std::vector<size_t> tasks;  // indices into the sub-batch
};

}  // namespace

Status MpcommTransport::allocateSubBatch(SubBatchRef& batch, size_t max_size) {
    batch = new MpcommSubBatch(max_size, generation_.load());
    return Status::OK();
}

Status MpcommTransport::freeSubBatch(SubBatchRef& batch) {
    auto* sub = dynamic_cast<MpcommSubBatch*>(batch);
    if (sub == nullptr) {
        return Status::InvalidArgument(
            "MpcommTransport: freeSubBatch got a null or foreign sub-batch");
    }
    if (gate_.enter()) {
        MpcommGateTicket ticket(gate_);
        if (sub->generation == generation_.load()) {
            // Transfers still in flight are released here; the adapter
            // defers the provider release until each one is done.
            size_t count = sub->size();
            for (size_t i = 0; i < count; ++i) {
                MpcommTransferHandle handle =
                    sub->tasks[i].mpcomm_handle.exchange(
                        kInvalidMpcommTransferHandle);
                if (handle != kInvalidMpcommTransferHandle) {
                    adapter_->releaseTransfer(handle);
                }
            }
        }
    }
    delete sub;
    batch = nullptr;
    return Status::OK();
}

Status MpcommTransport::submitTransferTasks(
    SubBatchRef batch, const std::vector<Request>& request_list) {
    auto* sub = dynamic_cast<MpcommSubBatch*>(batch);
    if (sub == nullptr) {
        return Status::InvalidArgument(
            "MpcommTransport: submitTransferTasks got a null or foreign "
            "sub-batch");
    }
    if (!gate_.enter()) {
        return Status::InvalidArgument(
            "MpcommTransport: not installed; cannot submit transfers");
    }
    MpcommGateTicket gate_ticket(gate_);
    if (sub->generation != generation_.load()) {
        return Status::InvalidArgument(
            "MpcommTransport: sub-batch was allocated before the transport "
            "was installed; allocate a new one");
    }
    std::lock_guard<std::mutex> lock(sub->submit_mu);
    const size_t used = sub->count.load(std::memory_order_relaxed);
    if (request_list.size() > sub->capacity() - used) {
        return Status::TooManyRequests(
            "MpcommTransport: sub-batch capacity is " +
            std::to_string(sub->capacity()) + ", " + std::to_string(used) +
            " tasks submitted, " + std::to_string(request_list.size()) +
            " more requested");
    }

    // Batches name few distinct targets: a linear search beats a map.
    std::vector<PeerSlot> slots;
    for (size_t i = 0; i < request_list.size(); ++i) {
        MpcommTask& task = sub->tasks[used + i];
        task.request = request_list[i];
        task.transferred_bytes.store(0, std::memory_order_relaxed);
        task.mpcomm_handle.store(kInvalidMpcommTransferHandle,
                                 std::memory_order_relaxed);
        PeerSlot* slot = nullptr;
        for (PeerSlot& s : slots) {
            if (s.target == request_list[i].target_id) slot = &s;
        }
        if (slot == nullptr) {
            slot = &slots.emplace_back();
            slot->target = request_list[i].target_id;
            slot->status = resolvePeer(slot->target, slot->view);
        }
        slot->tasks.push_back(used + i);
    }

    auto issue = [&](PeerSlot& slot) {
        slot.settled = true;
        for (size_t index : slot.tasks) {
            MpcommTask& task = sub->tasks[index];
            MpcommTransferHandle handle = kInvalidMpcommTransferHandle;
            if (slot.status.ok()) {
                handle = issueMpcommTransfer(*adapter_, task.request,
                                             slot.view.host_id);
                if (handle == kInvalidMpcommTransferHandle) {
                    LOG(ERROR)
                        << "MpcommTransport: MPComm refused a "
                        << (task.request.opcode == Request::WRITE ? "WRITE"
                                                                  : "READ")
                        << " of " << task.request.length << " bytes to "
                        << slot.view.host_id << " at "
                        << mpcommHexAddr(task.request.target_offset);
                }
            }
            task.mpcomm_handle.store(handle, std::memory_order_relaxed);
            task.status_word.store(
                handle == kInvalidMpcommTransferHandle ? FAILED : PENDING,
                std::memory_order_relaxed);
        }
        if (!slot.status.ok()) LOG(ERROR) << slot.status.message();
    };

    const auto deadline =
        MpcommPeerRegistry::Clock::now() +
        std::chrono::milliseconds(settings_.connect_timeout_ms);
    for (;;) {
        std::vector<MpcommPeerRegistry::Ticket*> waiting;
        for (PeerSlot& slot : slots) {
            if (slot.settled) continue;
            if (!slot.status.ok()) {
                issue(slot);
                continue;
            }
            Status error;
            switch (registry_.poll(slot.view, slot.ticket, error)) {
                case MpcommPeerRegistry::Progress::kReady:
                    issue(slot);
                    break;
                case MpcommPeerRegistry::Progress::kFailed:
                    slot.status =
                        Status(error.code(), "MpcommTransport: segment " +
                                                 slot.view.host_id + ": " +
                                                 std::string(error.message()));
                    issue(slot);
                    break;
                case MpcommPeerRegistry::Progress::kWaiting:
                    waiting.push_back(&slot.ticket);
                    break;
            }
        }
        if (waiting.empty()) break;
        if (!registry_.waitForAny(waiting, deadline)) {
            // The handshakes go on and record their outcome; only these
            // tasks stop waiting for them.
            for (PeerSlot& slot : slots) {
                if (slot.settled) continue;
                Status late = MpcommPeerRegistry::handshakeTimeout(
                    slot.view, settings_.connect_timeout_ms);
                slot.status =
                    Status(late.code(), "MpcommTransport: segment " +
                                            slot.view.host_id + ": " +
                                            std::string(late.message()));
                issue(slot);
            }
            break;
        }
    }
    // Publishes the filled tasks to pollers.
    sub->count.store(used + request_list.size(), std::memory_order_release);
    return Status::OK();
}

Status MpcommTransport::getTransferStatus(SubBatchRef batch, int task_id,
                                          TransferStatus& status) {
    auto* sub = dynamic_cast<MpcommSubBatch*>(batch);
    if (sub == nullptr) {
        return Status::InvalidArgument(
            "MpcommTransport: getTransferStatus got a null or foreign "
            "sub-batch");
    }
    if (task_id < 0 || static_cast<size_t>(task_id) >= sub->size()) {
        return Status::InvalidArgument("MpcommTransport: task id " +
                                       std::to_string(task_id) +
                                       " out of range (sub-batch holds " +
                                       std::to_string(sub->size()) + " tasks)");
    }
    MpcommTask& task = sub->tasks[task_id];
    if (gate_.enter()) {
        MpcommGateTicket ticket(gate_);
        if (sub->generation == generation_.load()) {
            if (pollMpcommTask(*adapter_, task)) {
                suspectPeer(task.request.target_id);
            }
        } else {
            abandonMpcommTask(task);
        }
    } else {
        abandonMpcommTask(task);
    }
    status.s = task.status_word.load(std::memory_order_acquire);
    status.transferred_bytes =
        task.transferred_bytes.load(std::memory_order_relaxed);
    return Status::OK();
}

}  // namespace mooncake::tent
