// libcurl's process-wide set-up, shared by the etcd and http stores: once,
// before the first handle, from whichever store is made first.
#pragma once

#include <curl/curl.h>

#include <mutex>

namespace mooncake::tent {

inline void initCurlOnce() {
    static std::once_flag once;
    std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

}  // namespace mooncake::tent
