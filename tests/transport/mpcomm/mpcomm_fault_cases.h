// The provider faults of FaultyMpcommAdapter, each driven through
// MpcommTransport and checked against the recovery rule of
// docs/mpcomm_transport.md (and the spec's "Failed to query remote buffers"
// guide): what fails, with which message, which provider calls are made how
// often, and that the next request after recovery is byte-exact.
//
// The checks are written once against the wrapper's own counters, so they
// hold for any provider under it: tests/mpcomm/mpcomm_fault_injection_test
// runs them over the mock (which moves the bytes in-process), and
// tests/mpcomm_fault_test.cpp over softmpcomm (USE_MPCOMM=ON), where the
// peer is a second provider instance in this process and the bytes cross a
// real socket. A subclass supplies the provider, starts the peer and picks
// the local handshake port.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "kit/faulty_mpcomm_adapter.h"
#include "kit/wait_until.h"
#include "mpcomm_transport_fixture.h"

namespace mooncake::tent::testing {

class MpcommFaultFixture : public MpcommTransportFixture {
 protected:
    static constexpr size_t kLength = 64;

    void SetUp() override {
        MpcommTransportFixture::SetUp();
        peer_mem_.assign(sizeof(local_data_), 0);
        faulty_ = std::make_shared<FaultyMpcommAdapter>(makeProvider());
        transport_ = std::make_unique<MpcommTransport>(faulty_);
        transport_->setModulesPath(no_peermem_.path());
        ASSERT_NO_FATAL_FAILURE(startPeer());
        peer_ = openPeer();
    }

    // The provider under the wrapper.
    virtual std::shared_ptr<MpcommAdapter> makeProvider() = 0;
    // Makes kPeer reachable and publishes its descriptor: an endpoint
    // (peer_endpoint_) and peer_mem_ as its one buffer.
    virtual void startPeer() = 0;
    // The handshake port the next install() binds (sets MPCOMM_TCP_PORT
    // when the subclass needs a free one).
    virtual int prepareLocalPort() = 0;

    Status installOnly() {
        local_port_ = prepareLocalPort();
        return install();
    }
    // install() plus local_data_ registered (a real provider moves only
    // registered memory).
    void installAndRegister() {
        ASSERT_TRUE(installOnly().ok());
        local_buffer_ = mpcommBuffer(reinterpret_cast<uint64_t>(local_data_),
                                     sizeof(local_data_));
        ASSERT_TRUE(
            transport_->addMemoryBuffer(local_buffer_, MemoryOptions{}).ok());
    }

    uint64_t peerAddr(size_t offset = 0) {
        return reinterpret_cast<uint64_t>(peer_mem_.data()) + offset;
    }
    Request to(Request::OpCode op, size_t offset, size_t length = kLength) {
        Request r = request(op, peer_, length, peerAddr(offset));
        r.source = local_data_ + offset;
        return r;
    }
    Transport::SubBatchRef submit(const std::vector<Request>& requests) {
        Transport::SubBatchRef batch = nullptr;
        EXPECT_TRUE(transport_->allocateSubBatch(batch, 16).ok());
        Status st = transport_->submitTransferTasks(batch, requests);
        EXPECT_TRUE(st.ok()) << st;
        return batch;
    }
    void release(Transport::SubBatchRef batch) {
        EXPECT_TRUE(transport_->freeSubBatch(batch).ok());
    }
    // The task's state once it left PENDING (a real provider completes
    // asynchronously; the mock at once).
    TransferStatus finalStatus(Transport::SubBatchRef batch, int task) {
        TransferStatus status;
        EXPECT_TRUE(waitUntil([&] {
            status = statusOf(batch, task);
            return status.s != PENDING;
        })) << "task "
            << task << " still PENDING";
        return status;
    }
    TransferStatusEnum runOne(const Request& r) {
        auto batch = submit({r});
        TransferStatusEnum s = finalStatus(batch, 0).s;
        release(batch);
        return s;
    }

