// The tent_* C API's notification, cancellation and NIC-load calls.
#include <glog/logging.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "runtime/c_api_support.h"
#include "tent/transfer_engine.h"

using mooncake::tent::NicLoadStats;
using mooncake::tent::Notification;
using mooncake::tent::Request;
using mooncake::tent::TransferEngine;
using mooncake::tent::capi::copyTruncated;
using mooncake::tent::capi::engineFor;
using mooncake::tent::capi::engineOf;
using mooncake::tent::capi::fail;
using mooncake::tent::capi::report;

namespace {

constexpr size_t kMaxName = sizeof(tent_notifi_record::name) - 1;
constexpr size_t kMaxMsg = sizeof(tent_notifi_record::msg) - 1;

// A C receiver gets the text in fixed records; refusing what would not fit
// there keeps a C-to-C notification whole.
int toNotification(const char* call, const char* name, const char* message,
                   Notification& out) {
    if (!name || !message) {
        return fail(std::string(call) + ": name and message must not be NULL");
    }
    const size_t name_len = std::strlen(name), msg_len = std::strlen(message);
    if (name_len > kMaxName || msg_len > kMaxMsg) {
        return fail(std::string(call) + ": name of " +
                    std::to_string(name_len) + " bytes / message of " +
                    std::to_string(msg_len) + " bytes exceeds the " +
                    std::to_string(kMaxName) + " / " + std::to_string(kMaxMsg) +
                    " a tent_notifi_record holds");
    }
    out.name.assign(name, name_len);
    out.msg.assign(message, msg_len);
    return 0;
}

}  // namespace

extern "C" {

int tent_cancel_task(tent_engine_t engine, tent_batch_id_t batch_id,
                     size_t task_id) {
    TransferEngine* e = engineOf(engine, "tent_cancel_task");
    return e ? report(e->cancelTransfer(batch_id, task_id)) : -1;
}

int tent_submit_notif(tent_engine_t engine, tent_batch_id_t batch_id,
                      tent_request_t* entries, size_t count, const char* name,
                      const char* message) {
    const char* call = "tent_submit_notif";
    TransferEngine* e = engineOf(engine, call);
    Notification notifi;
    std::vector<Request> list;
    if (!e || toNotification(call, name, message, notifi) != 0 ||
        mooncake::tent::capi::toRequests(call, entries, count, list) != 0)
        return -1;
    return report(e->submitTransfer(batch_id, list, notifi));
}

int tent_send_notifs(tent_engine_t engine, tent_segment_id_t handle,
                     const char* name, const char* message) {
    const char* call = "tent_send_notifs";
    TransferEngine* e = engineOf(engine, call);
    Notification notifi;
    if (!e || toNotification(call, name, message, notifi) != 0) return -1;
    return report(e->sendNotification(handle, notifi));
}

int tent_recv_notifs(tent_engine_t engine, tent_notifi_info* info) {
    TransferEngine* e = engineFor(engine, "tent_recv_notifs", info, "info");
    if (!e) return -1;
    std::vector<Notification> list;
    if (report(e->receiveNotification(list)) != 0) return -1;
    info->num_records = 0;
    info->records = nullptr;
    if (list.empty()) return 0;
    auto* records = static_cast<tent_notifi_record*>(
        std::calloc(list.size(), sizeof(tent_notifi_record)));
    if (!records) {
        // The notifications were taken from the engine: say how many are
        // lost rather than return as if none had come.
        return fail("tent_recv_notifs: out of memory for " +
                    std::to_string(list.size()) +
                    " notifications, which are lost");
    }
    for (size_t i = 0; i < list.size(); ++i) {
        const Notification& n = list[i];
        // A C++ sender may send more than a record holds, or NUL bytes;
        // the record keeps a NUL-terminated prefix and the log says so.
        if (n.name.size() > kMaxName || n.msg.size() > kMaxMsg ||
            n.name.find('\0') != std::string::npos ||
            n.msg.find('\0') != std::string::npos) {
            LOG(WARNING) << "tent_recv_notifs: notification " << i << " (name "
                         << n.name.size() << " bytes, message " << n.msg.size()
                         << " bytes) cut to what a tent_notifi_record holds";
        }
        records[i].handle = LOCAL_SEGMENT_ID;
        copyTruncated(n.name, records[i].name, sizeof(records[i].name));
        copyTruncated(n.msg, records[i].msg, sizeof(records[i].msg));
    }
    info->num_records = static_cast<int>(list.size());
    info->records = records;
    return 0;
}

void tent_free_notifs(tent_notifi_info* info) {
    mooncake::tent::capi::freeArray(info, &tent_notifi_info::records,
                                    &tent_notifi_info::num_records);
}

int tent_get_nic_load_stats(tent_engine_t engine, tent_nic_load_stat_t* stats,
                            size_t* count) {
    TransferEngine* e =
        engineFor(engine, "tent_get_nic_load_stats", count, "count");
    if (!e) return -1;
    if (!stats && *count > 0) {
        return fail("tent_get_nic_load_stats: stats is NULL with count " +
                    std::to_string(*count));
    }
    std::vector<NicLoadStats> list;
    if (report(e->getNicLoadStats(list)) != 0) return -1;
    const size_t n = std::min(*count, list.size());
    for (size_t i = 0; i < n; ++i) {
        copyTruncated(list[i].device_name, stats[i].device_name,
                      sizeof(stats[i].device_name));
        stats[i].inflight_bytes = list[i].inflight_bytes;
        stats[i].ewma_bandwidth_bps = list[i].ewma_bandwidth_bps;
    }
    *count = list.size();
    return 0;
}

}  // extern "C"
