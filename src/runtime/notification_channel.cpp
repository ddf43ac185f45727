// NotificationChannel: Notify and Probe over the control plane (see the
// header).
#include "runtime/notification_channel.h"

#include <glog/logging.h>
#include <pthread.h>
#include <unistd.h>

#include <algorithm>

#include "net/auth_handshake.h"
#include "runtime/control_client.h"
#include "tent/runtime/control_plane.h"

namespace mooncake::tent {

namespace {

// Notification bytes travel hex-encoded: they are opaque to the engine and
// need not be valid UTF-8, which JSON strings must be.
std::string toHex(const std::string& bytes) {
    static const char kDigits[] = "0123456789abcdef";
    std::string out(bytes.size() * 2, '0');
    for (size_t i = 0; i < bytes.size(); ++i) {
        const auto b = static_cast<unsigned char>(bytes[i]);
        out[2 * i] = kDigits[b >> 4];
        out[2 * i + 1] = kDigits[b & 15];
    }
    return out;
}

int hexValue(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

bool fromHex(const std::string& hex, std::string& out) {
    if (hex.size() % 2 != 0) return false;
    out.assign(hex.size() / 2, '\0');
    for (size_t i = 0; i < out.size(); ++i) {
        const int hi = hexValue(hex[2 * i]), lo = hexValue(hex[2 * i + 1]);
        if (hi < 0 || lo < 0) return false;
        out[i] = static_cast<char>(hi << 4 | lo);
    }
    return true;
}

// The longest sender name a request may carry ("host:port"): a host name
// is at most 253 bytes. The name is checked and never stored, so this
// bounds only the request frame (maxRequestBytes()).
constexpr uint32_t kMaxSenderName = 512;

}  // namespace

NotificationChannel::NotificationChannel(std::string local_name, int timeout_ms,
                                         int64_t max_message_bytes,
                                         int64_t max_queued,
                                         std::string auth_token)
    : local_name_(std::move(local_name)),
      timeout_ms_(timeout_ms),
      max_message_bytes_(max_message_bytes),
      max_queued_(max_queued),
      auth_token_(std::move(auth_token)),
      worker_(&NotificationChannel::run, this) {}

NotificationChannel::~NotificationChannel() {
    stop();
    std::lock_guard<std::mutex> lock(pool_mu_);
    for (auto& entry : idle_) {
        for (int fd : entry.second) ::close(fd);
    }
    idle_.clear();
}

uint32_t NotificationChannel::maxRequestBytes(int64_t max_message_bytes) {
    // Hex doubles the bytes; the rest is the field names and the sender.
    return static_cast<uint32_t>(2 * max_message_bytes + kMaxSenderName + 256);
}

Status NotificationChannel::decode(const Json::Value& request,
                                   std::string& from, Notification& notifi) {
    const Json::Value& sender = request["from"];
    const Json::Value& name = request["name"];
    const Json::Value& msg = request["msg"];
    if (!sender.isString() || sender.asString().empty()) {
        return Status::InvalidArgument(
            "Notify: \"from\" must be a sender name of 1 to " +
            std::to_string(kMaxSenderName) + " characters");
    }
    if (sender.asString().size() > kMaxSenderName) {
        return Status::InvalidArgument(
            "Notify: \"from\" of " + std::to_string(sender.asString().size()) +
            " bytes exceeds the " + std::to_string(kMaxSenderName) +
            " a sender name may have");
    }
    if (!name.isString() || !fromHex(name.asString(), notifi.name)) {
        return Status::InvalidArgument("Notify: \"name\" is not a hex string");
    }
    if (!msg.isString() || !fromHex(msg.asString(), notifi.msg)) {
        return Status::InvalidArgument("Notify: \"msg\" is not a hex string");
    }
    from = sender.asString();
    return Status::OK();
}

Status NotificationChannel::checkSize(const Notification& notifi) const {
    const size_t bytes = notifi.name.size() + notifi.msg.size();
    if (bytes > static_cast<size_t>(max_message_bytes_)) {
        return Status::InvalidArgument(
            "notification of " + std::to_string(bytes) +
            " bytes exceeds notification/max_message_bytes=" +
            std::to_string(max_message_bytes_));
    }
    return Status::OK();
}

Status NotificationChannel::send(const std::string& peer,
                                 const Notification& notifi) {
    CHECK_STATUS(checkSize(notifi));
    Json::Value request(Json::objectValue);
    request["op"] = kOpNotify;
    request["from"] = local_name_;
    request["name"] = toHex(notifi.name);
    request["msg"] = toHex(notifi.msg);
    return call(peer, request);
}

Status NotificationChannel::probe(const std::string& peer) {
    Json::Value request(Json::objectValue);
    request["op"] = kOpProbe;
    return call(peer, request);
}

Status NotificationChannel::call(const std::string& peer,
                                 const Json::Value& request) {
    const net::Deadline deadline = net::deadlineIn(timeout_ms_);
    Status s;
    for (int attempt = 0; attempt < 2; ++attempt) {
        int fd = -1;
        {
            std::lock_guard<std::mutex> lock(pool_mu_);
            auto it = idle_.find(peer);
            if (it != idle_.end() && !it->second.empty()) {
                fd = it->second.back();
                it->second.pop_back();
            }
        }
        const bool pooled = fd >= 0;
        if (!pooled) {
            std::string host;
            uint16_t port = 0;
            CHECK_STATUS(net::parseHostPort(peer, "segment name", host, port));
            s = net::connectWithToken(host, port, auth_token_, deadline, fd);
            if (!s.ok()) break;
        }
        Json::Value reply;
        bool closed = false;
        s = callControlOp(fd, request, deadline, reply, &closed);
        if (s.ok() || s.message().find("peer refused") == 0) {
            // In step either way: the peer answered.
            std::lock_guard<std::mutex> lock(pool_mu_);
            idle_[peer].push_back(fd);
            break;
        }
        ::close(fd);
        // Only a pooled connection the peer closed unread is tried again.
        if (!pooled || !closed) break;
    }
    if (!s.ok()) {
        // A refusal carries the target's own "<code>: <message>": the
        // caller gets that code back (a full queue reads TooManyRequests
        // at both ends).
        Status::Code code = s.code();
        const std::string text(s.message());
        for (Status::Code c :
             {Status::Code::kTooManyRequests, Status::Code::kInvalidArgument}) {
            const std::string prefix =
                "peer refused " + request["op"].asString() + ": " +
                std::string(Status::CodeToString(c)) + ":";
            if (text.rfind(prefix, 0) == 0) code = c;
        }
        return Status(code, std::string(request["op"].asString()) + " to " +
                                peer + " (timeout " +
                                std::to_string(timeout_ms_) +
                                " ms): " + std::string(s.message()));
    }
    return s;
}

Status NotificationChannel::reserve(size_t count) {
    const size_t limit = static_cast<size_t>(max_queued_);
    std::unique_lock<std::mutex> lock(queue_mu_);
    const bool room =
        room_cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms_), [&] {
            return stopping_ || queue_.size() + reserved_ + count <= limit;
        });
    if (stopping_) return Status::InternalError("notification channel stopped");
    if (!room) {
        return Status::TooManyRequests(
            "notification/max_pending_total=" + std::to_string(max_queued_) +
            " notifications are waiting to be sent or to complete; no room "
            "for " +
            std::to_string(count) +
            " more within rpc/timeout_ms=" + std::to_string(timeout_ms_));
    }
    reserved_ += count;
    return Status::OK();
}

