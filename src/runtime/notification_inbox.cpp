// NotificationInbox: bounded per sender and in total (see the header).
#include "runtime/notification_inbox.h"

#include "common/range_check.h"

namespace mooncake::tent {

Status NotificationLimits::read(const Config& conf, NotificationLimits& out) {
    NotificationLimits limits;
    limits.max_message_bytes = conf.get<int64_t>(
        "notification/max_message_bytes", limits.max_message_bytes);
    limits.max_pending_per_peer = conf.get<int64_t>(
        "notification/max_pending_per_peer", limits.max_pending_per_peer);
    limits.max_pending_total = conf.get<int64_t>(
        "notification/max_pending_total", limits.max_pending_total);
    // The message cap also sizes the RPC frame the server accepts for a
    // notification, so it stays well below the frame limits.
    CHECK_STATUS(checkInRange("notification/max_message_bytes",
                              limits.max_message_bytes, 1, 1 << 20));
    CHECK_STATUS(checkPositive("notification/max_pending_per_peer",
                               limits.max_pending_per_peer));
    CHECK_STATUS(checkPositive("notification/max_pending_total",
                               limits.max_pending_total));
    out = limits;
    return Status::OK();
}

Status NotificationInbox::push(const std::string& peer_host,
                               Notification notifi) {
    const size_t bytes = notifi.name.size() + notifi.msg.size();
    if (bytes > static_cast<size_t>(limits_.max_message_bytes)) {
        return Status::InvalidArgument(
            "notification of " + std::to_string(bytes) +
            " bytes exceeds notification/max_message_bytes=" +
            std::to_string(limits_.max_message_bytes));
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (queue_.size() >= static_cast<size_t>(limits_.max_pending_total)) {
        return Status::TooManyRequests(
            "target holds notification/max_pending_total=" +
            std::to_string(limits_.max_pending_total) +
            " undelivered notifications");
    }
    auto it = per_peer_.find(peer_host);
    if (it != per_peer_.end() && it->second >= limits_.max_pending_per_peer) {
        return Status::TooManyRequests(
            "target holds notification/max_pending_per_peer=" +
            std::to_string(limits_.max_pending_per_peer) +
            " undelivered notifications from host " + peer_host);
    }
    if (it == per_peer_.end()) it = per_peer_.emplace(peer_host, 0).first;
    ++it->second;
    queue_.push_back(std::move(notifi));
    return Status::OK();
}

void NotificationInbox::drain(std::vector<Notification>& out) {
    std::deque<Notification> taken;
    {
        std::lock_guard<std::mutex> lock(mu_);
        taken.swap(queue_);
        per_peer_.clear();
    }
    out.reserve(out.size() + taken.size());
    for (auto& entry : taken) out.push_back(std::move(entry));
}

size_t NotificationInbox::pending() const {
    std::lock_guard<std::mutex> lock(mu_);
    return queue_.size();
}

}  // namespace mooncake::tent
