// cancelTransfer() between two processes, over each transport of the
// build: a READ held up by a target that is stopped (SIGSTOP) after its
// request reached it. The cancel returns at once while the READ is held,
// the task reads PENDING (and its batch cannot be freed) until its
// transport lets go of it, then CANCELED, whether the target is continued
// (SIGCONT) or killed; from then on nothing writes the task's buffer (a
// canary pattern, written once the task read final, survives a later
// transfer; the ASan build checks the same of freed memory).
#include <dirent.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "kit/two_process_fixture.h"
#include "kit/wait_until.h"

namespace mooncake::tent::testing {
namespace {

constexpr uint8_t kCanary = 0xA5;

// The sockets of process `pid`: the inodes of its fds, and the TCP ports
// it listens on (/proc/<pid>/net/tcp{,6}).
struct Sockets {
    std::set<std::string> inodes;
    std::set<unsigned> listening;
};

// One row of /proc/net/tcp{,6}: state, local port, receive queue, inode.
struct TcpRow {
    std::string state;
    unsigned port = 0;
    unsigned long rx = 0;
    std::string inode;
};

std::vector<TcpRow> tcpRows(const std::string& proc) {
    std::vector<TcpRow> rows;
    for (const char* table : {"/net/tcp", "/net/tcp6"}) {
        std::ifstream in(proc + table);
        std::string line;
        std::getline(in, line);  // the header
        while (std::getline(in, line)) {
            std::istringstream is(line);
            std::string sl, local, remote, queues, timer, retr, uid, timeout;
            TcpRow row;
            is >> sl >> local >> remote >> row.state >> queues >> timer >>
                retr >> uid >> timeout >> row.inode;
            if (local.find(':') == std::string::npos ||
                queues.find(':') == std::string::npos) {
                continue;
            }
            row.port =
                std::stoul(local.substr(local.find(':') + 1), nullptr, 16);
            row.rx =
                std::stoul(queues.substr(queues.find(':') + 1), nullptr, 16);
            rows.push_back(row);
        }
    }
    return rows;
}

Sockets socketsOf(pid_t pid) {
    Sockets sockets;
    const std::string proc = "/proc/" + std::to_string(pid);
    if (DIR* dir = opendir((proc + "/fd").c_str())) {
        while (dirent* entry = readdir(dir)) {
            char target[64] = {};
            const std::string link = proc + "/fd/" + entry->d_name;
            ssize_t n = readlink(link.c_str(), target, sizeof(target) - 1);
            if (n <= 0) continue;
            std::string text(target, n);
            if (text.rfind("socket:[", 0) == 0) {
                sockets.inodes.insert(text.substr(8, text.size() - 9));
            }
        }
        closedir(dir);
    }
    for (const TcpRow& row : tcpRows(proc)) {
        if (row.state == "0A" && sockets.inodes.count(row.inode) != 0) {
            sockets.listening.insert(row.port);
        }
    }
    return sockets;
}

// Whether a connection of process `pid` (one it holds, or one on a port it
// listens on that it has not accepted yet) holds bytes nobody has read:
// with the process stopped, a request of ours that reached it.
bool unreadBytesAt(pid_t pid) {
    const Sockets sockets = socketsOf(pid);
    for (const TcpRow& row : tcpRows("/proc/" + std::to_string(pid))) {
        if (row.state != "01" || row.rx == 0) continue;  // ESTABLISHED
        if (sockets.inodes.count(row.inode) != 0 ||
            sockets.listening.count(row.port) != 0) {
            return true;
        }
    }
    return false;
}

class CancelPairTest : public TwoProcessTest,
                       public ::testing::WithParamInterface<TransportType> {
 protected:
    // The pair, the initiator refusing at once to free a batch with a task
    // in flight (batch/free_timeout_ms=0).
    void startHeldPair() {
        TargetOptions options;
        options.xport = GetParam();
        ASSERT_NO_FATAL_FAILURE(startTargetWith(options));
        if (IsSkipped()) return;
        auto conf = onlyTransport(xport_);
        conf->set("batch/free_timeout_ms", 0);
        ASSERT_NO_FATAL_FAILURE(startInitiatorWithConfig(conf));
        if (IsSkipped()) return;
        // One transfer first, so that connections are up and the target's
        // listening sockets are all there to be found.
        ASSERT_EQ(run({request(Request::READ, 0, 4096)})[0].s, COMPLETED);
        // Nothing of it is left unread.
        ASSERT_TRUE(
            waitUntil([&] { return !unreadBytesAt(target_process_.pid()); }));
    }

    TransferStatusEnum statusOf(BatchID batch) {
        TransferStatus status;
        EXPECT_TRUE(engine_->getTransferStatus(batch, 0, status).ok());
        return status.s;
    }

    // Stops the target, submits a READ of the first half of its buffer into
    // the canary-filled local buffer, waits until the request reached the
    // stopped target, and cancels it: the call returns at once, the task
    // still PENDING. The batch in `batch`.
    void cancelAHeldRead(BatchID& batch) {
        std::memset(localBytes(), kCanary, kBufferSize);
        ASSERT_TRUE(target_process_.stop());
        batch = engine_->allocateBatch(1);
        ASSERT_NE(batch, 0u);
        ASSERT_TRUE(engine_
                        ->submitTransfer(
                            batch, {request(Request::READ, 0, kBufferSize / 2)})
                        .ok());
        ASSERT_TRUE(
            waitUntil([&] { return unreadBytesAt(target_process_.pid()); }));
        ASSERT_EQ(statusOf(batch), PENDING);
        const auto began = std::chrono::steady_clock::now();
        Status s = engine_->cancelTransfer(batch, 0);
        const long long took_us =
            std::chrono::duration_cast<std::chrono::microseconds>(
                std::chrono::steady_clock::now() - began)
                .count();
        ASSERT_TRUE(s.ok()) << s;
        EXPECT_LT(took_us, 100000)
            << "cancelTransfer took " << took_us << " us";
        std::cout << "cancelTransfer returned in " << took_us << " us\n";
        EXPECT_EQ(statusOf(batch), PENDING);
        Status refused = engine_->freeBatch(batch);
        EXPECT_EQ(refused.message(),
                  "freeBatch: batch " + std::to_string(batch) +
                      " still has 1 task(s) in flight after "
                      "batch/free_timeout_ms=0 ms; it stays allocated, free "
                      "it again once they finish");
        EXPECT_EQ(statusOf(batch), PENDING);
    }

    // Waits for the task to read final; it reads CANCELED, stays so, and
    // the batch frees.
    void expectCanceled(BatchID batch) {
        ASSERT_TRUE(waitUntil([&] { return statusOf(batch) != PENDING; },
                              std::chrono::milliseconds(30000)));
        EXPECT_EQ(statusOf(batch), CANCELED);
        // Final: the buffer is the caller's again. The canary goes in now,
        // and nothing of the cancelled READ may overwrite it.
        std::memset(localBytes(), kCanary, kBufferSize / 2);
        EXPECT_EQ(statusOf(batch), CANCELED);
        EXPECT_TRUE(engine_->freeBatch(batch).ok());
    }

    void expectCanary() {
        for (size_t i = 0; i < kBufferSize / 2; ++i) {
            ASSERT_EQ(localBytes()[i], kCanary) << "byte " << i;
        }
    }
};

TEST_P(CancelPairTest, AHeldReadCancelledReturnsAtOnceAndEndsCanceledOnResume) {
    ASSERT_NO_FATAL_FAILURE(startHeldPair());
    if (IsSkipped()) return;
    BatchID batch = 0;
    ASSERT_NO_FATAL_FAILURE(cancelAHeldRead(batch));
    ASSERT_TRUE(target_process_.resume());
    ASSERT_NO_FATAL_FAILURE(expectCanceled(batch));
    // A later READ over the same transport, into the other half, completes:
    // the cancelled one left nothing behind to write the first half.
    auto states = run({request(Request::READ, kBufferSize / 2, 4096)});
    ASSERT_EQ(states[0].s, COMPLETED);
    EXPECT_EQ(localBytes()[kBufferSize / 2], patternByte(kBufferSize / 2, 7));
    ASSERT_NO_FATAL_FAILURE(expectCanary());
}

TEST_P(CancelPairTest, AHeldReadCancelledEndsCanceledWhenTheTargetDies) {
    ASSERT_NO_FATAL_FAILURE(startHeldPair());
    if (IsSkipped()) return;
    BatchID batch = 0;
    ASSERT_NO_FATAL_FAILURE(cancelAHeldRead(batch));
    killTarget();
    ASSERT_NO_FATAL_FAILURE(expectCanceled(batch));
    ASSERT_NO_FATAL_FAILURE(expectCanary());
}

INSTANTIATE_TEST_SUITE_P(EveryTransport, CancelPairTest,
                         ::testing::ValuesIn(withMpcommIfBuilt({TCP})),
                         transportParamName);

}  // namespace
}  // namespace mooncake::tent::testing
