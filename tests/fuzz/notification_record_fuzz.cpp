// The Notify op's request path after framing: a payload parsed as the RPC
// server does (decodeJsonObject, under the JSON limits) and decoded into a
// sender and a notification (NotificationChannel::decode). A decoded record
// has a sender name within its bound (512 bytes) and a name and message no
// longer than half the hex text they came from.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "rpc/rpc_frame.h"
#include "runtime/notification_channel.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace mooncake::tent;
    const std::string payload(reinterpret_cast<const char*>(data), size);
    Json::Value request;
    if (!decodeJsonObject(payload, request).ok()) return 0;
    std::string from;
    Notification notifi;
    if (!NotificationChannel::decode(request, from, notifi).ok()) return 0;
    if (from.empty() || from.size() > 512) std::abort();
    if (notifi.name.size() * 2 != request["name"].asString().size() ||
        notifi.msg.size() * 2 != request["msg"].asString().size()) {
        std::abort();
    }
    return 0;
}