void NotificationChannel::release(size_t count) {
    {
        std::lock_guard<std::mutex> lock(queue_mu_);
        reserved_ -= std::min(count, reserved_);
    }
    room_cv_.notify_all();
}

void NotificationChannel::post(const std::vector<std::string>& peers,
                               const Notification& notifi) {
    {
        std::lock_guard<std::mutex> lock(queue_mu_);
        reserved_ -= std::min(peers.size(), reserved_);
        for (const std::string& peer : peers) queue_.emplace_back(peer, notifi);
    }
    queue_cv_.notify_one();
}

Status NotificationChannel::sendQueued(const std::string& peer,
                                       const Notification& notifi) {
    // A target refuses with TooManyRequests while it holds
    // notification/max_pending_per_peer undelivered ones from us: it is
    // alive and makes room when its owner receives, so the notification of
    // a completed submission is tried again (backing off to 50 ms) until
    // timeout_ms after the first refusal, not dropped. Later ones wait
    // behind it, which keeps them in order.
    using SteadyClock = std::chrono::steady_clock;
    const auto deadline =
        SteadyClock::now() + std::chrono::milliseconds(timeout_ms_);
    auto backoff = std::chrono::milliseconds(1);
    for (;;) {
        Status s = send(peer, notifi);
        if (s.code() != Status::Code::kTooManyRequests) return s;
        std::unique_lock<std::mutex> lock(queue_mu_);
        const auto now = SteadyClock::now();
        if (stopping_ || now >= deadline) return s;
        queue_cv_.wait_until(lock, std::min(now + backoff, deadline),
                             [this] { return stopping_; });
        backoff = std::min(2 * backoff, std::chrono::milliseconds(50));
    }
}

