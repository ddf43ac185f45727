// Helpers shared by the MPComm suites: log capture, the in-process
// segment fetcher, scoped environment variables and files, free ports.
#pragma once

#include <glog/logging.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "kit/descriptor_fetcher.h"
#include "kit/free_tcp_port.h"
#include "kit/log_capture.h"
#include "kit/scoped_env.h"
#include "tent/runtime/segment_manager.h"

namespace mooncake::tent::testing {

// The endpoint attribute `desc` publishes for `type`; "" when none.
inline std::string attrOf(const SegmentDesc& desc, TransportType type) {
    const std::string* attr = desc.getMemory().getTransportAttrs(type);
    return attr ? *attr : "";
}

}  // namespace mooncake::tent::testing
