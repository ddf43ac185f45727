// The fixture of softmpcomm_hostile_client_test: a target under abuse by
// raw clients while a well-behaved initiator keeps querying and moving
// bytes through it; TearDown checks that every one of its rounds stayed
// byte-exact.
#pragma once

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

namespace mpcomm_test {

using namespace mpcomm;
using namespace mpcomm::detail;

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
        raw_.setPort(port_);
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
        raw_.closeAll();
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

    int open() { return raw_.open(); }
    int openAs(ConnKind kind) { return raw_.openAs(kind); }
    // A PUT request for the first `length` bytes of the raw window.
    FrameHeader rawPutHeader(uint64_t length, uint64_t seq = 0) {
        FrameHeader put;
        put.type = MsgType::kPutReq;
        put.seq = seq;
        put.addr = rawAddr();
        put.key = raw_keys_[0];
        put.length = put.payload_len = length;
        return put;
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
    RawClients raw_;

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

}  // namespace mpcomm_test
