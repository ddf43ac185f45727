// submitTransfer() finds each target's descriptor in a per-thread memo
// (src/runtime/remote_desc_memo.h). Through the engine: a batch rotating
// over two peers lands every request's bytes at its own peer, and a memo
// entry never outlives what the manager would hand out, so a closed
// segment's id fails its request instead of reaching the peer.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "kit/batch_wait.h"
#include "tent/transfer_engine.h"

namespace mooncake::tent {
namespace {

using testing::waitTasksFinal;

constexpr size_t kLen = 4096;

struct Peer {
    TransferEngine engine;
    void* buf = nullptr;
    SegmentID id = 0;  // in the submitting engine
};

Request writeOf(const void* source, const Peer& peer, size_t offset) {
    Request r;
    r.opcode = Request::WRITE;
    r.source = const_cast<void*>(source);
    r.target_id = peer.id;
    r.target_offset = reinterpret_cast<uint64_t>(peer.buf) + offset;
    r.length = kLen;
    return r;
}

// Submits `requests` as one batch and returns every task's final state.
std::vector<TransferStatusEnum> run(TransferEngine& engine,
                                    const std::vector<Request>& requests) {
    BatchID batch = engine.allocateBatch(requests.size());
    EXPECT_NE(batch, 0u);
    EXPECT_TRUE(engine.submitTransfer(batch, requests).ok());
    std::vector<TransferStatus> states(requests.size());
    EXPECT_TRUE(waitTasksFinal(engine, batch, states));
    EXPECT_TRUE(engine.freeBatch(batch).ok());
    std::vector<TransferStatusEnum> out;
    for (const TransferStatus& s : states) out.push_back(s.s);
    return out;
}

TEST(EngineTargetMemoTest, RotatingPeersLandAndAClosedIdNeverRoutes) {
    TransferEngine local;
    ASSERT_TRUE(local.available());
    Peer peers[2];
    for (Peer& p : peers) {
        ASSERT_TRUE(p.engine.available());
        ASSERT_TRUE(p.engine.allocateLocalMemory(&p.buf, 4 * kLen).ok());
        std::memset(p.buf, 0, 4 * kLen);
        ASSERT_TRUE(p.engine.registerLocalMemory(p.buf, 4 * kLen).ok());
        ASSERT_TRUE(local.openSegment(p.id, p.engine.getSegmentName()).ok());
    }
    std::vector<char> data(4 * kLen);
    for (size_t i = 0; i < data.size(); ++i) data[i] = char('a' + i / kLen);

    // Every request changes target: peer 0, 1, 0, 1, each at its own block.
    std::vector<Request> rotation;
    for (size_t k = 0; k < 4; ++k) {
        rotation.push_back(
            writeOf(data.data() + k * kLen, peers[k % 2], (k / 2) * kLen));
    }
    for (int round = 0; round < 2; ++round) {  // the second from the memo
        EXPECT_EQ(run(local, rotation),
                  std::vector<TransferStatusEnum>(4, COMPLETED));
    }
    for (size_t k = 0; k < 4; ++k) {
        const char* at =
            static_cast<const char*>(peers[k % 2].buf) + (k / 2) * kLen;
        EXPECT_EQ(std::string(at, kLen), std::string(kLen, char('a' + k)))
            << "request " << k;
    }

    // Closed after the memo held its descriptor: the id is unknown now,
    // and its request fails without a byte reaching peer 0.
    std::memset(peers[0].buf, 0, 4 * kLen);
    ASSERT_TRUE(local.closeSegment(peers[0].id).ok());
    EXPECT_EQ(run(local, rotation), (std::vector<TransferStatusEnum>{
                                        FAILED, COMPLETED, FAILED, COMPLETED}));
    EXPECT_EQ(std::string(static_cast<const char*>(peers[0].buf), 2 * kLen),
              std::string(2 * kLen, '\0'));

    // Reopened under a fresh id, it routes again.
    ASSERT_TRUE(
        local.openSegment(peers[0].id, peers[0].engine.getSegmentName()).ok());
    rotation[0] = writeOf(data.data(), peers[0], 0);
    rotation[2] = writeOf(data.data() + 2 * kLen, peers[0], kLen);
    EXPECT_EQ(run(local, rotation),
              std::vector<TransferStatusEnum>(4, COMPLETED));
    EXPECT_EQ(std::string(static_cast<const char*>(peers[0].buf), kLen),
              std::string(kLen, 'a'));

    for (Peer& p : peers) {
        EXPECT_TRUE(p.engine.unregisterLocalMemory(p.buf).ok());
        EXPECT_TRUE(p.engine.freeLocalMemory(p.buf).ok());
    }
}

}  // namespace
}  // namespace mooncake::tent