    static std::vector<char> pattern(size_t length, int seed) {
        std::vector<char> bytes(length);
        for (size_t i = 0; i < length; ++i) {
            bytes[i] = static_cast<char>((i * 31 + seed * 17 + 1) & 0xff);
        }
        return bytes;
    }
    bool localIs(size_t offset, const std::vector<char>& bytes) {
        return std::memcmp(local_data_ + offset, bytes.data(), bytes.size()) ==
               0;
    }
    bool peerIs(size_t offset, const std::vector<char>& bytes) {
        return std::memcmp(peer_mem_.data() + offset, bytes.data(),
                           bytes.size()) == 0;
    }

    // WRITE a fresh pattern to the peer and READ it back into zeroed local
    // memory: both COMPLETED, both sides byte-exact.
    void expectRoundTrip(int seed, size_t offset = 1024) {
        std::vector<char> bytes = pattern(kLength, seed);
        std::memcpy(local_data_ + offset, bytes.data(), kLength);
        EXPECT_EQ(runOne(to(Request::WRITE, offset)), COMPLETED);
        EXPECT_TRUE(peerIs(offset, bytes)) << "WRITE not byte-exact";
        std::memset(local_data_ + offset, 0, kLength);
        EXPECT_EQ(runOne(to(Request::READ, offset)), COMPLETED);
        EXPECT_TRUE(localIs(offset, bytes)) << "READ not byte-exact";
    }

    std::string segmentError(const std::string& operation, int code) {
        return "MpcommTransport: segment " + kPeer + ": MPComm " + operation +
               " " + peer_endpoint_ + " (host " + kPeer +
               ") failed, error=" + std::to_string(code);
    }
    std::string transferError(const char* op, uint64_t addr, int code) {
        return std::string("MpcommTransport: ") + op + " of " +
               std::to_string(kLength) + " bytes to remote address " +
               mpcommHexAddr(addr) + " failed, error=" + std::to_string(code);
    }

    // --- the eight faults -------------------------------------------------

    // install(): init() fails. The error is returned as the provider gave
    // it, the provider is shut down (nothing else started), nothing is
    // advertised; the next install() works.
    void checkInstallFailure() {
        faulty_->init_failures = 1;
        Status st = installOnly();
        EXPECT_TRUE(st.IsRdmaError()) << st;
        EXPECT_EQ(st.message(),
                  "MPComm init (host_id=" + kLocal + ", tcp_port=" +
                      std::to_string(local_port_) + ") failed, error=-101");
        EXPECT_EQ(faulty_->forwarded_init, 0);
        EXPECT_EQ(faulty_->start_accept_calls, 0);
        EXPECT_EQ(faulty_->shutdown_calls, 1);
        EXPECT_EQ(attrOf(*local_sm_->getLocal(), MPCOMM), "");
        ASSERT_NO_FATAL_FAILURE(installAndRegister());
        EXPECT_EQ(faulty_->init_calls, 2);
        EXPECT_EQ(faulty_->forwarded_init, 1);
        EXPECT_NE(attrOf(*local_sm_->getLocal(), MPCOMM), "");
        expectRoundTrip(1);
    }

    // install(): startAcceptThread() fails. Unwound: shut down without a
    // stopAcceptThread() for a listener that never started.
    void checkAcceptFailure() {
        faulty_->accept_failures = 1;
        Status st = installOnly();
        EXPECT_EQ(st.message(), "MPComm startAcceptThread failed, error=-102");
        EXPECT_EQ(faulty_->forwarded_init, 1);
        EXPECT_EQ(faulty_->forwarded_accept, 0);
        EXPECT_EQ(faulty_->stop_accept_calls, 0);
        EXPECT_EQ(faulty_->shutdown_calls, 1);
        EXPECT_EQ(attrOf(*local_sm_->getLocal(), MPCOMM), "");
        ASSERT_NO_FATAL_FAILURE(installAndRegister());
        EXPECT_EQ(faulty_->forwarded_accept, 1);
        expectRoundTrip(2);
    }