void NotificationChannel::run() {
    pthread_setname_np(pthread_self(), "tent-notify");
    std::unique_lock<std::mutex> lock(queue_mu_);
    for (;;) {
        queue_cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
        if (stopping_) break;
        auto entry = std::move(queue_.front());
        queue_.pop_front();
        sending_ = true;
        lock.unlock();
        room_cv_.notify_all();
        Status s = sendQueued(entry.first, entry.second);
        if (!s.ok()) {
            LOG(WARNING) << "Notification '" << entry.second.name << "' to "
                         << entry.first << " not delivered: " << s.message();
        }
        lock.lock();
        sending_ = false;
        ++finished_;
        if (!s.ok() && flushing_) {
            // Tearing down: a peer that does not answer would cost a
            // timeout per notification queued for it.
            const size_t before = queue_.size();
            queue_.erase(std::remove_if(queue_.begin(), queue_.end(),
                                        [&](const auto& queued) {
                                            return queued.first == entry.first;
                                        }),
                         queue_.end());
            dropped_ += before - queue_.size();
            room_cv_.notify_all();
        }
        queue_cv_.notify_all();
    }
}

void NotificationChannel::stop() {
    size_t dropped = 0;
    {
        std::unique_lock<std::mutex> lock(queue_mu_);
        if (!worker_.joinable()) return;
        // What completed submissions queued is still sent while the peers
        // answer: a fixed bound for the whole queue would drop
        // notifications a live peer was about to take on a busy host. The
        // wait restarts with every send that finishes, and a failed send
        // drops the rest queued for its peer (see run()), so each step is
        // bounded by timeout_ms and there are at most max_queued steps.
        flushing_ = true;
        const auto flushed = [this] { return queue_.empty() && !sending_; };
        for (uint64_t seen = finished_; !flushed(); seen = finished_) {
            if (!queue_cv_.wait_for(
                    lock, std::chrono::milliseconds(timeout_ms_),
                    [&] { return flushed() || finished_ != seen; })) {
                break;  // no send finished within timeout_ms
            }
        }
        stopping_ = true;
        dropped = dropped_ + queue_.size();
        queue_.clear();
    }
    queue_cv_.notify_all();
    room_cv_.notify_all();
    worker_.join();
    if (dropped > 0) {
        LOG(WARNING) << "NotificationChannel stopped with " << dropped
                     << " notification(s) not sent: a send failed or none "
                        "finished within rpc/timeout_ms="
                     << timeout_ms_;
    }
}

}  // namespace mooncake::tent
