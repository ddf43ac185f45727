// Status: the one error type every TENT layer returns.
//
// A Status is a code plus a human message. Messages name the bad value or
// the failed operation (and, for provider failures, the provider's own
// code) so that a log line alone says how to recover.
//
// The code set, the factory and predicate names, message() returning a
// string_view and CodeToString() follow Mooncake TENT's Status, so that a
// transport written against this tree compiles unchanged there.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>

namespace mooncake::tent {

class Status final {
 public:
    // Values follow upstream TENT's numbering; its kCudaError (101) is left
    // out until this tree has CUDA code that would return it.
    enum class Code : uint16_t {
        kOk = 0,
        kInvalidArgument = 1,
        kTooManyRequests = 2,
        kAddressNotRegistered = 3,
        kDeviceNotFound = 4,
        kInvalidEntry = 5,
        kInvalidMetadataType = 6,
        kNeedsRefreshCache = 7,
        kRdmaError = 100,
        kMetadataError = 131,
        kRpcServiceError = 132,
        kMalformedJson = 133,
        kInternalError = 199,
        kNotImplemented = 200,
    };

    Status() = default;
    // A kOk code ignores `message`, so every OK status compares equal.
    Status(Code code, std::string_view message)
        : code_(code), message_(code == Code::kOk ? "" : message) {}

    static Status OK() { return Status(); }
#define TENT_STATUS_CODE(name)                 \
    static Status name(std::string_view msg) { \
        return Status(Code::k##name, msg);     \
    }                                          \
    [[nodiscard]] bool Is##name() const { return code_ == Code::k##name; }
    TENT_STATUS_CODE(InvalidArgument)
    TENT_STATUS_CODE(TooManyRequests)
    TENT_STATUS_CODE(AddressNotRegistered)
    TENT_STATUS_CODE(DeviceNotFound)
    TENT_STATUS_CODE(InvalidEntry)
    TENT_STATUS_CODE(InvalidMetadataType)
    TENT_STATUS_CODE(NeedsRefreshCache)
    TENT_STATUS_CODE(RdmaError)
    TENT_STATUS_CODE(MetadataError)
    TENT_STATUS_CODE(RpcServiceError)
    TENT_STATUS_CODE(MalformedJson)
    TENT_STATUS_CODE(InternalError)
    TENT_STATUS_CODE(NotImplemented)
#undef TENT_STATUS_CODE

    [[nodiscard]] bool ok() const { return code_ == Code::kOk; }
    Code code() const { return code_; }
    std::string_view message() const { return message_; }
    // "InvalidArgument", "RpcServiceError", ...; "Unknown" outside the set.
    static std::string_view CodeToString(Code code);
    // "<code name>: <message>", or "OK".
    std::string ToString() const;

    bool operator==(const Status& other) const {
        return code_ == other.code_ && message_ == other.message_;
    }
    bool operator!=(const Status& other) const { return !(*this == other); }

 private:
    Code code_ = Code::kOk;
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