    // connect() fails n times: each request fails alone naming the segment
    // and the provider's error, the peer is forgotten (nothing cached), and
    // request n+1 performs the whole handshake once: connect n+1 times,
    // query once.
    void checkConnectFailures(int n) {
        ASSERT_NO_FATAL_FAILURE(installAndRegister());
        faulty_->connect_failures = n;
        for (int i = 0; i < n; ++i) {
            LogCapture logs;
            EXPECT_EQ(runOne(to(Request::WRITE, 0)), FAILED);
            EXPECT_EQ(logs.count(segmentError("connect to", -103)), 1);
            EXPECT_FALSE(transport_->peers().contains(kPeer));
            EXPECT_EQ(faulty_->connect_calls, i + 1);
        }
        EXPECT_EQ(faulty_->forwarded_connect, 0);
        EXPECT_EQ(faulty_->query_calls, 0);
        EXPECT_EQ(faulty_->put_calls + faulty_->get_calls, 0);
        expectRoundTrip(3);
        EXPECT_EQ(faulty_->connect_calls, n + 1);
        EXPECT_EQ(faulty_->forwarded_connect, 1);
        EXPECT_EQ(faulty_->query_calls, 1);
        EXPECT_EQ(faulty_->injected, n);
        EXPECT_EQ(faulty_->handlesNotReleasedOnce(), 0);
        EXPECT_EQ(faulty_->misuse, 0);
    }

    // queryRemoteBuffer() fails n times: each request fails, the peer stays
    // CONNECTED_NO_KEYS, the next request queries again over the same
    // connection: connect once, query n+1 times.
    void checkQueryFailures(int n) {
        ASSERT_NO_FATAL_FAILURE(installAndRegister());
        faulty_->query_failures = n;
        for (int i = 0; i < n; ++i) {
            LogCapture logs;
            EXPECT_EQ(runOne(to(Request::WRITE, 0)), FAILED);
            EXPECT_EQ(logs.count("MpcommTransport: Failed to query remote "
                                 "buffers from " +
                                 kPeer + ", error=-104"),
                      1);
            EXPECT_EQ(logs.count(segmentError("queryRemoteBuffer from", -104)),
                      1);
            MpcommPeerState state;
            ASSERT_TRUE(transport_->peers().stateOf(kPeer, state));
            EXPECT_EQ(state, MpcommPeerState::CONNECTED_NO_KEYS);
            EXPECT_EQ(faulty_->query_calls, i + 1);
        }
        EXPECT_EQ(faulty_->put_calls + faulty_->get_calls, 0);
        expectRoundTrip(4);
        EXPECT_EQ(faulty_->connect_calls, 1);
        EXPECT_EQ(faulty_->query_calls, n + 1);
        EXPECT_EQ(faulty_->forwarded_query, 1);
        EXPECT_EQ(faulty_->handlesNotReleasedOnce(), 0);
        EXPECT_EQ(faulty_->misuse, 0);
    }

