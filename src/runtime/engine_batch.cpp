// TransferEngineImpl batches: routing requests to transports and reading
// their progress back.
//
// Freeing a batch never leaves a transfer writing into memory the caller
// may release next: freeBatch() waits, up to batch/free_timeout_ms, for
// every task of the batch to leave PENDING (a transport reports a task
// done only once it no longer touches its local buffer), and refuses with
// an error naming the count and the key when some are still in flight;
// the batch then stays allocated and can be freed again later.
#include <glog/logging.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <map>
#include <thread>

#include "runtime/transfer_engine_impl.h"

namespace mooncake::tent {

// A user batch. Each transport that carries one of its requests gets one
// sub-batch (allocated on first use, with the batch's capacity); a user
// task id maps to (transport, sub-task id), or to no transport when the
// request could not be routed or issued (it then reads FAILED).
struct TransferEngineImpl::Batch {
    struct TaskRef {
        Transport* transport = nullptr;
        Transport::SubBatchRef sub = nullptr;  // transport's sub-batch
        int sub_task = -1;
    };

    explicit Batch(size_t cap) : capacity(cap) {}
    ~Batch() {
        for (size_t i = 0; i < sub_count; ++i) {
            auto& entry = subAt(i);
            Status s = entry.first->freeSubBatch(entry.second);
            if (!s.ok()) {
                LOG(WARNING) << "Transport " << entry.first->getName()
                             << " could not free a sub-batch: " << s.message();
            }
        }
    }

    using SubEntry = std::pair<Transport*, Transport::SubBatchRef>;

    SubEntry& subAt(size_t i) {
        return i < kInlineSubs ? inline_subs[i] : more_subs[i - kInlineSubs];
    }

    // The sub-batch of `transport`, allocated on first use; null when the
    // transport refused to allocate one.
    Transport::SubBatchRef subOf(Transport* transport, Status& s) {
        // A batch uses one or two transports: a scan beats a map.
        for (size_t i = 0; i < sub_count; ++i) {
            if (subAt(i).first == transport) return subAt(i).second;
        }
        Transport::SubBatchRef sub = nullptr;
        s = transport->allocateSubBatch(sub, capacity);
        if (!s.ok()) return nullptr;
        if (sub_count < kInlineSubs) {
            inline_subs[sub_count] = {transport, sub};
        } else {
            more_subs.emplace_back(transport, sub);
        }
        ++sub_count;
        return sub;
    }

