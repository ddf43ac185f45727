// The fixture of the lifecycle suites: two peers that both advertise an
// MPComm endpoint, helpers to submit and time calls, and a guard for calls
// that run on their own thread while the mock holds a handshake.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <iomanip>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "kit/wait_until.h"
#include "mpcomm_transport_fixture.h"

namespace mooncake::tent::testing {

// A call running on its own thread. If it has not returned when the guard
// goes out of scope (a failed assertion, a regression that blocks), every
// hold of the mock is released so that it can, and it is joined: a test
// never ends with a thread blocked inside a mock it no longer watches.
class BackgroundCall {
 public:
    BackgroundCall(MockMpcommAdapter& adapter, std::function<void()> fn)
        : adapter_(adapter), thread_([this, fn = std::move(fn)] {
              fn();
              done_.store(true);
          }) {}
    ~BackgroundCall() {
        if (!done_.load()) adapter_.releaseAll();
        if (thread_.joinable()) thread_.join();
    }
    BackgroundCall(const BackgroundCall&) = delete;
    BackgroundCall& operator=(const BackgroundCall&) = delete;

    bool done() const { return done_.load(); }
    void join() { thread_.join(); }

 private:
    MockMpcommAdapter& adapter_;
    std::atomic<bool> done_{false};  // before thread_: the thread writes it
    std::thread thread_;
};

class MpcommLifecycleFixture : public MpcommTransportFixture {
 protected:
    using Clock = std::chrono::steady_clock;
    static constexpr int kPeerPort = 14000;
    static constexpr int kPeer2Port = 14001;
    // What a bounded call may take beyond its bound: scheduling on a
    // loaded machine and sanitizer slowdown, never a second bound.
    static constexpr int64_t kMarginMs = 2000;
    // How long a call that must not wait at all is given before the test
    // calls it blocked; generous because a passing call uses none of it.
    static constexpr std::chrono::seconds kNotBlocked{10};

    void SetUp() override {
        MpcommTransportFixture::SetUp();
        publishDefaultPeer();
        publishOn(*peer2_sm_, "v1:10.0.0.3:14001",
                  {mpcommBuffer(kPeerBuffer, kPeerBufferLength)});
    }

    void TearDown() override {
        // A handshake still held would outlive the test on its thread.
        adapter_->releaseAll();
        if (transport_) {
            EXPECT_TRUE(
                waitUntil([this] { return transport_->peers().idle(); }));
        }
        MpcommTransportFixture::TearDown();
    }

    void setConnectTimeout(int64_t ms) {
        conf_->set("transports/mpcomm/connect_timeout_ms", ms);
    }

    Transport::SubBatchRef allocate(size_t capacity = 16) {
        Transport::SubBatchRef batch = nullptr;
        EXPECT_TRUE(transport_->allocateSubBatch(batch, capacity).ok());
        return batch;
    }
    Transport::SubBatchRef submit(const std::vector<Request>& requests,
                                  size_t capacity = 16) {
        Transport::SubBatchRef batch = allocate(capacity);
        Status st = transport_->submitTransferTasks(batch, requests);
        EXPECT_TRUE(st.ok()) << st;
        return batch;
    }
    void release(Transport::SubBatchRef batch) {
        EXPECT_TRUE(transport_->freeSubBatch(batch).ok());
    }

    // The handle of the last transfer issued.
    MpcommTransferHandle lastHandle() {
        auto transfers = adapter_->transfers();
        return transfers.empty() ? kInvalidMpcommTransferHandle
                                 : transfers.back().handle;
    }

    bool stateIs(const std::string& host, MpcommPeerState expected) {
        MpcommPeerState state;
        return transport_->peers().stateOf(host, state) && state == expected;
    }

    // Runs `fn` on its own thread; true when it returned within kNotBlocked.
    bool returnsPromptly(std::function<void()> fn) {
        BackgroundCall call(*adapter_, std::move(fn));
        return waitUntil([&call] { return call.done(); }, kNotBlocked);
    }

    // How long `fn` took, in whole milliseconds (readable on failure).
    template <typename Fn>
    static int64_t timedMs(Fn&& fn) {
        Clock::time_point start = Clock::now();
        fn();
        return std::chrono::duration_cast<std::chrono::milliseconds>(
                   Clock::now() - start)
            .count();
    }

    // The registry's log line for a timed-out handshake of a submission.
    static std::string timeoutLine(const std::string& host,
                                   const std::string& endpoint, int64_t ms) {
        return "MpcommTransport: segment " + host + ": MPComm handshake with " +
               host + " at " + endpoint +
               " did not finish within transports/mpcomm/"
               "connect_timeout_ms=" +
               std::to_string(ms);
    }

    static std::string hex(uint64_t value) {
        std::ostringstream os;
        os << std::hex << value;
        return os.str();
    }
};

// The peer lifecycle suites (mpcomm_lifecycle_test.cpp,
// mpcomm_lifecycle_peers_test.cpp): a short connect bound and a held
// handshake.
class MpcommLifecycle : public MpcommLifecycleFixture {
 protected:
    static constexpr int64_t kTimeoutMs = 200;

    // Installs with kTimeoutMs and leaves kPeer2's first handshake held
    // inside connect(): one submission to it waited kTimeoutMs and failed.
    void installWithAHeldHandshake() {
        setConnectTimeout(kTimeoutMs);
        ASSERT_TRUE(install().ok());
        adapter_->hold(kPeer2);
        auto batch = submit({request(Request::WRITE, openSegment(kPeer2), 8)});
        ASSERT_EQ(statusOf(batch, 0).s, FAILED);
        release(batch);
        ASSERT_EQ(adapter_->connectCallsTo(kPeer2), 1);
        ASSERT_EQ(transport_->peers().flightsRunning(), 1u);
    }

    // Connects kPeer (segment `peer`) with one WRITE and waits until no
    // handshake runs, so that a test's late handshake can only be kPeer2's,
    // even where a loaded sanitizer build takes longer than the bound.
    void connectFirst(SegmentID peer) {
        auto warm = submit({request(Request::WRITE, peer, 8)});
        ASSERT_TRUE(waitUntil([&] { return transport_->peers().idle(); }));
        ASSERT_TRUE(stateIs(kPeer, MpcommPeerState::READY));
        release(warm);
    }

    std::string abandonWarning() const {
        return "MpcommTransport: uninstall abandons 1 MPComm handshake(s) "
               "still inside the provider after "
               "transports/mpcomm/connect_timeout_ms=" +
               std::to_string(kTimeoutMs) + " (peers: " + kPeer2 +
               "); MPComm is shut down when they return";
    }
};

}  // namespace mooncake::tent::testing
