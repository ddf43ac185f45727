// StoreEngineTest's fixture: a real store (kit/store_server.h), target
// engines in child processes on that store (kit/target_process.h; the
// suite links kit/target_main.cpp), and an initiator engine in the test
// process.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "common/json_util.h"
#include "kit/free_tcp_port.h"
#include "kit/request_builder.h"
#include "kit/store_engine_support.h"
#include "kit/store_server.h"
#include "kit/target_process.h"
#include "tent/runtime/metastore.h"
#include "tent/runtime/segment.h"

namespace mooncake::tent::testing {

// The TTL every engine of these tests publishes with: etcd's smallest
// lease with its default settings.
constexpr int kTestTtlMs = 2000;
// The initiator's descriptor cache unless a case needs a short one.
constexpr int kLongCacheTtlMs = 10000;

// One transfer, waited for within 30 s; its final state.
inline TransferStatusEnum transferOnce(TransferEngine& engine,
                                       Request::OpCode op, void* local,
                                       SegmentID target, uint64_t remote,
                                       size_t length) {
    BatchID batch = engine.allocateBatch(1);
    if (batch == 0) return FAILED;
    TransferStatusEnum state = FAILED;
    if (engine
            .submitTransfer(batch,
                            {makeRequest(op, local, target, remote, length)})
            .ok()) {
        const auto deadline =
            std::chrono::steady_clock::now() + std::chrono::seconds(30);
        TransferStatus status;
        while (engine.getTransferStatus(batch, 0, status).ok() &&
               (status.s == PENDING || status.s == INITIAL) &&
               std::chrono::steady_clock::now() < deadline) {
            std::this_thread::yield();
        }
        state = status.s;
    }
    engine.freeBatch(batch);
    return state;
}

using StoreCase = std::tuple<std::string, std::string>;  // store, transport

class StoreEngineTest : public ::testing::TestWithParam<StoreCase> {
 protected:
    void SetUp() override {
        type_ = std::get<0>(GetParam());
        xport_ = parseTransportType(std::get<1>(GetParam()).c_str());
        TENT_SKIP_OR_FAIL_WITHOUT_STORE(type_);
        server_ = std::make_unique<StoreServer>(type_);
        Status s = server_->start();
        ASSERT_TRUE(s.ok()) << s.ToString();
        // The test's own reads and writes: bounded, but not by the
        // engine's bounds (an etcd write waits for its commit).
        MetaStoreOptions options;
        options.timeout_ms = 10000;
        ASSERT_TRUE(
            MetaStore::Create(type_, server_->address(), options, client_)
                .ok());
    }

    // The initiator goes first (its buffer is still registered); each
    // target still running, released, must clean up and exit 0.
    void TearDown() override {
        engine_.reset();
        for (TargetProcess* target : {&target_, &second_}) {
            std::string why;
            if (target->running()) {
                EXPECT_TRUE(target->finish(why)) << why;
            }
        }
    }

    std::string uniqueName(const std::string& what) const {
        return what + "-" + std::to_string(getpid());
    }

    // A target on this case's store and transport, named `name`, serving
    // pattern `seed`, with an MPComm handshake port of its own.
    TargetOptions targetOptions(const std::string& name, uint8_t seed) const {
        TargetOptions options;
        options.xport = xport_;
        options.mpcomm_port = freeTcpPort();
        options.seed = seed;
        options.metadata_type = type_;
        options.metadata_servers = server_->address();
        options.segment_name = name;
        options.ttl_ms = kTestTtlMs;
        return options;
    }

    // Starts `target` as targetOptions(name, seed); fails the test unless
    // it reports ready under that name.
    void startTarget(TargetProcess& target, const std::string& name,
                     uint8_t seed) {
        std::string why;
        ASSERT_EQ(target.start(targetOptions(name, seed), why),
                  TargetProcess::Started::kReady)
            << "target " << name << ": " << why;
        ASSERT_EQ(target.name(), name);
    }

