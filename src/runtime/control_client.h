// The client half of the control plane's ops (private to libtent).
#pragma once

#include <json/json.h>

#include "net/socket_io.h"
#include "tent/common/status.h"

namespace mooncake::tent {

// Sends `request` ({"op":...}) on the connected socket `fd` and reads the
// reply, both within `deadline`. OK with `reply` holding {"status":"ok",...};
// RpcServiceError naming the op when the peer refused it (its message
// included), closed, or did not answer in time. `closed_before_reply`, when
// given, says whether the peer closed the connection before any reply
// began (a pooled connection the peer had dropped as idle).
Status callControlOp(int fd, const Json::Value& request, net::Deadline deadline,
                     Json::Value& reply, bool* closed_before_reply = nullptr);

}  // namespace mooncake::tent
