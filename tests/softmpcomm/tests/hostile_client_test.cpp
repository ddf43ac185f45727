// The listener under abuse: garbage, truncated and oversized frames, idle
// and trickling clients. Each case runs while a well-behaved initiator keeps
// querying and moving bytes through the same target, and checks that every
// one of its rounds stayed byte-exact.
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <fstream>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "mpcomm.h"
#include "raw_peer.h"
#include "test_util.h"

namespace {

using namespace mpcomm;
using namespace mpcomm::detail;
using mpcomm_test::closedByPeer;
using mpcomm_test::finish;
using mpcomm_test::initOnFreePort;
using mpcomm_test::msSince;
using mpcomm_test::pattern;
using mpcomm_test::PeerAction;
using mpcomm_test::peerActionWithin;
using mpcomm_test::rawConnect;
using mpcomm_test::rawDeadline;
using mpcomm_test::rawHello;
using mpcomm_test::rawPut;
using mpcomm_test::rawQuery;
using mpcomm_test::ScopedEnv;

constexpr size_t kMoverWindow = 2u << 20;
constexpr size_t kRawWindow = 1u << 20;  // also the target's slice size
constexpr size_t kPage = 4096;
// How soon a refused connection must be seen closed: far below the 20 s
// idle timeout of HostileClients, so the close is the frame check's doing.
constexpr int kDropMs = 5000;
// How long a test waits for the idle timeout to drop a connection.
constexpr int kIdleDropMs = 10000;
// How long a test waits for the well-behaved client's next rounds.
constexpr std::chrono::seconds kRoundsTimeout(60);

class HostileClients : public ::testing::Test {
 protected:
    // The target's SOFTMPCOMM_IDLE_TIMEOUT_MS. Long here, so that a drop
    // seen well before it was caused by the frame checks, not the timeout.
    virtual const char* idleTimeoutMs() const { return "20000"; }
    // The target's SOFTMPCOMM_MAX_CONNECTIONS (null: the default).
    virtual const char* maxConnections() const { return nullptr; }

    void SetUp() override {
        ScopedEnv idle("SOFTMPCOMM_IDLE_TIMEOUT_MS", idleTimeoutMs());
        ScopedEnv cap("SOFTMPCOMM_MAX_CONNECTIONS", maxConnections());
        ScopedEnv slice("MPCOMM_MAX_RDMA_TRANSFER_SIZE", "1048576");
        ScopedEnv qps("MPCOMM_QPS_PER_CONNECTION", "2");
        ScopedEnv filter("MPCOMM_NIC_FILTER", nullptr);
        target_ = std::make_unique<MPComm>();
        client_ = std::make_unique<MPComm>();
        port_ = initOnFreePort(*target_, "target", "r0,r1");
        ASSERT_GT(port_, 0);
        ASSERT_EQ(target_->startAcceptThread(), MPCOMM_SUCCESS);
        mover_window_.assign(kMoverWindow, 0);
        // The raw window sits between two registered, unpublished pages.
        raw_region_.assign(kPage + kRawWindow + kPage, 0);
        ASSERT_EQ(target_->registerMemory(mover_window_.data(), kMoverWindow),
                  MPCOMM_SUCCESS);
        ASSERT_EQ(target_->publishBuffer(mover_window_.data(), kMoverWindow, 0),
                  MPCOMM_SUCCESS);
        ASSERT_EQ(
            target_->registerMemory(raw_region_.data(), raw_region_.size()),
            MPCOMM_SUCCESS);
        ASSERT_EQ(target_->publishBuffer(rawWindow(), kRawWindow, 0),
                  MPCOMM_SUCCESS);
        std::vector<RemoteBufferEntry> entries;
        std::string error;
        ASSERT_TRUE(rawQuery(port_, &entries, &error)) << error;
        for (const auto& entry : entries)
            if (entry.addr == rawAddr()) raw_keys_ = entry.rkeys;
        ASSERT_EQ(raw_keys_.size(), 2u);

        ASSERT_GT(initOnFreePort(*client_, "client", "r0,r1"), 0);
        ASSERT_EQ(client_->connect("target", "127.0.0.1", port_),
                  MPCOMM_SUCCESS);
        source_.assign(kMoverWindow, 0);
        sink_.assign(kMoverWindow, 0);
        ASSERT_EQ(client_->registerMemory(source_.data(), kMoverWindow),
                  MPCOMM_SUCCESS);
        ASSERT_EQ(client_->registerMemory(sink_.data(), kMoverWindow),
                  MPCOMM_SUCCESS);
        mover_ = std::thread([this] { moveBytes(); });
        ASSERT_TRUE(waitRounds(1));
    }

