// The target's checks seen from the wire: forged keys, keys of another
// rail, malformed frames. These speak the framing directly, as a hostile or
// buggy peer would, instead of going through MPComm's own initiator.
#include "protocol.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <utility>
#include <vector>

#include "mpcomm.h"
#include "raw_peer.h"
#include "socket_util.h"
#include "test_util.h"

namespace {

using namespace mpcomm;
using namespace mpcomm::detail;
using mpcomm_test::closedByPeer;
using mpcomm_test::initOnFreePort;
using mpcomm_test::msSince;
using mpcomm_test::rawDeadline;
using mpcomm_test::rawHello;
using mpcomm_test::rawPut;
using mpcomm_test::rawQuery;
using mpcomm_test::ScopedEnv;

class RawPeer : public ::testing::Test {
 protected:
    void SetUp() override {
        port_ = initOnFreePort(target_, "target", "r0,r1");
        ASSERT_GT(port_, 0);
        raw_.setPort(port_);
        ASSERT_EQ(target_.startAcceptThread(), MPCOMM_SUCCESS);
        buffer_.assign(3 * 4096, 0);
        ASSERT_EQ(target_.registerMemory(buffer_.data(), buffer_.size()),
                  MPCOMM_SUCCESS);
        // Only the middle page is published.
        ASSERT_EQ(target_.publishBuffer(page(), 4096, 0), MPCOMM_SUCCESS);
        std::vector<RemoteBufferEntry> entries;
        std::string error;
        ASSERT_TRUE(rawQuery(port_, &entries, &error)) << error;
        ASSERT_EQ(entries.size(), 1u);
        keys_ = entries[0].rkeys;
        ASSERT_EQ(keys_.size(), 2u);
    }
    void TearDown() override { raw_.closeAll(); }

    uint8_t* page() { return buffer_.data() + 4096; }
    uint64_t pageAddr() { return reinterpret_cast<uint64_t>(page()); }

    int open() { return raw_.open(); }
    int openData(uint32_t rail) { return raw_.openAs(ConnKind::kData, rail); }

