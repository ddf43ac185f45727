#include "tent/common/status.h"

namespace mooncake::tent {

std::string_view Status::CodeToString(Code code) {
    switch (code) {
        case Code::kOk:
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
        case Code::kInvalidMetadataType:
            return "InvalidMetadataType";
        case Code::kNeedsRefreshCache:
            return "NeedsRefreshCache";
        case Code::kRdmaError:
            return "RdmaError";
        case Code::kMetadataError:
            return "MetadataError";
        case Code::kRpcServiceError:
            return "RpcServiceError";
        case Code::kMalformedJson:
            return "MalformedJson";
        case Code::kInternalError:
            return "InternalError";
        case Code::kNotImplemented:
            return "NotImplemented";
    }
    return "Unknown";
}

std::string Status::ToString() const {
    if (ok()) return "OK";
    std::string out(CodeToString(code_));
    out += ": ";
    out += message_;
    return out;
}

}  // namespace mooncake::tent
