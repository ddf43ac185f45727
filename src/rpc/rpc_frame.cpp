#include "rpc/rpc_frame.h"

#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>

#include "common/json_util.h"

namespace mooncake::tent {

namespace {

using Clock = std::chrono::steady_clock;

int remainingMs(Clock::time_point deadline) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                    deadline - Clock::now())
                    .count();
    return left > 0 ? static_cast<int>(left) : 0;
}

// Waits for `events` on `fd` until the deadline. OK when ready.
Status waitFor(int fd, short events, Clock::time_point deadline) {
    while (true) {
        int left = remainingMs(deadline);
        if (left == 0) {
            return Status::RpcServiceError("socket operation timed out");
        }
        pollfd pfd{fd, events, 0};
        int rc = ::poll(&pfd, 1, left);
        if (rc > 0) return Status::OK();
        if (rc == 0) {
            return Status::RpcServiceError("socket operation timed out");
        }
        if (errno != EINTR) {
            return Status::RpcServiceError(std::string("poll failed: ") +
                                           std::strerror(errno));
        }
    }
}

Status sendAll(int fd, const char* data, size_t size,
               Clock::time_point deadline) {
    size_t sent = 0;
    while (sent < size) {
        CHECK_STATUS(waitFor(fd, POLLOUT, deadline));
        ssize_t n =
            ::send(fd, data + sent, size - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) {
            sent += static_cast<size_t>(n);
        } else if (n < 0 && errno != EINTR && errno != EAGAIN &&
                   errno != EWOULDBLOCK) {
            return Status::RpcServiceError(std::string("send failed: ") +
                                           std::strerror(errno));
        }
    }
    return Status::OK();
}

// Reads exactly `size` bytes. `got` reports how many arrived and `closed`
// whether the peer closed the connection, so the caller can tell a clean
// close (0 bytes) from a truncated frame.
Status recvAll(int fd, char* data, size_t size, size_t& got, bool& closed,
               Clock::time_point deadline) {
    got = 0;
    closed = false;
    while (got < size) {
        CHECK_STATUS(waitFor(fd, POLLIN, deadline));
        ssize_t n = ::recv(fd, data + got, size - got, MSG_DONTWAIT);
        if (n > 0) {
            got += static_cast<size_t>(n);
        } else if (n == 0) {
            closed = true;
            return Status::RpcServiceError("connection closed by peer");
        } else if (errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK) {
            return Status::RpcServiceError(std::string("recv failed: ") +
                                           std::strerror(errno));
        }
    }
    return Status::OK();
}

}  // namespace

Status writeFrame(int fd, const std::string& payload, int timeout_ms) {
    if (payload.empty() || payload.size() > UINT32_MAX) {
        return Status::InvalidArgument("frame payload size " +
                                       std::to_string(payload.size()) +
                                       " is not sendable");
    }
    uint32_t size = static_cast<uint32_t>(payload.size());
    // Header and payload leave in one send(): two small writes would meet
    // Nagle and delayed ACK and stall each request by tens of milliseconds.
    std::string frame;
    frame.reserve(4 + payload.size());
    frame.push_back(static_cast<char>(size >> 24));
    frame.push_back(static_cast<char>(size >> 16));
    frame.push_back(static_cast<char>(size >> 8));
    frame.push_back(static_cast<char>(size));
    frame += payload;
    auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
    return sendAll(fd, frame.data(), frame.size(), deadline);
}

Status readFrame(int fd, std::string& payload, int timeout_ms,
                 uint32_t max_size) {
    auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
    unsigned char header[4];
    size_t got = 0;
    bool closed = false;
    payload.clear();
    Status s = recvAll(fd, reinterpret_cast<char*>(header), sizeof(header), got,
                       closed, deadline);
    if (!s.ok()) {
        if (closed && got == 0) return Status::OK();  // clean close
        if (closed) {
            return Status::RpcServiceError("truncated frame header (" +
                                           std::to_string(got) +
                                           " of 4 bytes)");
        }
        return s;
    }
    uint32_t size = (uint32_t(header[0]) << 24) | (uint32_t(header[1]) << 16) |
                    (uint32_t(header[2]) << 8) | uint32_t(header[3]);
    if (size == 0) return Status::InvalidArgument("zero-length frame");
    if (size > max_size) {
        return Status::InvalidArgument("frame length " + std::to_string(size) +
                                       " exceeds the limit of " +
                                       std::to_string(max_size) + " bytes");
    }
    std::string buffer(size, '\0');
    s = recvAll(fd, buffer.data(), size, got, closed, deadline);
    if (!s.ok()) {
        if (closed) {
            return Status::RpcServiceError(
                "truncated frame (" + std::to_string(got) + " of " +
                std::to_string(size) + " payload bytes)");
        }
        return s;
    }
    payload = std::move(buffer);
    return Status::OK();
}

std::string encodeJson(const Json::Value& value) {
    return toCompactJson(value);
}

Status decodeJsonObject(const std::string& payload, Json::Value& value) {
    Json::CharReaderBuilder builder;
    builder["failIfExtra"] = true;
    builder["collectComments"] = false;
    std::unique_ptr<Json::CharReader> reader(builder.newCharReader());
    std::string errs;
    Json::Value parsed;
    if (!reader->parse(payload.data(), payload.data() + payload.size(), &parsed,
                       &errs)) {
        return Status::MalformedJson("invalid JSON: " + foldJsonErrors(errs));
    }
    if (!parsed.isObject()) {
        return Status::MalformedJson("payload is not a JSON object");
    }
    value = std::move(parsed);
    return Status::OK();
}

Json::Value makeErrorReply(const std::string& message) {
    Json::Value reply(Json::objectValue);
    reply["status"] = "error";
    reply["message"] = message;
    return reply;
}

}  // namespace mooncake::tent
