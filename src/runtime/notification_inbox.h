// NotificationInbox: the notifications peers sent this engine, held until
// receiveNotification() takes them (private to libtent).
//
// Bounded, so that a peer that keeps sending to an engine that never polls
// cannot grow its memory: a message above notification/max_message_bytes,
// or one more than notification/max_pending_per_peer undelivered from one
// sender, or than notification/max_pending_total from all, is refused with
// an error naming the limit; nothing is queued for it.
#pragma once

#include <cstddef>
#include <deque>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tent/common/config.h"
#include "tent/common/status.h"
#include "tent/common/types.h"

namespace mooncake::tent {

struct NotificationLimits {
    // name + msg bytes of one notification.
    int64_t max_message_bytes = 4096;
    // Undelivered notifications from one sender (its segment name).
    int64_t max_pending_per_peer = 1024;
    // Undelivered notifications from all senders.
    int64_t max_pending_total = 16384;

    // Reads the notification/* keys; InvalidArgument names a bad one.
    static Status read(const Config& conf, NotificationLimits& limits);
};

class NotificationInbox {
 public:
    explicit NotificationInbox(const NotificationLimits& limits)
        : limits_(limits) {}

    // Queues `notifi` from segment `from`, or refuses it (TooManyRequests
    // for a full queue, InvalidArgument for an oversized message).
    Status push(const std::string& from, Notification notifi);
    // Appends every queued notification to `out`, oldest first, and
    // empties the queue.
    void drain(std::vector<Notification>& out);
    size_t pending() const;

 private:
    const NotificationLimits limits_;
    mutable std::mutex mu_;
    // (sender, notification), in arrival order.
    std::deque<std::pair<std::string, Notification>> queue_;
    // Queued count per sender; a sender with none has no entry.
    std::unordered_map<std::string, int64_t> per_peer_;
};

}  // namespace mooncake::tent