    // put/get refused: the refused tasks are FAILED at submission, named in
    // the log, never released (no handle); the others of the same batch
    // complete byte-exact, and nothing refused lands.
    void checkIssueRefusal() {
        ASSERT_NO_FATAL_FAILURE(installAndRegister());
        faulty_->issue_refusals = 2;
        std::vector<Request> requests;
        for (int i = 0; i < 4; ++i) {
            std::vector<char> bytes = pattern(kLength, 10 + i);
            std::memcpy(local_data_ + i * kLength, bytes.data(), kLength);
            requests.push_back(to(Request::WRITE, i * kLength));
        }
        LogCapture logs;
        auto batch = submit(requests);
        for (int i = 0; i < 2; ++i) {
            EXPECT_EQ(statusOf(batch, i).s, FAILED) << i;
            EXPECT_EQ(
                logs.count("MpcommTransport: MPComm refused a WRITE of " +
                           std::to_string(kLength) + " bytes to " + kPeer +
                           " at " + mpcommHexAddr(peerAddr(i * kLength))),
                1);
        }
        for (int i = 2; i < 4; ++i) {
            EXPECT_EQ(finalStatus(batch, i).s, COMPLETED) << i;
            EXPECT_TRUE(peerIs(i * kLength, pattern(kLength, 10 + i)));
        }
        EXPECT_TRUE(peerIs(0, std::vector<char>(2 * kLength, 0)));
        release(batch);
        EXPECT_EQ(faulty_->put_calls, 4);
        EXPECT_EQ(faulty_->forwarded_posts, 2);
        EXPECT_EQ(faulty_->handlesIssued(), 2);
        EXPECT_EQ(faulty_->release_calls, 2);
        EXPECT_EQ(faulty_->handlesNotReleasedOnce(), 0);
        expectRoundTrip(5);
        EXPECT_EQ(faulty_->misuse, 0);
    }

    // A transfer completes with an error: FAILED with 0 bytes, logged with
    // the provider's code, its handle released once; the next use reads
    // the peer's descriptor afresh, finds the same process, does not
    // reconnect, and completes.
    void checkTransferError() {
        ASSERT_NO_FATAL_FAILURE(installAndRegister());
        expectRoundTrip(6);
        faulty_->transfer_errors = 1;
        LogCapture logs;
        auto batch = submit({to(Request::WRITE, 0)});
        MpcommTransferHandle handle = faulty_->lastHandle();
        const int fetches = fetcher_->fetches;
        TransferStatus status = finalStatus(batch, 0);
        EXPECT_EQ(status.s, FAILED);
        EXPECT_EQ(status.transferred_bytes, 0u);
        EXPECT_EQ(logs.count(transferError("WRITE", peerAddr(0), -105)), 1);
        release(batch);
        EXPECT_EQ(faulty_->releasesOf(handle), 1);
        expectRoundTrip(7);
        EXPECT_EQ(fetcher_->fetches, fetches + 1);
        EXPECT_EQ(faulty_->connect_calls, 1);
        EXPECT_EQ(faulty_->handlesNotReleasedOnce(), 0);
        EXPECT_EQ(faulty_->misuse, 0);
    }

    // Success with fewer bytes than asked (WRITE and READ): FAILED with the
    // count MPComm gave, logged; only that prefix moved; released once; the
    // next request completes.
    void checkShortTransfer() {
        ASSERT_NO_FATAL_FAILURE(installAndRegister());
        const size_t moved = kLength - faulty_->short_by;
        std::vector<char> out = pattern(kLength, 8);
        std::memcpy(local_data_, out.data(), kLength);
        std::vector<char> in = pattern(kLength, 9);
        std::memcpy(peer_mem_.data() + kLength, in.data(), kLength);
        faulty_->short_transfers = 2;
        LogCapture logs;
        auto batch =
            submit({to(Request::WRITE, 0), to(Request::READ, kLength)});
        for (int i = 0; i < 2; ++i) {
            TransferStatus status = finalStatus(batch, i);
            EXPECT_EQ(status.s, FAILED) << i;
            EXPECT_EQ(status.transferred_bytes, moved) << i;
        }
        for (const char* op : {"WRITE", "READ"}) {
            EXPECT_EQ(
                logs.count(std::string("MpcommTransport: ") + op +
                           " reported success after " + std::to_string(moved) +
                           " of " + std::to_string(kLength) +
                           " bytes; marking it FAILED"),
                1);
        }
        // Exactly the prefix moved, both ways.
        EXPECT_TRUE(
            peerIs(0, std::vector<char>(out.begin(), out.begin() + moved)));
        EXPECT_TRUE(peerIs(moved, std::vector<char>(kLength - moved, 0)));
        EXPECT_TRUE(localIs(kLength,
                            std::vector<char>(in.begin(), in.begin() + moved)));
        EXPECT_TRUE(
            localIs(kLength + moved, std::vector<char>(kLength - moved, 0)));
        release(batch);
        EXPECT_EQ(faulty_->handlesNotReleasedOnce(), 0);
        expectRoundTrip(11);
        EXPECT_EQ(faulty_->misuse, 0);
    }

