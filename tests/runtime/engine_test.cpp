// TransferEngine: construction, transports, segments, registration and
// batches, in one process.
#include <arpa/inet.h>
#include <glog/logging.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

#include "kit/log_capture.h"
#include "tent/runtime/control_plane.h"
#include "tent/runtime/transport.h"
#include "tent/transfer_engine.h"

namespace mooncake::tent {
namespace {

// Sets MC_TENT_CONF for one scope; the engine reads it at construction.
class ScopedTentConf {
 public:
    explicit ScopedTentConf(const char* value) {
        const char* old = std::getenv("MC_TENT_CONF");
        had_old_ = old != nullptr;
        if (had_old_) old_ = old;
        if (value) {
            ::setenv("MC_TENT_CONF", value, 1);
        } else {
            ::unsetenv("MC_TENT_CONF");
        }
    }
    ~ScopedTentConf() {
        if (had_old_) {
            ::setenv("MC_TENT_CONF", old_.c_str(), 1);
        } else {
            ::unsetenv("MC_TENT_CONF");
        }
    }

 private:
    bool had_old_ = false;
    std::string old_;
};

std::string hexAddr(const void* p) {
    std::ostringstream os;
    os << p;
    return os.str();
}

// A port that was free a moment ago, outside the RPC range (the kernel's
// ephemeral range).
uint16_t freeEphemeralPort() {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    socklen_t len = sizeof(addr);
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
    ::close(fd);
    return ntohs(addr.sin_port);
}

// Polls the batch until no task is PENDING, within a generous bound; the
// bound only turns a hang into a failure.
TransferStatus waitForBatch(TransferEngine& engine, BatchID batch) {
    TransferStatus overall;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (std::chrono::steady_clock::now() < deadline) {
        EXPECT_TRUE(engine.getTransferStatus(batch, overall).ok());
        if (overall.s != PENDING) return overall;
        std::this_thread::yield();
    }
    ADD_FAILURE() << "batch " << batch << " still PENDING after 60 s";
    return overall;
}

// The smallest transport: only the pure virtuals, so every optional
// operation comes from the base class.
class BareTransport : public Transport {
 public:
    Status allocateSubBatch(SubBatchRef&, size_t) override {
        return Status::OK();
    }
    Status freeSubBatch(SubBatchRef&) override { return Status::OK(); }
    Status submitTransferTasks(SubBatchRef,
                               const std::vector<Request>&) override {
        return Status::OK();
    }
    Status getTransferStatus(SubBatchRef, int, TransferStatus&) override {
        return Status::OK();
    }
    const char* getName() const override { return "bare"; }
};

// Counts single-buffer registrations to observe the list overload.
class CountingTransport : public BareTransport {
 public:
    Status addMemoryBuffer(BufferDesc& desc,
                           const MemoryOptions& options) override {
        ++calls;
        if (desc.addr == fail_addr) return Status::InvalidArgument("no");
        return Status::OK();
    }
    using Transport::addMemoryBuffer;
    int calls = 0;
    uint64_t fail_addr = 0;
};

TEST(TransportBaseTest, OptionalOperationsShareOneNotImplemented) {
    BareTransport t;
    std::string name = "host:1";
    EXPECT_TRUE(t.install(name, nullptr, nullptr, nullptr).ok());
    EXPECT_EQ(name, "host:1");
    EXPECT_TRUE(t.uninstall().ok());
    EXPECT_FALSE(t.supportsCancellation());
    EXPECT_FALSE(t.supportNotification());
    BufferDesc desc;
    std::vector<BufferDesc> list(2);
    const std::vector<std::pair<Status, std::string>> cases = {
        {t.addMemoryBuffer(desc, MemoryOptions()), "addMemoryBuffer"},
        {t.addMemoryBuffer(list, MemoryOptions()), "addMemoryBuffer"},
        {t.removeMemoryBuffer(desc), "removeMemoryBuffer"},
    };
    for (const auto& c : cases) {
        EXPECT_TRUE(c.first.IsNotImplemented()) << c.first;
        EXPECT_EQ(c.first.message(),
                  "bare transport does not support " + c.second);
    }
}

TEST(TransportBaseTest, BufferListRegistersEachUntilTheFirstFailure) {
    CountingTransport t;
    std::vector<BufferDesc> list(3);
    list[0].addr = 1;
    list[1].addr = 2;
    list[2].addr = 3;
    EXPECT_TRUE(t.addMemoryBuffer(list, MemoryOptions()).ok());
    EXPECT_EQ(t.calls, 3);
    t.calls = 0;
    t.fail_addr = 2;
    EXPECT_TRUE(t.addMemoryBuffer(list, MemoryOptions()).IsInvalidArgument());
    EXPECT_EQ(t.calls, 2);
}

TEST(TransportTableTest, RowsFollowTheSupportedOrder) {
    const std::vector<TransportEntry>& table = transportTable();
    ASSERT_EQ(table.size(), 3u);
    EXPECT_STREQ(table[0].name, "shm");
    EXPECT_EQ(table[0].type, SHM);
    EXPECT_FALSE(table[0].enabled_by_default);
    EXPECT_STREQ(table[1].name, "tcp");
    EXPECT_EQ(table[1].type, TCP);
    EXPECT_TRUE(table[1].enabled_by_default);
    EXPECT_STREQ(table[2].name, "mpcomm");
    EXPECT_EQ(table[2].type, MPCOMM);
#ifdef TENT_HAVE_MPCOMM
    EXPECT_TRUE(table[2].enabled_by_default);
#else
    EXPECT_FALSE(table[2].enabled_by_default);
#endif
    for (const TransportEntry& row : table) {
        std::unique_ptr<Transport> t = row.factory();
        ASSERT_NE(t, nullptr);
        EXPECT_STREQ(t->getName(), row.name);
        EXPECT_EQ(parseTransportType(t->getName()), row.type);
    }
}

TEST(TransportTableTest, AFactoryOverrideBuildsTheRowUntilRemoved) {
    ScopedTentConf no_env(nullptr);
    int built = 0;
    setTransportFactoryOverride(TCP, [&built] {
        ++built;
        return transportTable()[1].factory();  // the tcp row
    });
    {
        auto conf = std::make_shared<Config>();
        conf->set("rpc_server_hostname", "127.0.0.1");
        conf->set("transports/mpcomm/enable", false);
        TransferEngine engine(conf);
        ASSERT_TRUE(engine.available());
        EXPECT_EQ(engine.getSupportedTransports(),
                  std::vector<std::string>{"tcp"});
    }
    EXPECT_EQ(built, 1);
    // The row's gate still applies to an overridden row.
    {
        auto conf = std::make_shared<Config>();
        conf->set("rpc_server_hostname", "127.0.0.1");
        conf->set("transports/tcp/enable", false);
        conf->set("transports/mpcomm/enable", false);
        TransferEngine engine(conf);
    }
    EXPECT_EQ(built, 1);
    setTransportFactoryOverride(TCP, nullptr);
    {
        auto conf = std::make_shared<Config>();
        conf->set("rpc_server_hostname", "127.0.0.1");
        conf->set("transports/mpcomm/enable", false);
        TransferEngine engine(conf);
        ASSERT_TRUE(engine.available());
    }
    EXPECT_EQ(built, 1);
}

class EngineTest : public ::testing::Test {
 protected:
    ScopedTentConf no_env_{nullptr};
};

TEST_F(EngineTest, ComesUpWithP2pAndPortFromTheRpcRange) {
    TransferEngine engine;
    ASSERT_TRUE(engine.available());
    const std::string name = engine.getSegmentName();
    const uint16_t port = engine.getRpcServerPort();
    EXPECT_GE(port, ControlService::kPortRangeBegin);
    EXPECT_LE(port, ControlService::kPortRangeEnd);
    EXPECT_EQ(name, discoverLocalHostname() + ":" + std::to_string(port));
    EXPECT_EQ(engine.getRpcServerAddress(), name);
}

TEST_F(EngineTest, RpcServerPortAndHostnameAreHonoured) {
    auto conf = std::make_shared<Config>();
    const uint16_t port = freeEphemeralPort();
    conf->set("rpc_server_port", static_cast<int>(port));
    conf->set("rpc_server_hostname", "127.0.0.1");
    // p2p overwrites a configured local_segment_name.
    conf->set("local_segment_name", "ignored-name");
    TransferEngine engine(conf);
    ASSERT_TRUE(engine.available());
    EXPECT_EQ(engine.getRpcServerPort(), port);
    EXPECT_EQ(engine.getSegmentName(), "127.0.0.1:" + std::to_string(port));
}

TEST_F(EngineTest, SupportedTransportsFollowTheTableOrder) {
    TransferEngine engine;
    ASSERT_TRUE(engine.available());
#ifdef TENT_HAVE_MPCOMM
    // mpcomm is on by default here but needs a working provider; tcp comes
    // first either way.
    std::vector<std::string> names = engine.getSupportedTransports();
    ASSERT_FALSE(names.empty());
    EXPECT_EQ(names[0], "tcp");
#else
    EXPECT_EQ(engine.getSupportedTransports(), std::vector<std::string>{"tcp"});
#endif
}

TEST_F(EngineTest, UnsupportedMetadataTypeIsNamed) {
    auto conf = std::make_shared<Config>();
    conf->set("metadata_type", "zookeeper");
    TransferEngine engine(conf);
    EXPECT_FALSE(engine.available());
    SegmentID handle = 0;
    Status s = engine.openSegment(handle, "127.0.0.1:15000");
    ASSERT_TRUE(s.IsInternalError()) << s;
    EXPECT_EQ(s.message(),
              "TransferEngine is not available: metadata_type zookeeper is "
              "not supported (p2p, etcd, redis and http are)");
    EXPECT_EQ(engine.allocateBatch(4), 0u);
    EXPECT_TRUE(engine.getSupportedTransports().empty());
}

TEST_F(EngineTest, MissingConfigFileIsNamed) {
    TransferEngine engine(std::string("/nonexistent/tent.json"));
    EXPECT_FALSE(engine.available());
    void* addr = nullptr;
    Status s = engine.allocateLocalMemory(&addr, 4096);
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.message().find("/nonexistent/tent.json"), std::string::npos)
        << s;
}

TEST_F(EngineTest, TwoEnginesOpenEachOthersSegments) {
    TransferEngine a, b;
    ASSERT_TRUE(a.available());
    ASSERT_TRUE(b.available());
    ASSERT_NE(a.getSegmentName(), b.getSegmentName());
    void* buf = nullptr;
    ASSERT_TRUE(b.allocateLocalMemory(&buf, 1 << 20).ok());
    ASSERT_TRUE(b.registerLocalMemory(buf, 1 << 20).ok());

    SegmentID b_in_a = 0, a_in_b = 0;
    ASSERT_TRUE(a.openSegment(b_in_a, b.getSegmentName()).ok());
    ASSERT_TRUE(b.openSegment(a_in_b, a.getSegmentName()).ok());
    EXPECT_NE(b_in_a, LOCAL_SEGMENT_ID);
    EXPECT_NE(a_in_b, LOCAL_SEGMENT_ID);

    SegmentInfo info;
    ASSERT_TRUE(a.getSegmentInfo(b_in_a, info).ok());
    EXPECT_EQ(info.type, SegmentInfo::Memory);
    ASSERT_EQ(info.buffers.size(), 1u);
    EXPECT_EQ(info.buffers[0].base, reinterpret_cast<uint64_t>(buf));
    EXPECT_EQ(info.buffers[0].length, 1u << 20);

    ASSERT_TRUE(b.getSegmentInfo(a_in_b, info).ok());
    EXPECT_TRUE(info.buffers.empty());

    EXPECT_TRUE(a.closeSegment(b_in_a).ok());
    EXPECT_TRUE(b.closeSegment(a_in_b).ok());
    EXPECT_TRUE(b.unregisterLocalMemory(buf).ok());
    EXPECT_TRUE(b.freeLocalMemory(buf).ok());
}

TEST_F(EngineTest, RegisterUnregisterRoundTrip) {
    TransferEngine engine;
    ASSERT_TRUE(engine.available());
    void* buf = nullptr;
    ASSERT_TRUE(engine.allocateLocalMemory(&buf, 8192).ok());
    EXPECT_EQ(reinterpret_cast<uintptr_t>(buf) % ::sysconf(_SC_PAGESIZE), 0u);
    ASSERT_TRUE(engine.registerLocalMemory(buf, 8192).ok());

    SegmentInfo info;
    ASSERT_TRUE(engine.getSegmentInfo(LOCAL_SEGMENT_ID, info).ok());
    ASSERT_EQ(info.buffers.size(), 1u);
    EXPECT_EQ(info.buffers[0].base, reinterpret_cast<uint64_t>(buf));
    EXPECT_EQ(info.buffers[0].length, 8192u);

    Status again = engine.registerLocalMemory(buf, 8192);
    ASSERT_TRUE(again.IsInvalidArgument()) << again;
    EXPECT_EQ(again.message(), "buffer " + hexAddr(buf) +
                                   " (length 8192) is already registered");

    ASSERT_TRUE(engine.unregisterLocalMemory(buf, 8192).ok());
    ASSERT_TRUE(engine.getSegmentInfo(LOCAL_SEGMENT_ID, info).ok());
    EXPECT_TRUE(info.buffers.empty());

    Status unknown = engine.unregisterLocalMemory(buf);
    ASSERT_TRUE(unknown.IsInvalidArgument()) << unknown;
    EXPECT_EQ(unknown.message(),
              "unregisterLocalMemory: " + hexAddr(buf) + " is not registered");
    ASSERT_TRUE(engine.freeLocalMemory(buf).ok());
    Status double_free = engine.freeLocalMemory(buf);
    EXPECT_TRUE(double_free.IsInvalidArgument()) << double_free;
}

TEST_F(EngineTest, MoreRequestsThanCapacityAreRefusedWhole) {
    TransferEngine engine;
    ASSERT_TRUE(engine.available());
    std::vector<char> src(64);
    BatchID batch = engine.allocateBatch(2);
    ASSERT_NE(batch, 0u);
    Request r;
    r.opcode = Request::WRITE;
    r.source = src.data();
    r.length = src.size();
    Status s = engine.submitTransfer(batch, {r, r, r});
    ASSERT_TRUE(s.IsTooManyRequests()) << s;
    EXPECT_EQ(s.message(), "batch " + std::to_string(batch) +
                               ": 3 requests exceed the remaining capacity 2 "
                               "of 2");
    std::vector<TransferStatus> list;
    ASSERT_TRUE(engine.getTransferStatus(batch, list).ok());
    EXPECT_TRUE(list.empty());
    EXPECT_TRUE(engine.freeBatch(batch).ok());
    EXPECT_TRUE(engine.freeBatch(batch).IsInvalidArgument());
}

TEST_F(EngineTest, LoopbackWriteReadAndUnroutableTaskFailsAlone) {
    TransferEngine engine;
    ASSERT_TRUE(engine.available());
    const size_t kLen = 256 * 1024;
    void* target = nullptr;
    ASSERT_TRUE(engine.allocateLocalMemory(&target, kLen).ok());
    ASSERT_TRUE(engine.registerLocalMemory(target, kLen).ok());
    std::vector<char> src(kLen), back(kLen, 0);
    for (size_t i = 0; i < kLen; ++i) src[i] = static_cast<char>(i * 7 + 3);

    BatchID batch = engine.allocateBatch(4);
    Request w;
    w.opcode = Request::WRITE;
    w.source = src.data();
    w.target_id = LOCAL_SEGMENT_ID;
    w.target_offset = reinterpret_cast<uint64_t>(target);
    w.length = kLen;
    Request outside = w;
    outside.target_offset += kLen;  // just past the buffer: no route
    ASSERT_TRUE(engine.submitTransfer(batch, {w, outside}).ok());
    TransferStatus overall = waitForBatch(engine, batch);
    EXPECT_EQ(overall.s, FAILED);
    EXPECT_EQ(overall.transferred_bytes, kLen);
    TransferStatus t0, t1;
    ASSERT_TRUE(engine.getTransferStatus(batch, 0, t0).ok());
    ASSERT_TRUE(engine.getTransferStatus(batch, 1, t1).ok());
    EXPECT_EQ(t0.s, COMPLETED);
    EXPECT_EQ(t1.s, FAILED);
    EXPECT_EQ(std::memcmp(target, src.data(), kLen), 0);

    Request r = w;
    r.opcode = Request::READ;
    r.source = back.data();
    ASSERT_TRUE(engine.submitTransfer(batch, {r}).ok());
    TransferStatus t2;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    do {
        ASSERT_TRUE(engine.getTransferStatus(batch, 2, t2).ok());
        std::this_thread::yield();
    } while (t2.s == PENDING && std::chrono::steady_clock::now() < deadline);
    EXPECT_EQ(t2.s, COMPLETED);
    EXPECT_EQ(t2.transferred_bytes, kLen);
    EXPECT_EQ(back, src);

    Status bad_id = engine.getTransferStatus(batch, 3, t2);
    ASSERT_TRUE(bad_id.IsInvalidArgument()) << bad_id;
    EXPECT_EQ(bad_id.message(),
              "getTransferStatus: task id 3 out of range (batch " +
                  std::to_string(batch) + " has 3 tasks)");
    EXPECT_TRUE(engine.freeBatch(batch).ok());
    EXPECT_TRUE(engine.unregisterLocalMemory(target).ok());
}

TEST(EngineEnvTest, TcpDisabledByMcTentConfMakesRegistrationFail) {
    ScopedTentConf env(R"({"transports": {"tcp": {"enable": false}}})");
    TransferEngine engine;
    ASSERT_TRUE(engine.available());  // the control plane alone suffices
#ifndef TENT_HAVE_MPCOMM
    EXPECT_TRUE(engine.getSupportedTransports().empty());
    std::vector<char> buf(4096);
    Status s = engine.registerLocalMemory(buf.data(), buf.size());
    ASSERT_TRUE(s.IsInvalidArgument()) << s;
    EXPECT_EQ(s.message(), "no loaded transport could register buffer " +
                               hexAddr(buf.data()) +
                               " (length 4096) (no transport is loaded)");
#else
    for (const std::string& name : engine.getSupportedTransports()) {
        EXPECT_NE(name, "tcp");
    }
#endif
}

#ifndef TENT_HAVE_MPCOMM
TEST(EngineEnvTest, MpcommEnabledWithoutUseMpcommIsSkippedWithReason) {
    ScopedTentConf env(R"({"transports": {"mpcomm": {"enable": true}}})");
    testing::LogCapture sink;
    TransferEngine engine;
    ASSERT_TRUE(engine.available());
    std::vector<std::string> skipped =
        sink.linesStartingWith("Transport mpcomm skipped: ");
    ASSERT_EQ(skipped.size(), 1u);
    EXPECT_NE(skipped[0].find("USE_MPCOMM"), std::string::npos) << skipped[0];
    EXPECT_EQ(engine.getSupportedTransports(), std::vector<std::string>{"tcp"});
}
#endif

}  // namespace
}  // namespace mooncake::tent
