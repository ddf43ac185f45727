// tent_mpcomm_adapter_test (USE_MPCOMM=ON): the adapter a USE_MPCOMM build
// creates (createDefaultMpcommAdapter(), over libmpcomm or softmpcomm)
// against the contract's re-initialisation rule: init() on an initialised
// adapter fails with InvalidArgument naming the host and changes nothing,
// and init() after shutdown() starts a fresh instance. The boundary suite
// checks the same rule on the mock; this is the provider-backed one. A
// second adapter in this process is the peer, so "changes nothing" is seen
// as bytes still landing through the first instance.
#include "tent/transport/mpcomm/mpcomm_adapter.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "kit/free_tcp_port.h"
#include "kit/wait_until.h"
#include "net/socket_io.h"

namespace mooncake::tent {
namespace {

using testing::freeTcpPort;

constexpr size_t kBytes = 64 << 10;

// Writes `src` into the peer's `dst` through `from` and waits (bounded) for
// the provider's verdict.
MpcommTransferOutcome put(MpcommAdapter& from, const std::string& peer,
                          std::vector<char>& src, std::vector<char>& dst) {
    MpcommTransferHandle h =
        from.putAsync(reinterpret_cast<uintptr_t>(src.data()), peer,
                      reinterpret_cast<uintptr_t>(dst.data()), src.size());
    EXPECT_NE(h, kInvalidMpcommTransferHandle);
    if (h == kInvalidMpcommTransferHandle) return {};
    EXPECT_TRUE(testing::waitUntil([&] { return from.isTransferComplete(h); }))
        << "the put did not complete";
    MpcommTransferOutcome out = from.getTransferResult(h);
    from.releaseTransfer(h);
    return out;
}

class MpcommAdapterTest : public ::testing::Test {
 protected:
    void SetUp() override {
        ASSERT_TRUE(target_->available()) << target_->unavailableReason();
        target_port_ = freeTcpPort();
        ASSERT_GT(target_port_, 0);
        Status st = target_->init("adapter-target", "", target_port_);
        ASSERT_TRUE(st.ok()) << st;
    }
    void TearDown() override {
        peer_->shutdown();
        target_->shutdown();
    }

    // The peer connects to the target, learns its keys and writes a
    // pattern into target_mem_; true when every byte arrived.
    void expectPeerWrites(char seed) {
        ASSERT_TRUE(target_->startAcceptThread().ok());
        ASSERT_TRUE(
            target_->registerMemory(target_mem_.data(), target_mem_.size())
                .ok());
        ASSERT_TRUE(
            target_->publishBuffer(target_mem_.data(), target_mem_.size(), -1)
                .ok());
        Status st = peer_->init("adapter-peer", "", freeTcpPort());
        ASSERT_TRUE(st.ok()) << st;
        ASSERT_TRUE(
            peer_->registerMemory(peer_mem_.data(), peer_mem_.size()).ok());
        ASSERT_TRUE(
            peer_->connect("adapter-target", "127.0.0.1", target_->tcpPort())
                .ok());
        ASSERT_TRUE(peer_
                        ->queryRemoteBuffer("adapter-target", "127.0.0.1",
                                            target_->tcpPort())
                        .ok());
        for (size_t i = 0; i < peer_mem_.size(); ++i) {
            peer_mem_[i] = static_cast<char>(i * 7 + seed);
        }
        MpcommTransferOutcome out =
            put(*peer_, "adapter-target", peer_mem_, target_mem_);
        EXPECT_TRUE(out.ok) << "native status " << out.native_status;
        EXPECT_EQ(out.bytes_transferred, kBytes);
        EXPECT_EQ(target_mem_, peer_mem_);
    }

    std::shared_ptr<MpcommAdapter> target_ = createDefaultMpcommAdapter();
    std::shared_ptr<MpcommAdapter> peer_ = createDefaultMpcommAdapter();
    int target_port_ = 0;
    std::vector<char> target_mem_ = std::vector<char>(kBytes, 0);
    std::vector<char> peer_mem_ = std::vector<char>(kBytes, 0);
};

TEST_F(MpcommAdapterTest, InitCalledTwiceIsRefusedAndChangesNothing) {
    EXPECT_EQ(target_->tcpPort(), target_port_);
    // The same host again, and another host on another port: both refused
    // with the host named, neither rebinds nor renames the instance.
    const int other_port = freeTcpPort();
    ASSERT_GT(other_port, 0);
    for (const std::string host : {"adapter-target", "adapter-other"}) {
        Status again = target_->init(host, "", other_port);
        EXPECT_TRUE(again.IsInvalidArgument()) << again;
        EXPECT_EQ(again.message(), "MPComm init called twice for host " + host);
        EXPECT_EQ(target_->tcpPort(), target_port_);
    }
    // Still the instance it was: a peer reaches it under its first host id
    // on its first port, and the bytes land.
    ASSERT_NO_FATAL_FAILURE(expectPeerWrites(3));
}

TEST_F(MpcommAdapterTest, InitAfterShutdownStartsAFreshInstance) {
    target_->shutdown();
    // Shut down: calls that return a Status fail.
    EXPECT_FALSE(
        target_->registerMemory(target_mem_.data(), target_mem_.size()).ok());
    target_port_ = freeTcpPort();
    ASSERT_GT(target_port_, 0);
    Status st = target_->init("adapter-target", "", target_port_);
    ASSERT_TRUE(st.ok()) << st;
    EXPECT_EQ(target_->tcpPort(), target_port_);
    ASSERT_NO_FATAL_FAILURE(expectPeerWrites(5));
    // And the fresh instance refuses a second init() like the first did.
    Status again = target_->init("adapter-target", "", target_port_);
    EXPECT_EQ(again.message(),
              "MPComm init called twice for host adapter-target");
}

}  // namespace
}  // namespace mooncake::tent