    void TearDown() override {
        {
            std::lock_guard<std::mutex> lock(mu_);
            stop_ = true;
        }
        cv_.notify_all();  // a paused mover waits on it
        if (mover_.joinable()) mover_.join();
        EXPECT_EQ(bad_rounds_, 0) << last_failure_;
        for (int fd : fds_) closeSocket(fd);
        client_.reset();
        target_.reset();
    }

    // The well-behaved client: query, put a fresh pattern, read it back.
    void moveBytes() {
        for (uint32_t round = 1;; ++round) {
            {
                std::unique_lock<std::mutex> lock(mu_);
                parked_ = paused_;
                cv_.notify_all();
                cv_.wait(lock, [this] { return stop_ || !paused_; });
                parked_ = false;
                if (stop_) return;
            }
            std::string failure;
            RemoteBufferInfo info;
            int rc =
                client_->queryRemoteBuffer("target", "127.0.0.1", port_, info);
            auto bytes = pattern(kMoverWindow, round);
            std::memcpy(source_.data(), bytes.data(), kMoverWindow);
            auto remote = reinterpret_cast<uintptr_t>(mover_window_.data());
            TransferResult put, get;
            if (rc == MPCOMM_SUCCESS) {
                put = finish(*client_,
                             client_->putAsync(address(source_), "target",
                                               remote, kMoverWindow));
                get =
                    finish(*client_, client_->getAsync(address(sink_), "target",
                                                       remote, kMoverWindow));
            }
            if (rc != MPCOMM_SUCCESS)
                failure = "query failed with " + std::to_string(rc);
            else if (put.error_code != MPCOMM_SUCCESS ||
                     put.bytes_transferred != kMoverWindow)
                failure = "put failed with " + std::to_string(put.error_code);
            else if (get.error_code != MPCOMM_SUCCESS ||
                     get.bytes_transferred != kMoverWindow)
                failure = "get failed with " + std::to_string(get.error_code);
            else if (sink_ != bytes)
                failure = "bytes differ in round " + std::to_string(round);
            std::lock_guard<std::mutex> lock(mu_);
            ++rounds_;
            if (!failure.empty()) {
                ++bad_rounds_;
                last_failure_ = failure;
            }
            cv_.notify_all();
        }
    }

    // Holds the mover between rounds (bounded wait for the round in
    // progress to end), so that no connection of its is open meanwhile.
    bool pauseMover() {
        std::unique_lock<std::mutex> lock(mu_);
        paused_ = true;
        return cv_.wait_for(lock, kRoundsTimeout, [this] { return parked_; });
    }
    void resumeMover() {
        {
            std::lock_guard<std::mutex> lock(mu_);
            paused_ = false;
        }
        cv_.notify_all();
    }

    // Waits (bounded) until the mover finished `more` further rounds.
    bool waitRounds(int more) {
        std::unique_lock<std::mutex> lock(mu_);
        int goal = rounds_ + more;
        return cv_.wait_for(lock, kRoundsTimeout,
                            [&] { return rounds_ >= goal; });
    }

