// Status: the one error type every TENT layer returns.
//
// A Status is a code plus a human message. Messages name the bad value or
// the failed operation (and, for provider failures, the provider's own
// code) so that a log line alone says how to recover.
#pragma once

#include <ostream>
#include <string>
#include <string_view>
#include <utility>

namespace mooncake::tent {

class Status {
 public:
    enum class Code : int {
        kOK = 0,
        kInvalidArgument,
        kTooManyRequests,
        kAddressNotRegistered,
        kDeviceNotFound,
        kInvalidEntry,
        kRpcServiceError,
        kMalformedJson,
        kInternalError,
        kNotImplemented,
        kNeedsRefreshCache,
        kTimeout,
        kNotFound,
        kIoError,
        kUnavailable,
    };

    Status() = default;
    Status(Code code, std::string message)
        : code_(code), message_(std::move(message)) {}

    static Status OK() { return Status(); }
#define TENT_STATUS_FACTORY(name)                       \
    static Status name(std::string_view msg = "") {     \
        return Status(Code::k##name, std::string(msg)); \
    }                                                   \
    bool Is##name() const { return code_ == Code::k##name; }
    TENT_STATUS_FACTORY(InvalidArgument)
    TENT_STATUS_FACTORY(TooManyRequests)
    TENT_STATUS_FACTORY(AddressNotRegistered)
    TENT_STATUS_FACTORY(DeviceNotFound)
    TENT_STATUS_FACTORY(InvalidEntry)
    TENT_STATUS_FACTORY(RpcServiceError)
    TENT_STATUS_FACTORY(MalformedJson)
    TENT_STATUS_FACTORY(InternalError)
    TENT_STATUS_FACTORY(NotImplemented)
    TENT_STATUS_FACTORY(NeedsRefreshCache)
    TENT_STATUS_FACTORY(Timeout)
    TENT_STATUS_FACTORY(NotFound)
    TENT_STATUS_FACTORY(IoError)
    TENT_STATUS_FACTORY(Unavailable)
#undef TENT_STATUS_FACTORY

    bool ok() const { return code_ == Code::kOK; }
    Code code() const { return code_; }
    const std::string& message() const { return message_; }
    static const char* CodeName(Code code);
    // "<CodeName>: <message>", or "OK".
    std::string ToString() const;

    bool operator==(const Status& other) const {
        return code_ == other.code_ && message_ == other.message_;
    }

 private:
    Code code_ = Code::kOK;
    std::string message_;
};

inline std::ostream& operator<<(std::ostream& os, const Status& s) {
    return os << s.ToString();
}

}  // namespace mooncake::tent

#define TENT_STRINGIFY_IMPL(x) #x
#define TENT_STRINGIFY(x) TENT_STRINGIFY_IMPL(x)
// Appended to a message literal: " [file.cpp:123]".
#define LOC_MARK " [" __FILE__ ":" TENT_STRINGIFY(__LINE__) "]"

// Returns the status from the enclosing function when it is not OK.
#define CHECK_STATUS(expr)                              \
    do {                                                \
        ::mooncake::tent::Status tent_status_ = (expr); \
        if (!tent_status_.ok()) return tent_status_;    \
    } while (0)