    MPComm target_;
    int port_ = 0;
    std::vector<uint8_t> buffer_;
    std::vector<uint32_t> keys_;
    mpcomm_test::RawClients raw_;
};

TEST(SocketUtil, SetSendBufferCapsTheSocketAndZeroLeavesTheKernels) {
    int fds[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
    auto sendBuffer = [&] {
        int value = 0;
        socklen_t len = sizeof(value);
        EXPECT_EQ(::getsockopt(fds[0], SOL_SOCKET, SO_SNDBUF, &value, &len), 0);
        return value;
    };
    const int kernels = sendBuffer();
    setSendBuffer(fds[0], 0);
    EXPECT_EQ(sendBuffer(), kernels);
    // The kernel doubles the request (64 KiB is below any wmem_max).
    setSendBuffer(fds[0], 64 * 1024);
    EXPECT_EQ(sendBuffer(), 2 * 64 * 1024);
    ::close(fds[0]);
    ::close(fds[1]);
}

TEST_F(RawPeer, RightKeyOnItsRailIsPlaced) {
    int fd = openData(1);
    EXPECT_EQ(rawPut(fd, pageAddr(), keys_[1], 0xAB, 4096), MPCOMM_SUCCESS);
    EXPECT_TRUE(std::all_of(page(), page() + 4096,
                            [](uint8_t b) { return b == 0xAB; }));
}

TEST_F(RawPeer, ForgedKeyIsRefusedAndNothingIsWritten) {
    int fd = openData(0);
    EXPECT_EQ(rawPut(fd, pageAddr(), keys_[0] ^ 0x1, 0xAB, 64),
              MPCOMM_ERR_REMOTE_ACCESS);
    // Another rail's key is no good on this rail either.
    if (keys_[0] != keys_[1])
        EXPECT_EQ(rawPut(fd, pageAddr(), keys_[1], 0xAB, 64),
                  MPCOMM_ERR_REMOTE_ACCESS);
    EXPECT_TRUE(std::all_of(buffer_.begin(), buffer_.end(),
                            [](uint8_t b) { return b == 0; }));
    // The refused payloads were drained: the stream is still in step.
    EXPECT_EQ(rawPut(fd, pageAddr(), keys_[0], 0x5A, 16), MPCOMM_SUCCESS);
    EXPECT_EQ(page()[15], 0x5A);
    EXPECT_EQ(page()[16], 0);
}

TEST_F(RawPeer, RangesOutsideThePublishedPageAreRefused) {
    int fd = openData(0);
    EXPECT_EQ(rawPut(fd, pageAddr() - 1, keys_[0], 0xCD, 2),
              MPCOMM_ERR_REMOTE_ACCESS);
    EXPECT_EQ(rawPut(fd, pageAddr() + 4095, keys_[0], 0xCD, 2),
              MPCOMM_ERR_REMOTE_ACCESS);
    // An address whose end wraps around must not pass the bounds check.
    EXPECT_EQ(rawPut(fd, ~0ull - 7, keys_[0], 0xCD, 16),
              MPCOMM_ERR_REMOTE_ACCESS);
    EXPECT_TRUE(std::all_of(buffer_.begin(), buffer_.end(),
                            [](uint8_t b) { return b == 0; }));

    FrameHeader get;
    get.type = MsgType::kGetReq;
    get.seq = 9;
    get.addr = pageAddr() + 4000;
    get.length = 200;
    get.key = keys_[0];
    ASSERT_TRUE(sendFrame(fd, get, rawDeadline()));
    FrameHeader reply;
    ASSERT_TRUE(recvHeader(fd, &reply, rawDeadline()));
    EXPECT_EQ(reply.type, MsgType::kGetDone);
    EXPECT_EQ(reply.seq, 9u);
    EXPECT_EQ(reply.status, MPCOMM_ERR_REMOTE_ACCESS);
    EXPECT_EQ(reply.payload_len, 0u);
}

TEST_F(RawPeer, BadMagicClosesTheConnection) {
    int fd = openData(0);
    std::vector<uint8_t> junk(kHeaderSize, 0x42);
    ASSERT_TRUE(sendAll(fd, junk.data(), junk.size(), rawDeadline()));
    EXPECT_TRUE(closedByPeer(fd));
}

TEST_F(RawPeer, PutWhosePayloadDisagreesWithItsLengthClosesTheConnection) {
    int fd = openData(0);
    FrameHeader request;
    request.type = MsgType::kPutReq;
    request.addr = pageAddr();
    request.length = 4096;
    request.key = keys_[0];
    ASSERT_TRUE(sendFrame(fd, request, rawDeadline(), "abcd", 4));
    EXPECT_TRUE(closedByPeer(fd));
    EXPECT_EQ(page()[0], 0);
}

TEST_F(RawPeer, DataHelloOnARailTheTargetLacksIsRefused) {
    int fd = open();
    std::string error;
    EXPECT_FALSE(rawHello(fd, ConnKind::kData, 2, &error));
    EXPECT_NE(error.find("refused"), std::string::npos) << error;
}

TEST_F(RawPeer, OversizedHostIdIsNotAnswered) {
    int fd = open();
    FrameHeader hello;
    hello.type = MsgType::kHello;
    hello.payload_len = 1ull << 40;
    uint8_t raw[kHeaderSize];
    encodeHeader(hello, raw);
    ASSERT_TRUE(sendAll(fd, raw, sizeof(raw), rawDeadline()));
    EXPECT_TRUE(closedByPeer(fd));
}

TEST(SoftMpcommWire, BufferListRoundTripsAndRejectsTruncation) {
    std::vector<RemoteBufferEntry> entries(2);
    entries[0].addr = 0x1000;
    entries[0].length = 4096;
    entries[0].numa_node = -1;
    entries[0].rkeys = {1, 2};
    entries[1].addr = 0xFFFF000000000000ull;
    entries[1].length = 1;
    entries[1].numa_node = 3;
    entries[1].rkeys = {0xDEADBEEF};
    std::string wire = encodeBufferList(entries);
    std::vector<RemoteBufferEntry> back;
    ASSERT_TRUE(decodeBufferList(wire, &back));
    ASSERT_EQ(back.size(), 2u);
    EXPECT_EQ(back[0].numa_node, -1);
    EXPECT_EQ(back[1].addr, 0xFFFF000000000000ull);
    EXPECT_EQ(back[1].rkeys, std::vector<uint32_t>{0xDEADBEEF});
    for (size_t cut = 0; cut < wire.size(); ++cut)
        EXPECT_FALSE(decodeBufferList(wire.substr(0, cut), &back)) << cut;
    EXPECT_FALSE(decodeBufferList(wire + "x", &back));
}

// The fuzzer's seeds (fuzz/make_corpus.py encodes them independently of
// the C++ codec) walked by the decoder it drives: how many frames each side
// accepts before refusing, plus one for a whole valid buffer list.
TEST(SoftMpcommWire, DecoderAcceptsExactlyTheValidFramesOfEachSeed) {
    const std::vector<std::pair<std::string, size_t>> seeds = {
        {"valid_control_hello_query", 2},  // HELLO, QUERY_REQ
        {"valid_data_put_get", 3},         // HELLO, PUT_REQ, GET_REQ
        {"valid_reply_query", 3},  // ACK + QUERY_RESP; ACK as data reply
        {"valid_reply_data", 5},   // ACK as control; ACK + 3 data replies
        {"valid_buffer_list", 1},  // the list itself
        {"bad_magic", 0},
        {"bad_version", 0},
        {"truncated_header", 0},
        {"truncated_host_id", 0},
        {"hello_huge_host_id", 0},
        {"hello_bad_rail", 0},
        {"query_with_payload", 1},   // its HELLO only
        {"put_over_slice", 1},       // its HELLO only
        {"get_data_over_chunk", 2},  // its HELLO_ACK, on either walk
        {"truncated_buffer_list", 0},
    };
    for (const auto& seed : seeds) {
        std::string path =
            std::string(SOFTMPCOMM_CORPUS_DIR) + "/" + seed.first;
        std::ifstream in(path, std::ios::binary);
        ASSERT_TRUE(in) << path;
        std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)),
                                   std::istreambuf_iterator<char>());
        EXPECT_EQ(runWireDecoder(bytes.data(), bytes.size()), seed.second)
            << seed.first;
    }
}