    static uintptr_t address(std::vector<uint8_t>& bytes) {
        return reinterpret_cast<uintptr_t>(bytes.data());
    }
    uint8_t* rawWindow() { return raw_region_.data() + kPage; }
    uint64_t rawAddr() { return reinterpret_cast<uint64_t>(rawWindow()); }
    bool rawRegionIs(uint8_t value) {
        return std::all_of(raw_region_.begin(), raw_region_.end(),
                           [value](uint8_t b) { return b == value; });
    }
    // A PUT cut short may have placed part of what arrived, since payloads
    // land straight in the target buffer (as a torn RDMA WRITE may), but
    // never more than `arrived` bytes, only `value`, and only inside the
    // window it was checked against (the first `length` bytes of it).
    bool onlyArrivedBytesPlaced(uint64_t length, uint8_t value,
                                size_t arrived) {
        size_t placed = 0;
        for (size_t i = 0; i < raw_region_.size(); ++i) {
            if (raw_region_[i] == 0) continue;
            bool inside = i >= kPage && i - kPage < length;
            if (!inside || raw_region_[i] != value) return false;
            ++placed;
        }
        return placed <= arrived;
    }

    int open() {
        std::string error;
        int fd = rawConnect(port_, &error);
        EXPECT_GE(fd, 0) << error;
        fds_.push_back(fd);
        return fd;
    }
    int openAs(ConnKind kind) {
        int fd = open();
        std::string error;
        EXPECT_TRUE(rawHello(fd, kind, 0, &error)) << error;
        return fd;
    }
    static bool sendHeader(int fd, const FrameHeader& header) {
        uint8_t raw[kHeaderSize];
        encodeHeader(header, raw);
        return sendAll(fd, raw, sizeof(raw), rawDeadline());
    }

    // Declared before the instances so they outlive them.
    std::vector<uint8_t> mover_window_, raw_region_, source_, sink_;
    std::unique_ptr<MPComm> target_;
    std::unique_ptr<MPComm> client_;
    int port_ = 0;
    std::vector<uint32_t> raw_keys_;
    std::vector<int> fds_;

