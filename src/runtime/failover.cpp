// Cross-transport failover: settings, what is never retried, the per-pair
// counters, and TransferEngineImpl::failOver(), the step a status read
// takes when it sees a task FAILED (see failover.h).
#include "runtime/failover.h"

#include <glog/logging.h>

#include <algorithm>
#include <string>

#include "metrics/tent_metrics.h"
#include "runtime/transfer_engine_impl.h"

namespace mooncake::tent {

Status FailoverSettings::load(const Config& conf, FailoverSettings& out) {
    const int64_t max =
        conf.get("max_failover_attempts",
                 int64_t(FailoverSettings::kDefaultMaxAttempts));
    if (max < 0 || max > kMaxMaxAttempts) {
        return Status::InvalidArgument("max_failover_attempts must be in 0.." +
                                       std::to_string(kMaxMaxAttempts) +
                                       ", got " + std::to_string(max));
    }
    out.max_attempts = static_cast<int>(max);
    out.on_poll = conf.get("enable_auto_failover_on_poll", true);
    out.progress_worker = conf.get("enable_progress_worker", false);
    return Status::OK();
}

bool isPermanentFailure(const Status& status) {
    // What the caller asked is wrong, or the memory or the segment is not
    // known: the same request fails the same way on any transport.
    return status.IsInvalidArgument() || status.IsAddressNotRegistered() ||
           status.IsInvalidEntry() || status.IsTooManyRequests() ||
           status.IsMalformedJson();
}

void FailoverCounters::record(TransportType from, TransportType to) {
    counts_[index(from) * kSupportedTransportTypes + index(to)].fetch_add(
        1, std::memory_order_relaxed);
}

uint64_t FailoverCounters::count(TransportType from, TransportType to) const {
    return counts_[index(from) * kSupportedTransportTypes + index(to)].load(
        std::memory_order_relaxed);
}

uint64_t FailoverCounters::total() const {
    uint64_t sum = 0;
    for (const auto& c : counts_) sum += c.load(std::memory_order_relaxed);
    return sum;
}

const FailoverRoute* FailoverRoutes::add(std::unique_ptr<FailoverRoute> route) {
    std::lock_guard<std::mutex> lock(mu_);
    routes_.push_back(std::move(route));
    return routes_.back().get();
}

void FailoverRoutes::release() {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& route : routes_) {
        Status s = route->transport->freeSubBatch(route->sub);
        if (!s.ok()) {
            LOG(WARNING) << "Transport " << route->transport->getName()
                         << " could not free a failover sub-batch: "
                         << s.message();
        }
    }
    routes_.clear();
}

