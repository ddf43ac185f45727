// SegmentPublisher: the local segment's record in a metadata store.
#include "runtime/segment_publisher.h"

#include <glog/logging.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <sstream>

#include "common/json_util.h"
#include "runtime/store_segment_fetcher.h"

namespace mooncake::tent {

namespace {

std::string machineName() {
    char name[256] = {0};
    if (::gethostname(name, sizeof(name) - 1) != 0) return "unknown";
    return name;
}

bool processAlive(int64_t pid) {
    if (pid <= 0) return false;
    return ::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM;
}

std::string hex(uint64_t value) {
    std::ostringstream os;
    os << "0x" << std::hex << value;
    return os.str();
}

// A record read from the store; `why` says what is wrong with one that
// is not a JSON object.
bool parseRecord(const std::string& text, Json::Value& record,
                 std::string* why = nullptr) {
    std::string errs;
    if (!parseJsonText(text, true, record, errs)) {
        if (why) *why = foldJsonErrors(errs);
        return false;
    }
    if (!record.isObject()) {
        if (why) *why = "not a JSON object";
        return false;
    }
    return true;
}

}  // namespace

SegmentPublisher::SegmentPublisher(std::shared_ptr<MetaStore> store,
                                   std::shared_ptr<StoreHealth> health,
                                   std::shared_ptr<SegmentManager> segments,
                                   int ttl_ms, int wait_ms,
                                   std::string rpc_address)
    : store_(std::move(store)),
      health_(std::move(health)),
      segments_(std::move(segments)),
      ttl_ms_(ttl_ms),
      wait_ms_(wait_ms),
      rpc_address_(std::move(rpc_address)) {}

SegmentPublisher::~SegmentPublisher() { stop(); }

std::string SegmentPublisher::record() const {
    SegmentDescRef desc = segments_->getLocal();
    Json::Value holder(Json::objectValue);
    holder["pid"] = static_cast<Json::Int64>(::getpid());
    holder["machine"] = machineName();
    holder["rpc"] = rpc_address_;
    holder["incarnation"] = hex(desc->incarnation);
    Json::Value value(Json::objectValue);
    value["holder"] = holder;
    value["segment"] = segmentToJson(*desc);
    return toCompactJson(value);
}

std::string SegmentPublisher::describeHolder(const std::string& text) {
    Json::Value value;
    std::string why;
    if (!parseRecord(text, value, &why)) {
        return "an unknown holder (the record is not a segment record: " + why +
               ")";
    }
    if (!value["holder"].isObject()) {
        return "an unknown holder (the record is not a segment record)";
    }
    // Store data: read without the accessors that throw on a wrong type.
    const Json::Value& holder = value["holder"];
    return "pid " + std::to_string(jsonInt64Or(holder["pid"], 0)) +
           " on machine " + jsonStringOr(holder["machine"], "?") + " (rpc " +
           jsonStringOr(holder["rpc"], "?") + ", incarnation " +
           jsonStringOr(holder["incarnation"], "?") + ")";
}

Status SegmentPublisher::claim() {
    name_ = segments_->getLocal()->name;
    key_ = storeSegmentKey(name_);
    const std::string value = record();
    const std::string store_text =
        std::string(store_->type()) + " metadata store at " + store_->servers();
    // A holder elsewhere is alive only if it keeps its key alive past
    // one TTL.
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::milliseconds(ttl_ms_);
    while (true) {
        bool swapped = false;
        Status s = store_->compareAndSet(key_, "", value, swapped);
        if (!s.ok()) {
            return Status(s.code(), "cannot reach the " + store_text + ": " +
                                        std::string(s.message()));
        }
        if (swapped) break;
        std::string current;
        bool found = false;
        CHECK_STATUS(store_->get(key_, current, found));
        if (!found) continue;  // lapsed between the two calls
        Json::Value held;
        const bool parsed = parseRecord(current, held);
        // Only an object has members: operator[] on the array or number a
        // foreign record may hold throws.
        const Json::Value& holder =
            parsed ? held["holder"] : Json::Value::nullSingleton();
        const bool here = parsed && holder.isObject() &&
                          jsonStringOr(holder["machine"], "") == machineName();
        const bool refuse_now =
            !parsed || (here && processAlive(jsonInt64Or(holder["pid"], 0)));
        if (here && !refuse_now) {
            CHECK_STATUS(store_->compareAndSet(key_, current, value, swapped));
            if (!swapped) continue;
            LOG(INFO) << "Segment " << name_ << " taken over from "
                      << describeHolder(current) << ", which has exited";
            break;
        }
        if (refuse_now || std::chrono::steady_clock::now() >= deadline) {
            return Status::InvalidArgument(
                "segment name " + name_ + " is held by " +
                describeHolder(current) + " in the " + store_text + " (key " +
                key_ + "); choose another local_segment_name");
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(kRetryMs));
    }
    last_ = value;
    health_->succeeded();
    return Status::OK();
}

Status SegmentPublisher::publish(bool& taken) {
    taken = false;
    const std::string value = record();
    bool swapped = false;
    CHECK_STATUS(store_->compareAndSet(key_, last_, value, swapped));
    if (!swapped) {
        // The key lapsed (an outage longer than the TTL, or a store that
        // lost its data): take it again, unless someone else has.
        CHECK_STATUS(store_->compareAndSet(key_, "", value, swapped));
    }
    if (!swapped) {
        std::string current;
        bool found = false;
        CHECK_STATUS(store_->get(key_, current, found));
        LOG(ERROR) << "Segment " << name_ << " was taken over by "
                   << describeHolder(current)
                   << "; this process no longer publishes it";
        taken = true;
        return Status::OK();
    }
    last_ = value;
    return Status::OK();
}

Status SegmentPublisher::start() {
    {
        std::lock_guard<std::mutex> lock(mu_);
        settled_ = requested_;
    }
    bool taken = false;
    CHECK_STATUS(publish(taken));
    if (taken) {
        return Status::InvalidArgument("segment name " + name_ +
                                       " was taken over while starting");
    }
    thread_ = std::thread([this] { run(); });
    return Status::OK();
}

void SegmentPublisher::publishChange() {
    std::unique_lock<std::mutex> lock(mu_);
    const uint64_t ticket = ++requested_;
    cv_.notify_one();
    if (health_->down() || taken_) return;
    written_cv_.wait_for(lock, std::chrono::milliseconds(wait_ms_),
                         [&] { return settled_ >= ticket || stopping_; });
}

void SegmentPublisher::run() {
    const auto renew_every = std::chrono::milliseconds(ttl_ms_ / 3);
    bool failing = false;
    while (true) {
        uint64_t target = 0;
        bool dirty = false;
        {
            std::unique_lock<std::mutex> lock(mu_);
            cv_.wait_for(
                lock,
                failing ? std::chrono::milliseconds(kRetryMs) : renew_every,
                [this] { return requested_ > settled_ || stopping_; });
            if (stopping_) return;
            target = requested_;
            dirty = target > settled_;
        }
        Status s;
        bool taken = false;
        if (dirty || failing) {
            s = publish(taken);
        } else {
            bool alive = false;
            s = store_->keepAlive(key_, alive);
            if (s.ok() && !alive) s = publish(taken);
        }
        {
            // Waiters are released by a failure too: the store is down
            // now, and the write is retried without them.
            std::lock_guard<std::mutex> lock(mu_);
            if (dirty) settled_ = target;
        }
        written_cv_.notify_all();
        if (!s.ok()) {
            health_->failed(s);
            failing = true;
            continue;
        }
        if (failing) {
            LOG(INFO) << "Segment " << name_ << " published again under "
                      << key_;
        }
        failing = false;
        health_->succeeded();
        if (taken) {
            // Nothing is written any more, so nobody waits for it.
            std::lock_guard<std::mutex> lock(mu_);
            taken_ = true;
            return;
        }
    }
}

void SegmentPublisher::stop() {
    {
        std::lock_guard<std::mutex> lock(mu_);
        if (stopping_) return;
        stopping_ = true;
    }
    cv_.notify_one();
    written_cv_.notify_all();
    if (thread_.joinable()) thread_.join();
    if (last_.empty()) return;
    bool removed = false;
    Status s = store_->compareAndRemove(key_, last_, removed);
    if (!s.ok()) {
        LOG(WARNING) << "Segment " << name_ << " left in the store under "
                     << key_ << " until its TTL (" << ttl_ms_
                     << " ms) lapses: " << s.message();
    }
    last_.clear();
}

}  // namespace mooncake::tent