TEST(SoftMpcommTimeouts, SilentListenerFailsConnectInsteadOfHanging) {
    // Something listens (the kernel completes the TCP handshake) but never
    // speaks: connect() gives up after SOFTMPCOMM_HANDSHAKE_TIMEOUT_MS.
    ScopedEnv handshake("SOFTMPCOMM_HANDSHAKE_TIMEOUT_MS", "300");
    int silent = -1;
    int port = 0;
    std::string error;
    for (int attempt = 0; attempt < 500 && silent < 0; ++attempt) {
        port = 20000 + static_cast<int>((getpid() * 131 + attempt) % 19000);
        silent = listenTcp(port, &error);
    }
    ASSERT_GE(silent, 0) << error;
    MPComm comm;
    ASSERT_GT(initOnFreePort(comm, "a", ""), 0);
    auto start = std::chrono::steady_clock::now();
    EXPECT_EQ(comm.connect("silent", "127.0.0.1", port), MPCOMM_ERR_CONNECT);
    EXPECT_GE(msSince(start), 300);
    RemoteBufferInfo info;
    EXPECT_EQ(comm.queryRemoteBuffer("silent", "127.0.0.1", port, info),
              MPCOMM_ERR_UNKNOWN_HOST);
    closeSocket(silent);
}

TEST(SoftMpcommTimeouts, UnroutableAddressFailsWithinTheConnectTimeout) {
    ScopedEnv handshake("SOFTMPCOMM_HANDSHAKE_TIMEOUT_MS", "300");
    MPComm comm;
    ASSERT_GT(initOnFreePort(comm, "a", ""), 0);
    // 192.0.2.0/24 is TEST-NET-1: never routed, so this either fails at
    // once (no route) or after the bounded connect timeout.
    EXPECT_EQ(comm.connect("nowhere", "192.0.2.1", 9), MPCOMM_ERR_CONNECT);
}

}  // namespace