bool TransferEngineImpl::failOver(EngineBatch& batch, size_t task_id,
                                  const FailoverRoute* seen,
                                  TransferStatus& status) {
    using Ref = EngineBatch::TaskRef;
    Ref& ref = batch.tasks[task_id];
    // Canceled (a canceled task is not carried on) or settled already.
    if (ref.verdict.load(std::memory_order_acquire) != Ref::kOpen) {
        return false;
    }
    Transport* from = seen ? seen->transport
                           : (ref.transport ? ref.transport : ref.failed_from);
    // Never routed, or refused for good at submission.
    if (from == nullptr) return false;
    bool expected = false;
    if (!ref.moving.compare_exchange_strong(expected, true,
                                            std::memory_order_acq_rel)) {
        return true;  // another reader is moving it: still PENDING
    }
    struct Release {
        Ref& ref;
        ~Release() { ref.moving.store(false, std::memory_order_release); }
    } release{ref};
    // Moved by another reader since this one polled: read the new route.
    if (ref.moved.load(std::memory_order_acquire) != seen) return true;
    if (ref.verdict.load(std::memory_order_acquire) != Ref::kOpen) {
        return false;
    }
    // What the task was submitted with: the route's request, the engine's
    // copy (kept while a loaded transport keeps none, or taken when a
    // transport refused it at submission), or the failed transport's own
    // (Transport::keepsTaskRequests()).
    Request kept;
    const Request* original = nullptr;
    if (seen != nullptr) {
        original = &seen->request;
    } else if (copy_requests_ || ref.transport == nullptr) {
        original = &ref.request;
    } else {
        Status got = ref.transport->getTaskRequest(ref.sub, ref.sub_task, kept);
        if (got.ok()) {
            original = &kept;
        } else {
            LOG(WARNING) << "Transport " << transportTypeName(typeOf(from))
                         << " cannot give back a failed task's request ("
                         << got.message() << "); the task stays FAILED";
        }
    }
    if (original == nullptr) {
        status.s = FAILED;
        status.transferred_bytes = 0;
        ref.settle(status);
        return false;
    }
    const Request& request = *original;
    const int max = failover_.max_attempts;
    int attempts = seen ? seen->attempts : 0;
    TransportType prev = typeOf(from);
    uint32_t tried = seen ? seen->tried : (1u << prev);
    // A loaded transport that has not carried the task yet: without one,
    // the descriptor is not read (a peer that stopped answering would
    // hold every failed task for a fetch's bound).
    bool untried = false;
    for (const Loaded& l : transports_) {
        untried |= (tried & (1u << l.entry->type)) == 0;
    }
    SegmentDescRef desc;
    Status looked = untried
                        ? segments_->getRemoteCached(desc, request.target_id)
                        : Status::InvalidArgument("no transport left");
    // The selector's view of the request, as the submission built it:
    // where both buffers live and whether the target shares this host and
    // user (a buffer not found reads as host memory).
    RouteContext context;
    const SegmentDescRef local = segments_->getLocal();
    if (looked.ok() && desc) {
        context.segment_type = desc->type;
        context.segment_name = desc->name;
        context.same_machine = request.target_id == LOCAL_SEGMENT_ID ||
                               (!desc->machine_id.empty() &&
                                desc->machine_id == local->machine_id);
        if (desc->type == SegmentType::Memory) {
            const BufferDesc* remote =
                desc->findBuffer(request.target_offset, request.length);
            if (remote != nullptr) {
                context.remote_location = remote->location;
                context.buffer_transports = &remote->transports;
            }
            const std::string* peer_user =
                desc->getMemory().getTransportAttrs(SHM);
            const std::string* own_user =
                local->type == SegmentType::Memory
                    ? local->getMemory().getTransportAttrs(SHM)
                    : nullptr;
            context.same_user = context.same_machine && peer_user && own_user &&
                                *peer_user == *own_user;
        }
        if (local->type == SegmentType::Memory) {
            const BufferDesc* source = local->findBuffer(
                reinterpret_cast<uintptr_t>(request.source), request.length);
            if (source != nullptr) context.local_location = source->location;
        }
    }
    while (true) {
        if (++attempts > max) {
            LOG(WARNING) << "Task failover limit reached (" << max
                         << "), last transport=" << transportTypeName(prev);
            break;
        }
        TransportType next = UNSPEC;
        if (looked.ok() && desc) {
            for (const Loaded& l : transports_) {
                if ((tried & (1u << l.entry->type)) != 0) continue;
                // The hint below skips the selector's registration check:
                // a transport the target did not register the buffer with
                // would only fail again, at the target.
                if (context.buffer_transports != nullptr &&
                    std::find(context.buffer_transports->begin(),
                              context.buffer_transports->end(),
                              l.entry->type) ==
                        context.buffer_transports->end()) {
                    continue;
                }
                Request hinted = request;
                hinted.transport_hint = l.entry->type;
                TransportType chosen = UNSPEC;
                if (selector_.select(hinted, context, chosen).ok()) {
                    next = chosen;
                    break;
                }
            }
        }
        if (next == UNSPEC) {
            LOG(WARNING) << "No more transports available after "
                         << transportTypeName(prev) << " failed";
            break;
        }
        tried |= 1u << next;
        LOG(INFO) << "Transport failover: " << transportTypeName(prev) << " -> "
                  << transportTypeName(next) << " (attempt " << attempts << "/"
                  << max << ")";
        failover_counters_.record(prev, next);
        if (metrics_) metrics_->recordFailover(prev, next);  // served
        auto route = std::make_unique<FailoverRoute>();
        route->transport = transportOf(next);
        route->request = request;
        route->attempts = attempts;
        route->tried = tried;
        Status s = route->transport->allocateSubBatch(route->sub, 1);
        if (s.ok()) {
            s = route->transport->submitTransferTasks(route->sub, {request});
        }
        if (s.ok()) {
            ref.moved.store(batch.routes.add(std::move(route)),
                            std::memory_order_release);
            status.s = PENDING;
            status.transferred_bytes = 0;
            return true;
        }
        LOG(WARNING) << "Transport " << transportTypeName(next)
                     << " rejected a failed-over request: " << s.message();
        if (route->sub) route->transport->freeSubBatch(route->sub);
        if (isPermanentFailure(s)) break;
        prev = next;
    }
    // Out of attempts or transports: FAILED, decided here so that no
    // other reader tries (and logs) again.
    status.s = FAILED;
    status.transferred_bytes = 0;
    ref.settle(status);
    return false;
}

Status TransferEngineImpl::startProgressWorker() {
    if (!failover_.progress_worker) return Status::OK();
    const int64_t interval_us =
        conf_->get("progress_worker/interval_us",
                   int64_t(ProgressWorker::kDefaultIntervalUs));
    if (interval_us < 1 || interval_us > ProgressWorker::kMaxIntervalUs) {
        return Status::InvalidArgument(
            "progress_worker/interval_us must be in 1.." +
            std::to_string(ProgressWorker::kMaxIntervalUs) + ", got " +
            std::to_string(interval_us));
    }
    progress_worker_ = std::make_unique<ProgressWorker>(
        std::chrono::microseconds(interval_us), [this] {
            batches_.forEachLive([this](EngineBatch& batch) {
                const size_t count =
                    batch.published.load(std::memory_order_acquire);
                for (size_t i = 0; i < count; ++i) {
                    if (batch.tasks[i].settled.load(
                            std::memory_order_acquire)) {
                        continue;
                    }
                    TransferStatus status;
                    (void)taskStatus(batch, i, status, /*drive=*/true);
                }
                fireHooksIfOpen(batch);
            });
        });
    progress_worker_->start();
    return Status::OK();
}

}  // namespace mooncake::tent
