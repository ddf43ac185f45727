#include "tent/common/status.h"

namespace mooncake::tent {

const char* Status::CodeName(Code code) {
    switch (code) {
        case Code::kOK:
            return "OK";
        case Code::kInvalidArgument:
            return "InvalidArgument";
        case Code::kTooManyRequests:
            return "TooManyRequests";
        case Code::kAddressNotRegistered:
            return "AddressNotRegistered";
        case Code::kDeviceNotFound:
            return "DeviceNotFound";
        case Code::kInvalidEntry:
            return "InvalidEntry";
        case Code::kRpcServiceError:
            return "RpcServiceError";
        case Code::kMalformedJson:
            return "MalformedJson";
        case Code::kInternalError:
            return "InternalError";
        case Code::kNotImplemented:
            return "NotImplemented";
        case Code::kNeedsRefreshCache:
            return "NeedsRefreshCache";
        case Code::kTimeout:
            return "Timeout";
        case Code::kNotFound:
            return "NotFound";
        case Code::kIoError:
            return "IoError";
        case Code::kUnavailable:
            return "Unavailable";
    }
    return "Unknown";
}

std::string Status::ToString() const {
    if (ok()) return "OK";
    return std::string(CodeName(code_)) + ": " + message_;
}

}  // namespace mooncake::tent
