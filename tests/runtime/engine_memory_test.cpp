// The engine's memory rules (docs/reliability.md): registered memory is
// not freed under a peer, and a freed batch leaves no transfer writing into
// memory the caller may release next. Under ASan the old behaviour of each
// case is a heap-use-after-free report, not just a failed expectation.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <future>
#include <thread>

#include "kit/engine_config.h"
#include "kit/request_builder.h"
#include "net/socket_io.h"
#include "tent/runtime/control_plane.h"
#include "tent/transfer_engine.h"

namespace mooncake::tent {
namespace {

// Only turns a hang into a failure.
constexpr int kBoundMs = 20000;

// Polls until the task leaves PENDING; the bound turns a hang into a
// failure.
TransferStatus waitDone(TransferEngine& engine, BatchID batch, size_t task) {
    TransferStatus st;
    net::Deadline deadline = net::deadlineIn(kBoundMs);
    do {
        EXPECT_TRUE(engine.getTransferStatus(batch, task, st).ok());
        std::this_thread::yield();
    } while (st.s == PENDING && net::Clock::now() < deadline);
    return st;
}

Request request(Request::OpCode op, void* local, SegmentID target,
                uint64_t addr, size_t length) {
    return testing::makeRequest(op, local, target, addr, length);
}

TEST(EngineMemoryTest, RegisteredMemoryIsNotFreedUnderAPeer) {
    TransferEngine target(testing::onlyTransport(TCP));
    TransferEngine initiator(testing::onlyTransport(TCP));
    ASSERT_TRUE(target.available() && initiator.available());
    constexpr size_t kSize = 64 << 10;
    void* mem = nullptr;
    ASSERT_TRUE(target.allocateLocalMemory(&mem, kSize).ok());
    std::memset(mem, 0, kSize);
    ASSERT_TRUE(target.registerLocalMemory(mem, kSize).ok());

    // Refused, naming the buffer and its transports: a peer can still
    // write into it.
    EXPECT_EQ(target.freeLocalMemory(mem),
              Status::InvalidArgument("freeLocalMemory: buffer " +
                                      testing::bufferText(mem, kSize) +
                                      " is still registered with tcp; "
                                      "unregister it before freeing the "
                                      "memory"));
    SegmentID seg = 0;
    ASSERT_TRUE(initiator.openSegment(seg, target.getSegmentName()).ok());
    std::vector<char> src(4096, 'w');
    const uint64_t base = reinterpret_cast<uint64_t>(mem);
    BatchID batch = initiator.allocateBatch(2);
    ASSERT_TRUE(initiator
                    .submitTransfer(batch, {request(Request::WRITE, src.data(),
                                                    seg, base, src.size())})
                    .ok());
    EXPECT_EQ(waitDone(initiator, batch, 0).s, COMPLETED);
    EXPECT_EQ(std::string(static_cast<char*>(mem), 4096),
              std::string(src.data(), 4096));

    // Unregistered, then freed: the peer's next write is refused and
    // touches nothing.
    ASSERT_TRUE(target.unregisterLocalMemory(mem).ok());
    ASSERT_TRUE(target.freeLocalMemory(mem).ok());
    ASSERT_TRUE(initiator
                    .submitTransfer(batch, {request(Request::WRITE, src.data(),
                                                    seg, base, src.size())})
                    .ok());
    EXPECT_EQ(waitDone(initiator, batch, 1).s, FAILED);
    EXPECT_TRUE(initiator.freeBatch(batch).ok());
}

TEST(EngineMemoryTest, FreeingAnAllocationThatHoldsARegisteredRangeIsRefused) {
    TransferEngine engine(testing::onlyTransport(TCP));
    ASSERT_TRUE(engine.available());
    char* mem = nullptr;
    ASSERT_TRUE(
        engine.allocateLocalMemory(reinterpret_cast<void**>(&mem), 64 << 10)
            .ok());
    ASSERT_TRUE(engine.registerLocalMemory(mem + 8192, 4096).ok());
    EXPECT_EQ(engine.freeLocalMemory(mem),
              Status::InvalidArgument("freeLocalMemory: buffer " +
                                      testing::bufferText(mem + 8192, 4096) +
                                      " is still registered with tcp; "
                                      "unregister it before freeing the "
                                      "memory"));
    ASSERT_TRUE(engine.unregisterLocalMemory(mem + 8192).ok());
    EXPECT_TRUE(engine.freeLocalMemory(mem).ok());
}

// A peer the test plays by hand: a ControlService publishing one buffer
// whose TCP endpoint is a listener this test answers byte by byte.
class ManualTcpPeer {
 public:
    static constexpr uint64_t kBase = 0x10000000;
    static constexpr uint64_t kLength = 1 << 20;

    ManualTcpPeer() : manager_(std::make_shared<SegmentManager>("", nullptr)) {
        uint16_t data_port = 0;
        EXPECT_TRUE(net::listenOn(0, listener_, data_port).ok());
        control_ = std::make_shared<ControlService>(manager_);
        EXPECT_TRUE(control_->start(0).ok());
        name_ = "127.0.0.1:" + std::to_string(control_->port());
        manager_->updateLocal([&](SegmentDesc& d) {
            d.name = name_;
            BufferDesc b;
            b.addr = kBase;
            b.length = kLength;
            b.transports = {TCP};
            d.getMemory().buffers.push_back(b);
            d.getMemory().transport_attrs[TCP] =
                "127.0.0.1:" + std::to_string(data_port);
            return Status::OK();
        });
    }
    ~ManualTcpPeer() {
        if (conn_ >= 0) ::close(conn_);
        ::close(listener_);
        control_->stop();
    }
    const std::string& name() const { return name_; }