    const size_t capacity;
    std::mutex mu;  // guards tasks, the sub-batches and freeing
    std::vector<TaskRef> tasks;
    // The sub-batches, inline for the first two transports so that a
    // batch allocates nothing for them.
    static constexpr size_t kInlineSubs = 2;
    std::array<SubEntry, kInlineSubs> inline_subs{};
    std::vector<SubEntry> more_subs;
    size_t sub_count = 0;
    // Set while freeBatch() waits, so no task is submitted meanwhile.
    bool freeing = false;
};

namespace {

Status unknownBatch(const char* operation, BatchID id) {
    return Status::InvalidArgument(std::string(operation) +
                                   ": unknown batch id " + std::to_string(id));
}

}  // namespace

Status TransferEngineImpl::findBatch(const char* operation, BatchID id,
                                     std::shared_ptr<Batch>& batch) const {
    std::lock_guard<std::mutex> lock(batch_mu_);
    auto it = batches_.find(id);
    if (it == batches_.end()) return unknownBatch(operation, id);
    batch = it->second;
    return Status::OK();
}

Transport* TransferEngineImpl::transportOf(TransportType type) const {
    for (const Loaded& l : transports_) {
        if (l.entry->type == type) return l.transport.get();
    }
    return nullptr;
}

BatchID TransferEngineImpl::allocateBatch(size_t batch_size) {
    if (!available()) {
        LOG(ERROR) << notAvailable().message();
        return 0;
    }
    if (batch_size == 0) {
        LOG(ERROR) << "allocateBatch: batch size must be positive";
        return 0;
    }
    std::lock_guard<std::mutex> lock(batch_mu_);
    BatchID id = next_batch_id_++;
    batches_[id] = std::make_shared<Batch>(batch_size);
    return id;
}

Status TransferEngineImpl::countInFlight(Batch& batch, size_t& in_flight) {
    std::lock_guard<std::mutex> lock(batch.mu);
    return countInFlightLocked(batch, in_flight);
}

Status TransferEngineImpl::countInFlightLocked(Batch& batch,
                                               size_t& in_flight) {
    in_flight = 0;
    for (size_t i = 0; i < batch.tasks.size(); ++i) {
        TransferStatus status;
        // Polling also drives progress on transports that complete tasks
        // when asked.
        CHECK_STATUS(taskStatus(batch, i, status));
        if (status.s == PENDING || status.s == INITIAL) ++in_flight;
    }
    return Status::OK();
}

Status TransferEngineImpl::freeBatch(BatchID batch_id) {
    if (!available()) return notAvailable();
    std::shared_ptr<Batch> batch;
    CHECK_STATUS(findBatch("freeBatch", batch_id, batch));
    size_t in_flight = 0;
    Status s;
    {
        std::lock_guard<std::mutex> lock(batch->mu);
        if (batch->freeing) {
            return Status::InvalidArgument("freeBatch: batch " +
                                           std::to_string(batch_id) +
                                           " is already being freed");
        }
        batch->freeing = true;
        // First count under the same lock: a batch whose tasks are done
        // takes it once.
        s = countInFlightLocked(*batch, in_flight);
    }
    // The configuration and the clock are read only when there is
    // something to wait for: a batch whose tasks are done frees at once.
    int wait_ms = 0;
    std::chrono::steady_clock::time_point deadline;
    if (s.ok() && in_flight > 0) {
        wait_ms =
            conf_->get("batch/free_timeout_ms", kDefaultFreeBatchTimeoutMs);
        deadline = std::chrono::steady_clock::now() +
                   std::chrono::milliseconds(wait_ms);
    }
    // Transports report completion only when polled, so this polls, with a
    // pause that grows to 1 ms so a long wait does not burn a core.
    for (int round = 0; s.ok() && in_flight > 0; ++round) {
        if (std::chrono::steady_clock::now() >= deadline) break;
        if (round < 100) {
            std::this_thread::yield();
        } else {
            std::this_thread::sleep_for(
                std::chrono::microseconds(std::min(1000, 10 * (round - 99))));
        }
        s = countInFlight(*batch, in_flight);
    }
    if (!s.ok() || in_flight > 0) {
        std::lock_guard<std::mutex> lock(batch->mu);
        batch->freeing = false;
        if (!s.ok()) return s;
        return Status::InvalidArgument(
            "freeBatch: batch " + std::to_string(batch_id) + " still has " +
            std::to_string(in_flight) +
            " task(s) in flight after batch/free_timeout_ms=" +
            std::to_string(wait_ms) +
            " ms; it stays allocated, free it again once they finish");
    }
    {
        std::lock_guard<std::mutex> lock(batch_mu_);
        batches_.erase(batch_id);
    }
    // The sub-batches are freed when the last holder lets go; a status
    // poll running concurrently keeps them alive until it returns.
    return Status::OK();
}

Status TransferEngineImpl::submitTransfer(
    BatchID batch_id, const std::vector<Request>& request_list) {
    if (!available()) return notAvailable();
    std::shared_ptr<Batch> batch;
    CHECK_STATUS(findBatch("submitTransfer", batch_id, batch));
    std::lock_guard<std::mutex> lock(batch->mu);
    if (batch->freeing) {
        return Status::InvalidArgument("submitTransfer: batch " +
                                       std::to_string(batch_id) +
                                       " is being freed");
    }
    const size_t base = batch->tasks.size();
    if (base + request_list.size() > batch->capacity) {
        return Status::TooManyRequests(
            "batch " + std::to_string(batch_id) + ": " +
            std::to_string(request_list.size()) +
            " requests exceed the remaining capacity " +
            std::to_string(batch->capacity - base) + " of " +
            std::to_string(batch->capacity));
    }
    batch->tasks.resize(base + request_list.size());

    // Route each request: its TaskRef names the chosen transport until the
    // transport accepts it. Consecutive requests to one segment share a
    // descriptor look-up.
    Batch::TaskRef* refs = batch->tasks.data() + base;
    Transport* first = nullptr;
    bool one_transport = true;
    SegmentID last_target = LOCAL_SEGMENT_ID;
    SegmentDescRef desc;
    for (size_t i = 0; i < request_list.size(); ++i) {
        const Request& request = request_list[i];
        Status s;
        if (!desc || request.target_id != last_target) {
            desc.reset();
            s = segments_->getRemoteCached(desc, request.target_id);
            if (s.ok() && !desc) {
                s = Status::InvalidArgument("no descriptor for segment id " +
                                            std::to_string(request.target_id));
            }
            last_target = request.target_id;
        }
        TransportType chosen = UNSPEC;
        if (s.ok()) s = selector_.select(request, *desc, chosen);
        if (!s.ok()) {
            LOG(WARNING) << "Batch " << batch_id << " task " << base + i
                         << " failed: " << s.message();
            one_transport = false;
            continue;
        }
        refs[i].transport = transportOf(chosen);
        if (i == 0) first = refs[i].transport;
        if (refs[i].transport == nullptr || refs[i].transport != first) {
            one_transport = false;
        }
    }

    // One submission per transport, in transports_ order. The common case,
    // every request on one transport, passes the caller's list as is.
    std::vector<Request> requests;
    std::vector<size_t> positions;
    for (Loaded& loaded : transports_) {
        Transport* transport = loaded.transport.get();
        const std::vector<Request>* list = &request_list;
        if (one_transport) {
            if (transport != first) continue;
        } else {
            requests.clear();
            positions.clear();
            for (size_t i = 0; i < request_list.size(); ++i) {
                if (refs[i].transport != transport) continue;
                requests.push_back(request_list[i]);
                positions.push_back(i);
            }
            if (requests.empty()) continue;
            list = &requests;
        }
        Status s;
        Transport::SubBatchRef sub = batch->subOf(transport, s);
        size_t sub_base = 0;
        if (s.ok()) {
            sub_base = sub->size();
            s = transport->submitTransferTasks(sub, *list);
        }
        for (size_t k = 0; k < list->size(); ++k) {
            Batch::TaskRef& ref = refs[one_transport ? k : positions[k]];
            if (!s.ok()) {
                // Unrouted, so it reads FAILED.
                ref.transport = nullptr;
                continue;
            }
            ref.sub = sub;
            ref.sub_task = static_cast<int>(sub_base + k);
        }
        if (!s.ok()) {
            LOG(WARNING) << "Batch " << batch_id << ": transport "
                         << loaded.entry->name << " rejected " << list->size()
                         << " request(s): " << s.message();
        }
    }
    return Status::OK();
}

Status TransferEngineImpl::taskStatus(Batch& batch, size_t task_id,
                                      TransferStatus& status) {
    // Caller holds batch.mu.
    const Batch::TaskRef& ref = batch.tasks[task_id];
    if (!ref.transport) {
        status.s = FAILED;
        status.transferred_bytes = 0;
        return Status::OK();
    }
    return ref.transport->getTransferStatus(ref.sub, ref.sub_task, status);
}

Status TransferEngineImpl::getTransferStatus(BatchID batch_id, size_t task_id,
                                             TransferStatus& status) {
    if (!available()) return notAvailable();
    std::shared_ptr<Batch> batch;
    CHECK_STATUS(findBatch("getTransferStatus", batch_id, batch));
    std::lock_guard<std::mutex> lock(batch->mu);
    if (task_id >= batch->tasks.size()) {
        return Status::InvalidArgument(
            "getTransferStatus: task id " + std::to_string(task_id) +
            " out of range (batch " + std::to_string(batch_id) + " has " +
            std::to_string(batch->tasks.size()) + " tasks)");
    }
    return taskStatus(*batch, task_id, status);
}

Status TransferEngineImpl::getTransferStatus(
    BatchID batch_id, std::vector<TransferStatus>& status_list) {
    if (!available()) return notAvailable();
    std::shared_ptr<Batch> batch;
    CHECK_STATUS(findBatch("getTransferStatus", batch_id, batch));
    std::lock_guard<std::mutex> lock(batch->mu);
    status_list.assign(batch->tasks.size(), TransferStatus());
    for (size_t i = 0; i < batch->tasks.size(); ++i) {
        CHECK_STATUS(taskStatus(*batch, i, status_list[i]));
    }
    return Status::OK();
}

Status TransferEngineImpl::getTransferStatus(BatchID batch_id,
                                             TransferStatus& overall) {
    std::vector<TransferStatus> list;
    CHECK_STATUS(getTransferStatus(batch_id, list));
    bool pending = false, failed = false;
    overall.transferred_bytes = 0;
    for (const TransferStatus& s : list) {
        overall.transferred_bytes += s.transferred_bytes;
        if (s.s == PENDING || s.s == INITIAL) {
            pending = true;
        } else if (s.s != COMPLETED) {
            failed = true;  // FAILED, TIMEOUT, CANCELED, INVALID
        }
    }
    overall.s = pending ? PENDING : (failed ? FAILED : COMPLETED);
    return Status::OK();
}

}  // namespace mooncake::tent
