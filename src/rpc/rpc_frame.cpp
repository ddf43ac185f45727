#include "rpc/rpc_frame.h"

#include <memory>

#include "common/json_util.h"

namespace mooncake::tent {

Status writeFrame(int fd, const std::string& payload, net::Deadline deadline) {
    if (payload.empty() || payload.size() > UINT32_MAX) {
        return Status::InvalidArgument("frame payload size " +
                                       std::to_string(payload.size()) +
                                       " is not sendable");
    }
    uint32_t size = static_cast<uint32_t>(payload.size());
    // Header and payload leave in one send(): two small writes would meet
    // Nagle and delayed ACK and stall each request by tens of milliseconds.
    std::string frame;
    frame.reserve(kFrameHeaderBytes + payload.size());
    frame.push_back(static_cast<char>(kRpcFrameVersion));
    frame.push_back(static_cast<char>(size >> 24));
    frame.push_back(static_cast<char>(size >> 16));
    frame.push_back(static_cast<char>(size >> 8));
    frame.push_back(static_cast<char>(size));
    frame += payload;
    return net::sendAll(fd, frame.data(), frame.size(), deadline);
}

Status writeFrame(int fd, const std::string& payload, int timeout_ms) {
    return writeFrame(fd, payload, net::deadlineIn(timeout_ms));
}

Status decodeFrameLength(const unsigned char* header, uint32_t max_size,
                         uint32_t& size) {
    if (header[0] != kRpcFrameVersion) {
        return Status::InvalidArgument(
            "rpc frame version " + std::to_string(header[0]) +
            ", expected version " + std::to_string(kRpcFrameVersion));
    }
    uint32_t n = (uint32_t(header[1]) << 24) | (uint32_t(header[2]) << 16) |
                 (uint32_t(header[3]) << 8) | uint32_t(header[4]);
    if (n == 0) return Status::InvalidArgument("zero-length frame");
    if (n > max_size) {
        return Status::InvalidArgument("frame length " + std::to_string(n) +
                                       " exceeds the limit of " +
                                       std::to_string(max_size) + " bytes");
    }
    size = n;
    return Status::OK();
}

Status readFrame(int fd, std::string& payload, net::Deadline deadline,
                 uint32_t max_size) {
    unsigned char header[kFrameHeaderBytes];
    size_t got = 0;
    bool closed = false;
    payload.clear();
    Status s =
        net::recvAll(fd, header, sizeof(header), deadline, &got, &closed);
    if (!s.ok()) {
        if (closed && got == 0) return Status::OK();  // clean close
        if (closed) {
            return Status::RpcServiceError(
                "truncated frame header (" + std::to_string(got) + " of " +
                std::to_string(kFrameHeaderBytes) + " bytes)");
        }
        return s;
    }
    uint32_t size = 0;
    CHECK_STATUS(decodeFrameLength(header, max_size, size));
    std::string buffer(size, '\0');
    s = net::recvAll(fd, buffer.data(), size, deadline, &got, &closed);
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

Status readFrame(int fd, std::string& payload, int timeout_ms,
                 uint32_t max_size) {
    return readFrame(fd, payload, net::deadlineIn(timeout_ms), max_size);
}

std::string encodeJson(const Json::Value& value) {
    return toCompactJson(value);
}

Status decodeJsonObject(const std::string& payload, Json::Value& value) {
    std::string errs;
    Json::Value parsed;
    if (!parseJsonText(payload, true, parsed, errs)) {
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
