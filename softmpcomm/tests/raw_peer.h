// A raw wire client for the suites that speak the framing directly, as a
// hostile or buggy peer would, instead of going through MPComm's own
// initiator. Needs the library's internal headers (src/) compiled in.
#pragma once

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>

#include <string>
#include <vector>

#include "protocol.h"
#include "socket_util.h"

namespace mpcomm_test {

// Bound on each exchange a raw client waits for; generous, since only a
// hang would exceed it.
constexpr int kRawTimeoutMs = 10000;

inline mpcomm::detail::Deadline rawDeadline() {
    return mpcomm::detail::Deadline::in(kRawTimeoutMs);
}

// A TCP connection to 127.0.0.1:port, or -1.
inline int rawConnect(int port, std::string* error) {
    return mpcomm::detail::connectTcp("127.0.0.1", port, kRawTimeoutMs, error);
}

inline bool rawHello(int fd, mpcomm::detail::ConnKind kind, uint32_t rail,
                     std::string* error) {
    std::string peer;
    uint32_t rails = 0;
    return mpcomm::detail::clientHello(fd, kind, "raw", rail, 0, rawDeadline(),
                                       &peer, &rails, error);
}

// Sends one PUT of `length` bytes of `fill` and returns the acked status,
// or 1 when the request could not be sent, 2 when no matching ack came.
inline int rawPut(int fd, uint64_t addr, uint32_t key, uint8_t fill,
                  size_t length) {
    using namespace mpcomm::detail;
    std::vector<uint8_t> data(length, fill);
    FrameHeader request;
    request.type = MsgType::kPutReq;
    request.seq = 7;
    request.addr = addr;
    request.length = length;
    request.key = key;
    if (!sendFrame(fd, request, rawDeadline(), data.data(), data.size()))
        return 1;
    FrameHeader ack;
    if (!recvHeader(fd, &ack, rawDeadline()) || ack.type != MsgType::kPutAck ||
        ack.seq != 7)
        return 2;
    return ack.status;
}

// Queries the published list over a fresh control connection.
inline bool rawQuery(int port, std::vector<mpcomm::RemoteBufferEntry>* out,
                     std::string* error) {
    using namespace mpcomm::detail;
    int fd = rawConnect(port, error);
    if (fd < 0) return false;
    FrameHeader request;
    request.type = MsgType::kQueryReq;
    FrameHeader reply;
    bool ok = rawHello(fd, ConnKind::kControl, 0, error) &&
              sendFrame(fd, request, rawDeadline()) &&
              recvHeader(fd, &reply, rawDeadline()) &&
              reply.type == MsgType::kQueryResp &&
              reply.payload_len <= kMaxQueryPayload;
    std::string payload(ok ? reply.payload_len : 0, '\0');
    ok = ok && recvAll(fd, &payload[0], payload.size(), rawDeadline()) &&
         decodeBufferList(payload, out);
    closeSocket(fd);
    if (!ok && error->empty()) *error = "query failed";
    return ok;
}

// The raw connections of one test to one target port, closed together by
// closeAll() (a fixture's TearDown) or at the latest when it goes.
class RawClients {
 public:
    RawClients() = default;
    RawClients(const RawClients&) = delete;
    RawClients& operator=(const RawClients&) = delete;
    ~RawClients() { closeAll(); }

    void setPort(int port) { port_ = port; }

    // A connection that has sent nothing yet; -1, and a test failure
    // naming why, when it could not connect.
    int open() {
        std::string error;
        int fd = rawConnect(port_, &error);
        EXPECT_GE(fd, 0) << "connect to port " << port_ << ": " << error;
        if (fd >= 0) fds_.push_back(fd);
        return fd;
    }
    // A connection that has said HELLO as `kind` for `rail`.
    int openAs(mpcomm::detail::ConnKind kind, uint32_t rail = 0) {
        int fd = open();
        std::string error;
        EXPECT_TRUE(rawHello(fd, kind, rail, &error)) << error;
        return fd;
    }

    void closeAll() {
        for (int fd : fds_) mpcomm::detail::closeSocket(fd);
        fds_.clear();
    }

 private:
    int port_ = 0;
    std::vector<int> fds_;
};

// What the other end did with a connection within a time limit.
enum class PeerAction { kClosed, kSentData, kNothing };

// Waits up to timeout_ms; kClosed for an orderly close or a reset.
inline PeerAction peerActionWithin(int fd, int timeout_ms) {
    pollfd pfd{fd, POLLIN, 0};
    if (::poll(&pfd, 1, timeout_ms) <= 0) return PeerAction::kNothing;
    char byte;
    ssize_t got = ::recv(fd, &byte, 1, MSG_DONTWAIT | MSG_PEEK);
    return got > 0 ? PeerAction::kSentData : PeerAction::kClosed;
}

inline bool closedByPeer(int fd) {
    return peerActionWithin(fd, kRawTimeoutMs) == PeerAction::kClosed;
}

}  // namespace mpcomm_test