    // Accepts the initiator's connection and reads one request header.
    bool readRequest() {
        pollfd pfd{listener_, POLLIN, 0};
        if (::poll(&pfd, 1, kBoundMs) != 1) return false;
        conn_ = ::accept(listener_, nullptr, nullptr);
        char head[24];
        return conn_ >= 0 && net::recvAll(conn_, head, sizeof(head),
                                          net::deadlineIn(kBoundMs))
                                 .ok();
    }
    // Answers a READ of `length` bytes, all `fill`.
    bool answerRead(size_t length, char fill) {
        // Magic, wire version 1, a zero byte, code 0 (two bytes).
        std::string reply =
            "TREP" + std::string(1, '\1') + std::string(3, '\0');
        for (int i = 7; i >= 0; --i) {
            reply.push_back(static_cast<char>(uint64_t(length) >> (8 * i)));
        }
        reply += std::string(length, fill);
        return net::sendAll(conn_, reply.data(), reply.size(),
                            net::deadlineIn(kBoundMs))
            .ok();
    }

 private:
    std::shared_ptr<SegmentManager> manager_;
    std::shared_ptr<ControlService> control_;
    std::string name_;
    int listener_ = -1;
    int conn_ = -1;
};

TEST(EngineMemoryTest, FreeBatchWithAReadInFlightRefusesAfterItsBound) {
    ManualTcpPeer peer;
    auto conf = testing::onlyTransport(TCP);
    conf->set("batch/free_timeout_ms", 200);
    conf->set("transports/tcp/timeout_ms", 600000);
    auto engine = std::make_unique<TransferEngine>(conf);
    ASSERT_TRUE(engine->available());
    SegmentID seg = 0;
    ASSERT_TRUE(engine->openSegment(seg, peer.name()).ok());
    char* dst = new char[4096];
    std::memset(dst, 0, 4096);
    BatchID batch = engine->allocateBatch(1);
    ASSERT_TRUE(
        engine
            ->submitTransfer(batch, {request(Request::READ, dst, seg,
                                             ManualTcpPeer::kBase, 4096)})
            .ok());
    ASSERT_TRUE(peer.readRequest());  // the READ is on the wire now

    Status s = engine->freeBatch(batch);
    // A caller may release the destination once freeBatch() succeeded.
    if (s.ok()) {
        delete[] dst;
        dst = nullptr;
    }
    EXPECT_EQ(s, Status::InvalidArgument(
                     "freeBatch: batch " + std::to_string(batch) +
                     " still has 1 task(s) in flight after "
                     "batch/free_timeout_ms=200 ms; it stays allocated, free "
                     "it again once they finish"));
    ASSERT_TRUE(peer.answerRead(4096, 'z'));
    if (!dst) {
        // Only reached when freeBatch() let go too early: the worker now
        // receives into the released buffer (ASan: heap-use-after-free).
        engine.reset();
        return;
    }
    EXPECT_EQ(waitDone(*engine, batch, 0).s, COMPLETED);
    EXPECT_EQ(std::string(dst, 4096), std::string(4096, 'z'));
    EXPECT_TRUE(engine->freeBatch(batch).ok());
    EXPECT_EQ(engine->freeBatch(batch),
              Status::InvalidArgument("freeBatch: unknown batch id " +
                                      std::to_string(batch)));
    delete[] dst;
}

TEST(EngineMemoryTest, FreeBatchWaitsForTransfersInFlight) {
    ManualTcpPeer peer;
    auto conf = testing::onlyTransport(TCP);
    conf->set("batch/free_timeout_ms", kBoundMs);
    auto engine = std::make_unique<TransferEngine>(conf);
    ASSERT_TRUE(engine->available());
    SegmentID seg = 0;
    ASSERT_TRUE(engine->openSegment(seg, peer.name()).ok());
    std::vector<char> dst(4096, 0);
    BatchID batch = engine->allocateBatch(1);
    ASSERT_TRUE(
        engine
            ->submitTransfer(batch, {request(Request::READ, dst.data(), seg,
                                             ManualTcpPeer::kBase, 4096)})
            .ok());
    ASSERT_TRUE(peer.readRequest());
    auto freed = std::async(std::launch::async,
                            [&] { return engine->freeBatch(batch); });
    // It cannot have returned: the READ is unanswered.
    EXPECT_NE(freed.wait_for(std::chrono::milliseconds(0)),
              std::future_status::ready);
    ASSERT_TRUE(peer.answerRead(4096, 'y'));
    ASSERT_EQ(freed.wait_for(std::chrono::milliseconds(kBoundMs)),
              std::future_status::ready);
    ASSERT_TRUE(freed.get().ok());
    // freeBatch() returned only after the READ landed.
    EXPECT_EQ(std::string(dst.data(), 4096), std::string(4096, 'y'));
}

}  // namespace
}  // namespace mooncake::tent