    std::unique_ptr<TransferEngine> startInitiator(
        int cache_ttl_ms = kLongCacheTtlMs) {
        setenv("MPCOMM_TCP_PORT", std::to_string(freeTcpPort()).c_str(), 1);
        auto conf = storeEngineConfig(type_, server_->address(), "", xport_,
                                      kTestTtlMs);
        conf->set("metadata/cache_ttl_ms", cache_ttl_ms);
        auto engine = std::make_unique<TransferEngine>(conf);
        EXPECT_TRUE(engine->available());
        return engine;
    }

    // engine_ (descriptor cache `cache_ttl_ms`) opens the segment `name`
    // as handle_, registers local_ and reads target_'s whole buffer once:
    // it must complete with pattern 7, byte-exact.
    void openTarget(const std::string& name, int cache_ttl_ms) {
        engine_ = startInitiator(cache_ttl_ms);
        ASSERT_TRUE(engine_->available());
        Status s = engine_->openSegment(handle_, name);
        ASSERT_TRUE(s.ok()) << s.ToString();
        local_.assign(kBufferSize, 0);
        ASSERT_TRUE(
            engine_->registerLocalMemory(local_.data(), local_.size()).ok());
        ASSERT_EQ(readAll(target_.base()), COMPLETED);
        ASSERT_EQ(mismatch(7), kBufferSize);
    }

    // The pair most cases start from: target_ named `name` with pattern 7,
    // opened and read once by engine_ (see openTarget).
    void startPair(const std::string& name,
                   int cache_ttl_ms = kLongCacheTtlMs) {
        ASSERT_NO_FATAL_FAILURE(startTarget(target_, name, 7));
        ASSERT_NO_FATAL_FAILURE(openTarget(name, cache_ttl_ms));
    }

    // local_ from `offset`, `length` bytes, to or from `remote` of
    // handle_, by engine_.
    TransferStatusEnum transfer(Request::OpCode op, size_t offset,
                                uint64_t remote, size_t length) {
        return transferOnce(*engine_, op, local_.data() + offset, handle_,
                            remote, length);
    }

    // Zeroes local_ and reads a whole target buffer at `base` into it.
    TransferStatusEnum readAll(uint64_t base) {
        std::fill(local_.begin(), local_.end(), 0);
        return transfer(Request::READ, 0, base, kBufferSize);
    }

    // The first byte of local_ that is not pattern `seed`; kBufferSize
    // when none.
    size_t mismatch(uint8_t seed) const {
        return firstMismatch(local_.data(), local_.size(), seed);
    }

    // The descriptor the store holds under `name`'s key (the record's
    // "segment"), decoded as a peer decodes it; fails the test when the
    // key is absent or the record does not decode.
    void storedSegment(const std::string& name, SegmentDesc& desc) {
        std::string value;
        bool found = false;
        Status s = client_->get("mooncake/tent/segments/" + name, value, found);
        ASSERT_TRUE(s.ok()) << s.ToString();
        ASSERT_TRUE(found) << "no key for " << name;
        Json::Value record;
        std::string errs;
        ASSERT_TRUE(parseJsonText(value, true, record, errs)) << errs;
        s = segmentFromJson(record["segment"], desc);
        ASSERT_TRUE(s.ok()) << s.ToString() << ": " << value;
        ASSERT_EQ(desc.type, SegmentType::Memory) << value;
    }

    bool keyPresent(const std::string& name) {
        std::string value;
        bool found = false;
        Status s = client_->get("mooncake/tent/segments/" + name, value, found);
        EXPECT_TRUE(s.ok()) << s.ToString();
        return found;
    }

    std::string type_;
    TransportType xport_ = TCP;
    std::unique_ptr<StoreServer> server_;
    std::shared_ptr<MetaStore> client_;
    TargetProcess target_;
    TargetProcess second_;  // a second process asking for target_'s name
    std::vector<uint8_t> local_;
    std::unique_ptr<TransferEngine> engine_;
    SegmentID handle_ = 0;
};

}  // namespace mooncake::tent::testing
