// Shared pieces of the TCP transport suites: a fetcher that points every
// segment at one endpoint, installing a transport, and request headers
// written byte by byte, so the tests do not share the encoder they check.
// A peer that scripts its answers is fake_tcp_peer.h.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <thread>
#include <utility>

#include "kit/descriptor_fetcher.h"
#include "kit/request_builder.h"
#include "tent/runtime/control_plane.h"
#include "tent/runtime/segment_manager.h"
#include "tent/runtime/topology.h"
#include "tent/transport/tcp/tcp_transport.h"

namespace mooncake::tent::testing {

constexpr uint32_t kTcpMagic = 0x54454e54;  // "TENT"
constexpr uint32_t kTcpRead = 1, kTcpWrite = 2;

// Installs `transport` under `manager`'s local segment name, configured by
// `conf`; returns what install() said.
inline Status installTcp(TcpTransport& transport,
                         const std::shared_ptr<SegmentManager>& manager,
                         std::shared_ptr<Config> conf) {
    std::string name = manager->getLocal()->name;
    return transport.install(name, std::make_shared<ControlService>(manager),
                             std::make_shared<Topology>(), std::move(conf));
}

// A fresh TcpTransport whose configuration sets `key` to `value`: what its
// install() said.
inline Status installWithKey(const std::string& key, int value) {
    auto manager = std::make_shared<SegmentManager>(
        "127.0.0.1:1", DescriptorFetcher::fixedEndpoint(TCP, ""));
    auto conf = std::make_shared<Config>();
    conf->set(key, value);
    TcpTransport transport;
    return installTcp(transport, manager, conf);
}

// Installing with `key` set to each of `bad` is refused with exactly
// "<key> <rule>, got <value>".
inline void expectKeyRefused(const std::string& key,
                             std::initializer_list<int> bad,
                             const std::string& rule) {
    for (int value : bad) {
        EXPECT_EQ(installWithKey(key, value),
                  Status::InvalidArgument(key + " " + rule + ", got " +
                                          std::to_string(value)))
            << key << "=" << value;
    }
}

inline Request requestTo(SegmentID target, Request::OpCode op, void* local,
                         uint64_t offset, size_t length) {
    return makeRequest(op, local, target, offset, length);
}

// Polls task `task` of `batch` until it leaves PENDING or `bound_ms`
// passed (which only turns a hang into a failure); its last status. A
// status call that fails fails the test.
inline TransferStatus waitWhilePending(Transport& transport,
                                       Transport::SubBatchRef batch, int task,
                                       int bound_ms) {
    TransferStatus st;
    auto deadline =
        std::chrono::steady_clock::now() + std::chrono::milliseconds(bound_ms);
    do {
        Status s = transport.getTransferStatus(batch, task, st);
        if (!s.ok()) {
            ADD_FAILURE() << "getTransferStatus(task " << task << "): " << s;
            break;
        }
        std::this_thread::yield();
    } while (st.s == PENDING && std::chrono::steady_clock::now() < deadline);
    return st;
}

// The wire version of TCP frames the tests write and expect.
constexpr uint8_t kTcpVersion = 1;

// A request header as the wire carries it: big-endian magic, the version
// byte, the op byte, two zero bytes, address and length.
inline std::string tcpHeader(uint32_t magic, uint32_t op, uint64_t addr,
                             uint64_t len, uint8_t version = kTcpVersion) {
    unsigned char b[24];
    for (int i = 0; i < 4; ++i) b[i] = magic >> (24 - 8 * i);
    b[4] = version;
    b[5] = static_cast<unsigned char>(op);
    b[6] = b[7] = 0;
    for (int i = 0; i < 8; ++i) b[8 + i] = addr >> (56 - 8 * i);
    for (int i = 0; i < 8; ++i) b[16 + i] = len >> (56 - 8 * i);
    return std::string(reinterpret_cast<char*>(b), sizeof(b));
}

// A reply header as the wire carries it: big-endian magic, the version
// byte, a zero byte, the two-byte code and the payload length.
inline std::string tcpReply(uint32_t code, uint64_t len,
                            uint8_t version = kTcpVersion) {
    unsigned char b[16];
    const uint32_t magic = 0x54524550;  // "TREP"
    for (int i = 0; i < 4; ++i) b[i] = magic >> (24 - 8 * i);
    b[4] = version;
    b[5] = 0;
    b[6] = static_cast<unsigned char>(code >> 8);
    b[7] = static_cast<unsigned char>(code);
    for (int i = 0; i < 8; ++i) b[8 + i] = len >> (56 - 8 * i);
    return std::string(reinterpret_cast<char*>(b), sizeof(b));
}

}  // namespace mooncake::tent::testing
