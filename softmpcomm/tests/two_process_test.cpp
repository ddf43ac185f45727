// Two processes: a forked child is the target, the parent the initiator.
// The child reports through pipes; every wait on it is bounded.
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include "mpcomm.h"
#include "test_util.h"

namespace {

using namespace mpcomm;
using mpcomm_test::finish;
using mpcomm_test::initOnFreePort;
using mpcomm_test::pattern;
using mpcomm_test::readWithDeadline;
using mpcomm_test::ScopedEnv;

constexpr size_t kHalf = 1u << 20;

// The target: publishes [pattern(3) | zeros], announces its port, then on
// 'V' checks that the second half holds pattern(5) and answers '1' or '0'.
[[noreturn]] void runTarget(int to_parent, int from_parent) {
    std::vector<uint8_t> buffer(2 * kHalf, 0);
    auto head = pattern(kHalf, 3);
    std::memcpy(buffer.data(), head.data(), kHalf);
    int port = -1;
    {
        MPComm target;
        port = initOnFreePort(target, "child", "r0,r1");
        if (port <= 0 || target.startAcceptThread() != MPCOMM_SUCCESS ||
            target.registerMemory(buffer.data(), buffer.size()) !=
                MPCOMM_SUCCESS ||
            target.publishBuffer(buffer.data(), buffer.size(), 0) !=
                MPCOMM_SUCCESS)
            port = -1;
        if (::write(to_parent, &port, sizeof(port)) != sizeof(port) || port < 0)
            _exit(2);
        char command = 0;
        while (::read(from_parent, &command, 1) == 1) {
            if (command != 'V') continue;
            // The put's placement is ordered before this read by the parent
            // (ack -> 'V'), which ThreadSanitizer cannot follow across
            // processes. Unpublishing an address never published takes the
            // buffer table's write lock, which orders every placement so far
            // before us in a way it can see.
            static char never_published;
            target.unpublishBuffer(&never_published);
            auto expected = pattern(kHalf, 5);
            char verdict =
                std::memcmp(buffer.data() + kHalf, expected.data(), kHalf) == 0
                    ? '1'
                    : '0';
            if (::write(to_parent, &verdict, 1) != 1) _exit(3);
        }
    }
    _exit(0);
}

TEST(SoftMpcommTwoProcess, GetPutAcrossProcessesThenTargetDies) {
    // Inherited by the child too: both sides slice at 128 KiB.
    ScopedEnv slice("MPCOMM_MAX_RDMA_TRANSFER_SIZE", "131072");
    ScopedEnv qps("MPCOMM_QPS_PER_CONNECTION", "2");
    int up[2], down[2];
    ASSERT_EQ(::pipe(up), 0);
    ASSERT_EQ(::pipe(down), 0);
    pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        ::close(up[0]);
        ::close(down[1]);
        runTarget(up[1], down[0]);
    }
    ::close(up[1]);
    ::close(down[0]);

    int port = -1;
    ASSERT_TRUE(readWithDeadline(up[0], &port, sizeof(port), 30000));
    ASSERT_GT(port, 0);

    MPComm initiator;
    ASSERT_GT(initOnFreePort(initiator, "parent", "r0"), 0);
    ASSERT_EQ(initiator.connect("child", "127.0.0.1", port), MPCOMM_SUCCESS);
    RemoteBufferInfo info;
    ASSERT_EQ(initiator.queryRemoteBuffer("child", "127.0.0.1", port, info),
              MPCOMM_SUCCESS);
    ASSERT_EQ(info.entries.size(), 1u);
    ASSERT_EQ(info.entries[0].length, 2 * kHalf);
    ASSERT_EQ(info.entries[0].rkeys.size(), 2u);
    const uint64_t remote = info.entries[0].addr;

    std::vector<uint8_t> sink(kHalf, 0);
    auto source = pattern(kHalf, 5);
    ASSERT_EQ(initiator.registerMemory(sink.data(), sink.size()),
              MPCOMM_SUCCESS);
    ASSERT_EQ(initiator.registerMemory(source.data(), source.size()),
              MPCOMM_SUCCESS);
    auto sink_addr = reinterpret_cast<uintptr_t>(sink.data());
    auto source_addr = reinterpret_cast<uintptr_t>(source.data());

    TransferResult read = finish(
        initiator, initiator.getAsync(sink_addr, "child", remote, kHalf));
    EXPECT_EQ(read.error_code, MPCOMM_SUCCESS);
    EXPECT_EQ(read.bytes_transferred, kHalf);
    EXPECT_EQ(sink, pattern(kHalf, 3));

    TransferResult wrote =
        finish(initiator,
               initiator.putAsync(source_addr, "child", remote + kHalf, kHalf));
    EXPECT_EQ(wrote.error_code, MPCOMM_SUCCESS);
    EXPECT_EQ(wrote.bytes_transferred, kHalf);
    char verdict = 0;
    ASSERT_EQ(::write(down[1], "V", 1), 1);
    ASSERT_TRUE(readWithDeadline(up[0], &verdict, 1, 30000));
    EXPECT_EQ(verdict, '1');

    // Reads in flight while the target is killed: each completes, none hangs.
    std::vector<TransferHandle> inflight;
    for (int i = 0; i < 8; ++i)
        inflight.push_back(
            initiator.getAsync(sink_addr, "child", remote, kHalf / 8));
    ASSERT_EQ(::kill(child, SIGKILL), 0);
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    EXPECT_TRUE(WIFSIGNALED(status));
    for (TransferHandle h : inflight) {
        int code = finish(initiator, h).error_code;
        EXPECT_TRUE(code == MPCOMM_SUCCESS ||
                    code == MPCOMM_ERR_CONNECTION_LOST)
            << code;
    }

    // A few transfers may still be posted into socket buffers before the
    // reset arrives; all of them must fail and every one must complete.
    TransferResult dead =
        finish(initiator,
               initiator.putAsync(source_addr, "child", remote + kHalf, kHalf));
    EXPECT_EQ(dead.error_code, MPCOMM_ERR_CONNECTION_LOST);
    TransferResult dead_get = finish(
        initiator, initiator.getAsync(sink_addr, "child", remote, kHalf));
    EXPECT_EQ(dead_get.error_code, MPCOMM_ERR_CONNECTION_LOST);
    EXPECT_EQ(initiator.connect("child", "127.0.0.1", port),
              MPCOMM_ERR_CONNECT);
    ::close(up[0]);
    ::close(down[1]);
}

}  // namespace