    // The peer dies with a transfer in flight: that transfer and every later
    // one to it FAIL, nothing more reaches the provider for it, and it is
    // not reconnected while it keeps its incarnation. Once it restarts (a
    // new incarnation, read after the failed transfer), the transport
    // connects again, exactly once, and transfers are byte-exact.
    void checkPeerDeathAndRestart() {
        ASSERT_NO_FATAL_FAILURE(installAndRegister());
        expectRoundTrip(12);
        auto in_flight = submit({to(Request::WRITE, 0)});
        MpcommTransferHandle handle = faulty_->lastHandle();
        faulty_->killPeer(kPeer);
        LogCapture logs;
        EXPECT_EQ(finalStatus(in_flight, 0).s, FAILED);
        EXPECT_EQ(logs.count(transferError("WRITE", peerAddr(0), -106)), 1);
        release(in_flight);
        EXPECT_EQ(faulty_->releasesOf(handle), 1);
        const int posted = faulty_->forwarded_posts;
        for (int round = 0; round < 3; ++round) {
            EXPECT_EQ(runOne(to(Request::WRITE, 0)), FAILED) << round;
            EXPECT_EQ(runOne(to(Request::READ, 0)), FAILED) << round;
        }
        EXPECT_EQ(faulty_->forwarded_posts, posted);
        EXPECT_EQ(faulty_->connect_calls, 1);
        EXPECT_EQ(faulty_->query_calls, 1);

        faulty_->revivePeer(kPeer);
        ASSERT_NO_FATAL_FAILURE(restartPeer(*peer_sm_, "v1:" + peer_endpoint_));
        expectRoundTrip(13);
        EXPECT_EQ(faulty_->connect_calls, 2);
        EXPECT_EQ(faulty_->forwarded_connect, 2);
        EXPECT_EQ(faulty_->handlesNotReleasedOnce(), 0);
        EXPECT_EQ(faulty_->misuse, 0);
    }

    // A dead peer's handshake fails too: after the initiator re-installs
    // (it forgot every peer), connect() to the dead peer fails its request
    // and the peer is not cached; once the peer answers again the next
    // request connects and completes.
    void checkPeerDeathAcrossReinstall() {
        ASSERT_NO_FATAL_FAILURE(installAndRegister());
        expectRoundTrip(14);
        faulty_->killPeer(kPeer);
        ASSERT_TRUE(transport_->uninstall().ok());
        ASSERT_NO_FATAL_FAILURE(installAndRegister());
        LogCapture logs;
        EXPECT_EQ(runOne(to(Request::WRITE, 0)), FAILED);
        EXPECT_EQ(logs.count(segmentError("connect to", -106)), 1);
        EXPECT_FALSE(transport_->peers().contains(kPeer));
        EXPECT_EQ(faulty_->connect_calls, 2);
        EXPECT_EQ(faulty_->forwarded_connect, 1);
        faulty_->revivePeer(kPeer);
        expectRoundTrip(15);
        EXPECT_EQ(faulty_->connect_calls, 3);
        EXPECT_EQ(faulty_->forwarded_connect, 2);
        EXPECT_EQ(faulty_->handlesNotReleasedOnce(), 0);
        EXPECT_EQ(faulty_->misuse, 0);
    }

    std::shared_ptr<FaultyMpcommAdapter> faulty_;
    std::vector<char> peer_mem_;  // the peer's one published buffer
    std::string peer_endpoint_;   // "<addr>:<port>" it advertises
    int local_port_ = 0;
    SegmentID peer_ = 0;
    BufferDesc local_buffer_;
};

}  // namespace mooncake::tent::testing
