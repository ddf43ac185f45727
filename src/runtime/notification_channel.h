// NotificationChannel: sends notifications to peer engines over the
// control plane's RPC (the Notify op), and probes them (Probe) (private to
// libtent).
//
// Every transport here reports a task COMPLETED only once its data is in
// place at the target (TCP: the target acknowledged the write; MPComm: the
// provider's completion), so a notification sent after that can never
// overtake its data, whichever transport carried it. send() is the
// blocking path of sendNotification(); post() queues a submission's
// notification for the channel's own thread, so that the status poll that
// saw the submission complete never waits on the network.
//
// Connections are kept per peer and reused; each call takes one out of the
// pool, so no lock is held across the network. A pooled connection the
// peer has dropped (idle timeout) is replaced once, when the peer closed it
// before any reply began, so nothing is delivered twice.
#pragma once

#include <json/json.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tent/common/status.h"
#include "tent/common/types.h"

namespace mooncake::tent {

class NotificationChannel {
 public:
    // `local_name`: this engine's segment name, sent as the request's
    // "from" (the target checks its length; it keys its per-peer bound by
    // the connection's address, not by this name). Every call is bounded by
    // `timeout_ms` (rpc/timeout_ms). `max_message_bytes` and `max_queued` are
    // the local notification/max_message_bytes and
    // notification/max_pending_total. `auth_token` is the cluster token
    // (rpc/auth_token) each call presents; empty: none.
    NotificationChannel(std::string local_name, int timeout_ms,
                        int64_t max_message_bytes, int64_t max_queued,
                        std::string auth_token = "");
    ~NotificationChannel();
    NotificationChannel(const NotificationChannel&) = delete;
    NotificationChannel& operator=(const NotificationChannel&) = delete;

    // Delivers `notifi` to the engine at `peer` ("host:port"); returns its
    // answer (a refusal names the target's limit).
    Status send(const std::string& peer, const Notification& notifi);
    // Holds room in the queue for `count` notifications a submission will
    // post once it completes, so that one admitted is never dropped for a
    // full queue: the submitter waits for room instead (backpressure), up
    // to `timeout_ms`. TooManyRequests naming max_queued when none came.
    Status reserve(size_t count);
    // Gives back room reserve() held for a submission that will not post
    // (a task of it did not complete).
    void release(size_t count);
    // Queues `notifi`, which passed checkSize() when its room was
    // reserved, for each of `peers` in that room; sent in order by the
    // channel's thread. A target that refuses it as full (TooManyRequests)
    // is asked again for up to `timeout_ms`, any other failure is logged.
    void post(const std::vector<std::string>& peers,
              const Notification& notifi);
    // InvalidArgument naming max_message_bytes when `notifi` exceeds it.
    Status checkSize(const Notification& notifi) const;
    // OK when the engine at `peer` answers a probe.
    Status probe(const std::string& peer);
    // Sends what is queued while the peers answer, then stops the thread.
    // It gives up once no send finished within `timeout_ms`; a send that
    // fails drops what is queued for its peer. Dropped notifications are
    // logged with their count.
    void stop();

    // The request payload a notification of `max_message_bytes` makes at
    // most, for the server's per-op cap.
    static uint32_t maxRequestBytes(int64_t max_message_bytes);
    // The Notify handler's decoding of a request; InvalidArgument names a
    // missing or malformed field.
    static Status decode(const Json::Value& request, std::string& from,
                         Notification& notifi);

 private:
    Status call(const std::string& peer, const Json::Value& request);
    // send() for a posted notification: a full target is asked again.
    Status sendQueued(const std::string& peer, const Notification& notifi);
    void run();

    const std::string local_name_;
    const int timeout_ms_;
    const int64_t max_message_bytes_;
    const int64_t max_queued_;
    const std::string auth_token_;

    std::mutex pool_mu_;
    // Idle connections per peer.
    std::map<std::string, std::vector<int>> idle_;

    std::mutex queue_mu_;
    std::condition_variable queue_cv_;
    std::deque<std::pair<std::string, Notification>> queue_;
    // Room held for submissions not yet complete; queue_.size() +
    // reserved_ never exceeds max_queued_.
    size_t reserved_ = 0;
    // Signalled when room is freed or the channel stops.
    std::condition_variable room_cv_;
    bool stopping_ = false;
    bool sending_ = false;   // the thread is sending one it took
    bool flushing_ = false;  // stop() is sending what is queued
    uint64_t finished_ = 0;  // sends finished, delivered or not
    size_t dropped_ = 0;     // dropped by run() while flushing
    std::thread worker_;
};

}  // namespace mooncake::tent
