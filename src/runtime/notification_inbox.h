// NotificationInbox: the notifications peers sent this engine, held until
// receiveNotification() takes them (private to libtent).
//
// Bounded, so that a peer that keeps sending to an engine that never polls
// cannot grow its memory: a message above notification/max_message_bytes,
// or one more than notification/max_pending_per_peer undelivered from one
// peer host, or than notification/max_pending_total from all, is refused
// with an error naming the limit; nothing is queued for it.
//
// A peer is the IP address its connection came from, not the sender name
// in the request: that name is whatever the sender writes, so keyed by it
// one sender could claim any number of quotas. Not IP:port either: a
// sender gets a fresh port with every connection it opens. Engines on one
// host therefore share one quota at a target.
//
// What the queue holds is bounded by the keys: every entry costs its name
// and msg bytes plus at most kEntryOverheadBytes (see worstCaseBytes()).
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
    // Undelivered notifications from one peer host (its IP address).
    int64_t max_pending_per_peer = 1024;
    // Undelivered notifications from all senders.
    int64_t max_pending_total = 16384;

    // Reads the notification/* keys; InvalidArgument names a bad one.
    static Status read(const Config& conf, NotificationLimits& limits);

    // Bytes one queued notification costs beyond its name and msg, at
    // most: its deque slot (two std::string, 64 bytes, eight to a 512-byte
    // block: 66 with the block's malloc header, about 3 more for the
    // block map), the spare capacity and malloc header and rounding of
    // the name's and the msg's buffers (up to 32 bytes each), and, when it
    // is its host's only one, the per-host counter's hash node and bucket
    // (72). That is 205; the rest is slack.
    static constexpr int64_t kEntryOverheadBytes = 256;
    // The most a full inbox holds: max_pending_total x (max_message_bytes
    // + kEntryOverheadBytes); 68 MiB with the defaults.
    int64_t worstCaseBytes() const {
        return max_pending_total * (max_message_bytes + kEntryOverheadBytes);
    }
};

class NotificationInbox {
 public:
    explicit NotificationInbox(const NotificationLimits& limits)
        : limits_(limits) {}

    // Queues `notifi`, which came from the host at IP address `peer_host`,
    // or refuses it (TooManyRequests for a full queue, InvalidArgument for
    // an oversized message).
    Status push(const std::string& peer_host, Notification notifi);
    // Appends every queued notification to `out`, oldest first, and
    // empties the queue.
    void drain(std::vector<Notification>& out);
    size_t pending() const;

 private:
    const NotificationLimits limits_;
    mutable std::mutex mu_;
    // In arrival order. drain() takes them all, so an entry need not
    // remember its host.
    std::deque<Notification> queue_;
    // Queued count per peer host; a host with none has no entry.
    std::unordered_map<std::string, int64_t> per_peer_;
};

}  // namespace mooncake::tent