    std::thread mover_;
    std::mutex mu_;
    std::condition_variable cv_;
    bool stop_ = false;
    bool paused_ = false;  // asked to wait between rounds
    bool parked_ = false;  // waiting between rounds
    int rounds_ = 0;
    int bad_rounds_ = 0;
    std::string last_failure_;
};

TEST_F(HostileClients, GarbageBeforeHelloIsDroppedAtOnce) {
    int junk_header = open();
    std::vector<uint8_t> junk(kHeaderSize, 0x42);
    ASSERT_TRUE(sendAll(junk_header, junk.data(), junk.size(), rawDeadline()));
    int noise = open();
    auto bytes = pattern(4096, 99);
    ASSERT_TRUE(sendAll(noise, bytes.data(), bytes.size(), rawDeadline()));
    EXPECT_EQ(peerActionWithin(junk_header, kDropMs), PeerAction::kClosed);
    EXPECT_EQ(peerActionWithin(noise, kDropMs), PeerAction::kClosed);
    EXPECT_TRUE(waitRounds(2));
}

// One malformed header, sent after reaching `stage`: the listener must
// close without reading on (nor allocating what the header announces).
struct BadHeader {
    const char* what;
    ConnStage stage;
    FrameHeader header;
};

std::vector<BadHeader> badHeaders(uint64_t window, uint32_t key) {
    auto make = [](MsgType type, uint64_t length, uint64_t payload_len) {
        FrameHeader h;
        h.type = type;
        h.length = length;
        h.payload_len = payload_len;
        return h;
    };
    std::vector<BadHeader> cases = {
        {"HELLO announcing 1 TiB of host id", ConnStage::kAwaitHello,
         make(MsgType::kHello, 0, 1ull << 40)},
        {"HELLO one byte over the host id cap", ConnStage::kAwaitHello,
         make(MsgType::kHello, 0, kMaxHostIdLength + 1)},
        {"HELLO without host id", ConnStage::kAwaitHello,
         make(MsgType::kHello, 0, 0)},
        {"HELLO for QP 16", ConnStage::kAwaitHello,
         make(MsgType::kHello, 16, 4)},
        {"QUERY_REQ before HELLO", ConnStage::kAwaitHello,
         make(MsgType::kQueryReq, 0, 0)},
        {"QUERY_REQ with a payload", ConnStage::kControl,
         make(MsgType::kQueryReq, 0, 1)},
        {"QUERY_REQ announcing 4 EiB", ConnStage::kControl,
         make(MsgType::kQueryReq, 0, 1ull << 62)},
        {"PUT_REQ on a control connection", ConnStage::kControl,
         make(MsgType::kPutReq, 8, 8)},
        {"PUT one byte over the slice size", ConnStage::kData,
         make(MsgType::kPutReq, kRawWindow + 1, kRawWindow + 1)},
        {"PUT of nothing", ConnStage::kData, make(MsgType::kPutReq, 0, 0)},
        {"PUT whose payload exceeds its length", ConnStage::kData,
         make(MsgType::kPutReq, 8, 1ull << 40)},
        {"GET with a payload", ConnStage::kData, make(MsgType::kGetReq, 8, 8)},
        {"GET of 8 EiB", ConnStage::kData,
         make(MsgType::kGetReq, 1ull << 63, 0)},
        {"a reply type as request", ConnStage::kData,
         make(MsgType::kPutAck, 0, 0)},
    };
    FrameHeader with_status = make(MsgType::kGetReq, 8, 0);
    with_status.status = MPCOMM_ERR_PROTOCOL;
    cases.push_back(
        {"a request carrying a status", ConnStage::kData, with_status});
    for (auto& c : cases) {
        c.header.addr = window;
        c.header.key = key;
    }
    return cases;
}

TEST_F(HostileClients, OversizedAndMisplacedHeadersCloseTheConnection) {
    for (const BadHeader& bad : badHeaders(rawAddr(), raw_keys_[0])) {
        int fd = bad.stage == ConnStage::kAwaitHello ? open()
                 : bad.stage == ConnStage::kControl ? openAs(ConnKind::kControl)
                                                    : openAs(ConnKind::kData);
        ASSERT_TRUE(sendHeader(fd, bad.header)) << bad.what;
        EXPECT_EQ(peerActionWithin(fd, kDropMs), PeerAction::kClosed)
            << bad.what;
    }
    EXPECT_TRUE(rawRegionIs(0));
    EXPECT_TRUE(waitRounds(2));
}

TEST_F(HostileClients, LimitsThemselvesAreAccepted) {
    // A host id of exactly the cap, and a PUT of exactly the slice size.
    int fd = open();
    FrameHeader hello;
    hello.type = MsgType::kHello;
    hello.key = static_cast<uint32_t>(ConnKind::kData);
    hello.length = kMaxQpsPerConnection - 1;
    std::string host(kMaxHostIdLength, 'h');
    ASSERT_TRUE(sendFrame(fd, hello, rawDeadline(), host.data(), host.size()));
    FrameHeader ack;
    ASSERT_TRUE(recvHeader(fd, &ack, rawDeadline()));
    EXPECT_EQ(ack.type, MsgType::kHelloAck);
    EXPECT_EQ(ack.status, MPCOMM_SUCCESS);
    std::string id(ack.payload_len, '\0');
    ASSERT_TRUE(recvAll(fd, &id[0], id.size(), rawDeadline()));
    EXPECT_EQ(id, "target");
    EXPECT_EQ(rawPut(fd, rawAddr(), raw_keys_[0], 0xAB, kRawWindow),
              MPCOMM_SUCCESS);
    EXPECT_TRUE(std::all_of(rawWindow(), rawWindow() + kRawWindow,
                            [](uint8_t b) { return b == 0xAB; }));
    EXPECT_EQ(raw_region_[kPage - 1], 0);
    EXPECT_EQ(raw_region_[kPage + kRawWindow], 0);
    EXPECT_TRUE(waitRounds(1));
}

TEST_F(HostileClients, TruncatedFramesAreDroppedWhenTheClientHangsUp) {
    FrameHeader hello;
    hello.type = MsgType::kHello;
    hello.payload_len = 16;
    uint8_t raw[kHeaderSize];
    encodeHeader(hello, raw);

    int half_header = open();
    ASSERT_TRUE(sendAll(half_header, raw, 20, rawDeadline()));
    ::shutdown(half_header, SHUT_WR);

    int half_host_id = open();
    ASSERT_TRUE(sendAll(half_host_id, raw, kHeaderSize, rawDeadline()));
    ASSERT_TRUE(sendAll(half_host_id, "raw-", 4, rawDeadline()));
    ::shutdown(half_host_id, SHUT_WR);

    int half_payload = openAs(ConnKind::kData);
    FrameHeader put;
    put.type = MsgType::kPutReq;
    put.addr = rawAddr();
    put.key = raw_keys_[0];
    put.length = put.payload_len = kPage;
    ASSERT_TRUE(sendHeader(half_payload, put));
    std::vector<uint8_t> half(kPage / 2, 0xCD);
    ASSERT_TRUE(sendAll(half_payload, half.data(), half.size(), rawDeadline()));
    ::shutdown(half_payload, SHUT_WR);

    for (int fd : {half_header, half_host_id, half_payload})
        EXPECT_EQ(peerActionWithin(fd, kDropMs), PeerAction::kClosed);
    EXPECT_TRUE(onlyArrivedBytesPlaced(kPage, 0xCD, half.size()));
    EXPECT_TRUE(waitRounds(2));
}

TEST_F(HostileClients, ShutdownIsPromptWithSilentAndStalledClients) {
    int silent = open();
    int stalled = openAs(ConnKind::kData);
    // Sixteen 1 MiB reads that are never consumed: the target's thread is
    // blocked sending long before they are all out.
    for (uint64_t seq = 1; seq <= 16; ++seq) {
        FrameHeader get;
        get.type = MsgType::kGetReq;
        get.seq = seq;
        get.addr = rawAddr();
        get.key = raw_keys_[0];
        get.length = kRawWindow;
        ASSERT_TRUE(sendHeader(stalled, get));
    }
    ASSERT_TRUE(waitRounds(1));
    {
        std::lock_guard<std::mutex> lock(mu_);
        stop_ = true;
    }
    mover_.join();
    auto start = std::chrono::steady_clock::now();
    target_->shutdown();
    // Well under the 20 s idle timeout that would otherwise end both.
    EXPECT_LT(msSince(start), 2000);
    EXPECT_EQ(peerActionWithin(silent, kDropMs), PeerAction::kClosed);
}

// VmRSS of this process, which holds the target, the client and the test.
uint64_t residentBytes() {
    std::ifstream status("/proc/self/status");
    std::string key;
    while (status >> key) {
        if (key == "VmRSS:") {
            uint64_t kib = 0;
            status >> kib;
            return kib << 10;
        }
        std::getline(status, key);
    }
    return 0;
}

// How much VmRSS may grow while the flood below is connected: the
// connections' threads (one each) and allocator slack; measured about
// 5 MiB plain, 27 MiB under ASan and 135 MiB under TSan, whose per-thread
// state dominates. Honouring the announced lengths with a buffer each, as
// a bounce design would, adds 64 MiB, which the plain build catches.
#if defined(__SANITIZE_THREAD__)
constexpr uint64_t kRssSlackBytes = 320ull << 20;
#elif defined(__SANITIZE_ADDRESS__)
constexpr uint64_t kRssSlackBytes = 192ull << 20;
#else
constexpr uint64_t kRssSlackBytes = 32ull << 20;
#endif

TEST_F(HostileClients, AFloodOfIdleAndAnnouncingClientsLeavesMemoryBounded) {
    const uint64_t before = residentBytes();
    ASSERT_GT(before, 0u);
    // 64 connections that never send a byte, and 64 data connections that
    // each announce a PUT of the whole 1 MiB raw window and send nothing
    // of it: the target allocates nothing per announced byte, stores
    // nothing, and keeps serving the well-behaved client.
    for (int i = 0; i < 64; ++i) open();
    for (uint64_t seq = 1; seq <= 64; ++seq) {
        int fd = openAs(ConnKind::kData);
        FrameHeader put;
        put.type = MsgType::kPutReq;
        put.seq = seq;
        put.addr = rawAddr();
        put.key = raw_keys_[0];
        put.length = put.payload_len = kRawWindow;
        ASSERT_TRUE(sendHeader(fd, put));
    }
    ASSERT_TRUE(waitRounds(3));
    const uint64_t after = residentBytes();
    EXPECT_LT(after > before ? after - before : 0, kRssSlackBytes)
        << "VmRSS went from " << (before >> 20) << " MiB to " << (after >> 20)
        << " MiB";
    EXPECT_TRUE(rawRegionIs(0));
}

class IdleClients : public HostileClients {
 protected:
    // Short, yet long enough for the well-behaved client's HELLO and query
    // on a loaded machine under a sanitizer.
    const char* idleTimeoutMs() const override { return "1000"; }
};

TEST_F(IdleClients, IdleConnectionsAreDroppedButIdleDataConnectionsStay) {
    auto start = std::chrono::steady_clock::now();
    int idle_data = openAs(ConnKind::kData);
    std::vector<int> idle;
    for (int i = 0; i < 100; ++i) idle.push_back(open());
    for (int i = 0; i < 4; ++i) idle.push_back(openAs(ConnKind::kControl));
    // Served while they sit there.
    EXPECT_TRUE(waitRounds(1));
    for (int fd : idle)
        EXPECT_EQ(peerActionWithin(fd, kIdleDropMs), PeerAction::kClosed);
    EXPECT_GE(msSince(start), 1000);
    // The data connection is older than every dropped one, yet still
    // served: a QP may idle.
    EXPECT_EQ(peerActionWithin(idle_data, 0), PeerAction::kNothing);
    EXPECT_EQ(rawPut(idle_data, rawAddr(), raw_keys_[0], 0x77, 64),
              MPCOMM_SUCCESS);
    EXPECT_EQ(rawWindow()[63], 0x77);
    EXPECT_TRUE(waitRounds(1));
}

// Sends `bytes` one at a time, kTrickleMs apart, until the peer closes.
// Returns how many went out and when (ms after `start`) the close was seen.
constexpr int kTrickleMs = 50;
size_t trickle(int fd, const std::vector<uint8_t>& bytes,
               std::chrono::steady_clock::time_point start,
               int64_t* closed_after_ms) {
    *closed_after_ms = -1;
    for (size_t sent = 0; sent < bytes.size(); ++sent) {
        if (peerActionWithin(fd, kTrickleMs) == PeerAction::kClosed ||
            ::send(fd, &bytes[sent], 1, MSG_NOSIGNAL) != 1) {
            *closed_after_ms = msSince(start);
            return sent;
        }
    }
    if (closedByPeer(fd)) *closed_after_ms = msSince(start);
    return bytes.size();
}

std::vector<uint8_t> frameBytes(const FrameHeader& header,
                                const std::string& payload) {
    std::vector<uint8_t> bytes(kHeaderSize);
    FrameHeader copy = header;
    copy.payload_len = payload.size();
    encodeHeader(copy, bytes.data());
    bytes.insert(bytes.end(), payload.begin(), payload.end());
    return bytes;
}

TEST_F(IdleClients, TricklingClientsAreDroppedAtTheFrameDeadline) {
    // Before HELLO: the whole HELLO must arrive within the idle timeout.
    auto start = std::chrono::steady_clock::now();
    int slow_hello = open();
    FrameHeader hello;
    hello.type = MsgType::kHello;
    auto hello_bytes = frameBytes(hello, "trickler");
    int64_t closed_ms = 0;
    size_t sent = trickle(slow_hello, hello_bytes, start, &closed_ms);
    EXPECT_LT(sent, hello_bytes.size());
    EXPECT_GE(closed_ms, 1000);

    // On a control connection: each query within the idle timeout. The
    // server's clock starts at the HELLO that openAs() sends, so the
    // test's clock must start before it for closed_ms to be a lower bound.
    start = std::chrono::steady_clock::now();
    int slow_query = openAs(ConnKind::kControl);
    FrameHeader query;
    query.type = MsgType::kQueryReq;
    sent = trickle(slow_query, frameBytes(query, ""), start, &closed_ms);
    EXPECT_LT(sent, kHeaderSize);
    EXPECT_GE(closed_ms, 1000);

    // On a data connection: a started payload chunk within the timeout.
    start = std::chrono::steady_clock::now();
    int slow_put = openAs(ConnKind::kData);
    FrameHeader put;
    put.type = MsgType::kPutReq;
    put.addr = rawAddr();
    put.key = raw_keys_[0];
    put.length = put.payload_len = kPage;
    ASSERT_TRUE(sendHeader(slow_put, put));
    sent =
        trickle(slow_put, std::vector<uint8_t>(kPage, 0xEE), start, &closed_ms);
    EXPECT_LT(sent, kPage);
    EXPECT_GE(closed_ms, 1000);
    EXPECT_TRUE(onlyArrivedBytesPlaced(kPage, 0xEE, sent));
    EXPECT_TRUE(waitRounds(1));
}

class CappedClients : public HostileClients {
 protected:
    // The well-behaved client holds 4 data connections (2 rails x 2 QPs).
    const char* maxConnections() const override { return "24"; }
};

TEST_F(CappedClients, NewcomersDisplaceTheOldestIdleNeverADataConnection) {
    // The well-behaved client's connections must all be newer than the
    // flood's: at the cap an anonymous connection whose HELLO has not
    // arrived yet is as displaceable as any other (its client is then
    // told, and retries).
    ASSERT_TRUE(pauseMover());
    // Older than every anonymous connection below, and idle throughout.
    int data = openAs(ConnKind::kData);
    std::vector<int> anonymous;
    for (int i = 0; i < 27; ++i) anonymous.push_back(open());
    // 4 + 1 + 19 filled the cap; each later newcomer (the last 8) displaced
    // the oldest anonymous one, at once rather than at the 20 s idle
    // timeout.
    for (int i = 0; i < 8; ++i)
        EXPECT_EQ(peerActionWithin(anonymous[i], kDropMs), PeerAction::kClosed)
            << i;
    // Each query of the well-behaved client displaces one more.
    resumeMover();
    ASSERT_TRUE(waitRounds(2));
    // Oldest first: once one is seen closed, every older one is.
    bool newer_closed = false;
    for (int i = 26; i >= 0; --i) {
        if (newer_closed)
            EXPECT_EQ(peerActionWithin(anonymous[i], kDropMs),
                      PeerAction::kClosed)
                << i;
        else
            newer_closed =
                peerActionWithin(anonymous[i], 0) == PeerAction::kClosed;
    }
    EXPECT_EQ(peerActionWithin(data, 0), PeerAction::kNothing);
    EXPECT_EQ(rawPut(data, rawAddr(), raw_keys_[0], 0x5a, 64), MPCOMM_SUCCESS);
    EXPECT_EQ(rawWindow()[63], 0x5a);
}

}  // namespace
