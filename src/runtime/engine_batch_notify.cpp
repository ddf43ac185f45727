// TransferEngineImpl notifications: a submission's notification sent once
// its data is complete at the target, plain send/receive, and the liveness
// probe, all over the control plane's RPC (NotificationChannel).
//
// Why the RPC and not each transport: MPComm has no messages of its own,
// and one path for every transport keeps the one rule that matters in one
// place. A transport reports a task COMPLETED only once the target holds
// its data, and a notification is sent only after every task of its
// submission read COMPLETED, so it cannot overtake the data.
#include <glog/logging.h>

#include <set>

#include "net/auth_handshake.h"
#include "runtime/transfer_engine_impl.h"

namespace mooncake::tent {

Status TransferEngineImpl::startNotifications() {
    NotificationLimits limits;
    CHECK_STATUS(NotificationLimits::read(*conf_, limits));
    const int timeout_ms =
        conf_->get("rpc/timeout_ms", P2PSegmentFetcher::kDefaultTimeoutMs);
    std::string auth_token;
    CHECK_STATUS(net::readAuthToken(*conf_, auth_token));
    inbox_ = std::make_unique<NotificationInbox>(limits);
    channel_ = std::make_unique<NotificationChannel>(
        local_segment_name_, timeout_ms, limits.max_message_bytes,
        limits.max_pending_total, std::move(auth_token));
    NotificationInbox* inbox = inbox_.get();
    // The per-peer bound is kept per host the request came from (see
    // notification_inbox.h); the sender's name is checked, not trusted.
    control_->servePeerOp(
        kOpNotify,
        NotificationChannel::maxRequestBytes(limits.max_message_bytes),
        [inbox](const std::string& peer, const Json::Value& request,
                Json::Value&) {
            std::string from;
            Notification notifi;
            CHECK_STATUS(NotificationChannel::decode(request, from, notifi));
            return inbox->push(peer.substr(0, peer.rfind(':')),
                               std::move(notifi));
        });
    control_->serveOp(kOpProbe, 64, [](const Json::Value&, Json::Value&) {
        return Status::OK();
    });
    return Status::OK();
}

namespace {

Status peerNameOf(SegmentManager& segments, SegmentID id, std::string& name) {
    SegmentDescRef desc;
    CHECK_STATUS(segments.getRemoteCached(desc, id));
    if (!desc || desc->name.empty()) {
        return noSegmentDescriptor(id);
    }
    name = desc->name;
    return Status::OK();
}

}  // namespace

Status TransferEngineImpl::submitTransfer(
    BatchID batch_id, const std::vector<Request>& request_list,
    const Notification& notifi) {
    if (!available()) return notAvailable();
    // Everything that can refuse the notification does so before any task
    // is submitted, so a refused call submitted nothing.
    EngineBatch::NotifyHook hook;
    hook.notifi = notifi;
    std::set<SegmentID> targets;
    for (const Request& request : request_list) {
        targets.insert(request.target_id);
    }
    for (SegmentID target : targets) {
        std::string name;
        Status s = peerNameOf(*segments_, target, name);
        if (!s.ok()) {
            return Status(s.code(),
                          "submitTransfer: cannot address the notification: " +
                              std::string(s.message()));
        }
        hook.peers.push_back(std::move(name));
    }
    // The channel holds the limit the engine started with.
    Status size = channel_->checkSize(notifi);
    if (!size.ok()) {
        return Status(size.code(),
                      "submitTransfer: " + std::string(size.message()));
    }
    // Room in the send queue is held from here, so a notification whose
    // submission completes is never dropped for a full queue: a submitter
    // outrunning the network waits here instead.
    const size_t peers = hook.peers.size();
    CHECK_STATUS(channel_->reserve(peers));
    Status s = submitInternal(batch_id, request_list, &hook);
    if (!s.ok()) channel_->release(peers);
    return s;
}

void TransferEngineImpl::fireNotifyHooks(EngineBatch& batch, bool wait) {
    std::unique_lock<std::mutex> lock(batch.hooks_mu, std::defer_lock);
    if (wait) {
        lock.lock();
    } else if (!lock.try_lock()) {
        return;  // another reader is at it
    }
    const size_t published = batch.published.load(std::memory_order_acquire);
    for (EngineBatch::NotifyHook& hook : batch.hooks) {
        if (hook.done || hook.end > published) continue;
        bool final = true;
        size_t failed_task = hook.end;
        TransferStatusEnum failed_as = COMPLETED;
        for (size_t i = hook.begin; i < hook.end && final; ++i) {
            TransferStatus status;
            if (!taskStatus(batch, i, status).ok() || status.s == PENDING ||
                status.s == INITIAL) {
                final = false;
            } else if (status.s != COMPLETED && failed_task == hook.end) {
                failed_task = i;
                failed_as = status.s;
            }
        }
        if (!final) continue;
        hook.done = true;
        batch.open_hooks.fetch_sub(1, std::memory_order_release);
        if (failed_task != hook.end) {
            channel_->release(hook.peers.size());
            LOG(WARNING) << "Notification '" << hook.notifi.name
                         << "' not sent: task " << failed_task << " ended "
                         << transferStatusName(failed_as);
            continue;
        }
        channel_->post(hook.peers, hook.notifi);
    }
}

Status TransferEngineImpl::sendNotification(SegmentID target_id,
                                            const Notification& notifi) {
    if (!available()) return notAvailable();
    std::string peer;
    CHECK_STATUS(peerNameOf(*segments_, target_id, peer));
    return channel_->send(peer, notifi);
}

Status TransferEngineImpl::receiveNotification(
    std::vector<Notification>& notifi_list) {
    if (!available()) return notAvailable();
    notifi_list.clear();
    inbox_->drain(notifi_list);
    return Status::OK();
}

Status TransferEngineImpl::probePeerAliveByID(SegmentID target_id) {
    if (!available()) return notAvailable();
    std::string peer;
    CHECK_STATUS(peerNameOf(*segments_, target_id, peer));
    return channel_->probe(peer);
}

std::shared_ptr<Topology> TransferEngineImpl::localTopology() const {
    return available() ? topology_ : nullptr;
}

}  // namespace mooncake::tent
