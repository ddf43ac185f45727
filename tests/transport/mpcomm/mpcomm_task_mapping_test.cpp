// The request/completion mapping as free functions over the mock adapter.
#include "tent/transport/mpcomm/mpcomm_task_mapping.h"

#include <gtest/gtest.h>

#include <thread>

#include "kit/mock_mpcomm_adapter.h"
#include "kit/request_builder.h"

namespace mooncake::tent {
namespace {

using testing::MockMpcommAdapter;

Request makeRequest(Request::OpCode op, void* source, uint64_t remote,
                    size_t length) {
    return testing::makeRequest(op, source, 7, remote, length);
}

// The adapter was handed exactly one transfer, carrying these fields.
void expectOnlyTransfer(MockMpcommAdapter& adapter, bool is_put,
                        const void* local, const std::string& host_id,
                        uintptr_t remote, size_t length) {
    auto t = adapter.transfers();
    ASSERT_EQ(t.size(), 1u);
    EXPECT_EQ(t[0].is_put, is_put);
    EXPECT_EQ(t[0].local_addr, reinterpret_cast<uintptr_t>(local));
    EXPECT_EQ(t[0].host_id, host_id);
    EXPECT_EQ(t[0].remote_addr, remote);
    EXPECT_EQ(t[0].length, length);
}

void startTask(MpcommTask& task, const Request& r, MpcommTransferHandle h) {
    task.request = r;
    task.mpcomm_handle = h;
    task.status_word = PENDING;
}

// Issues `op` of `length` bytes through `adapter`, which completes nothing
// until the test says so, and starts `task` on it; the handle.
MpcommTransferHandle startHeldTask(MockMpcommAdapter& adapter, MpcommTask& task,
                                   Request::OpCode op, size_t length) {
    adapter.auto_complete = false;
    Request r = makeRequest(op, nullptr, 0x1000, length);
    MpcommTransferHandle h = issueMpcommTransfer(adapter, r, "p");
    startTask(task, r, h);
    return h;
}

TEST(MpcommTaskMapping, WriteIsAPutWithTheRequestsAddressesAndLength) {
    MockMpcommAdapter adapter;
    char buf[64];
    auto h = issueMpcommTransfer(
        adapter, makeRequest(Request::WRITE, buf, 0xA000, 64), "peer:1");
    EXPECT_NE(h, kInvalidMpcommTransferHandle);
    EXPECT_EQ(adapter.put_calls, 1);
    EXPECT_EQ(adapter.get_calls, 0);
    expectOnlyTransfer(adapter, /*is_put=*/true, buf, "peer:1", 0xA000, 64);
}

TEST(MpcommTaskMapping, ReadIsAGetWithTheRequestsAddressesAndLength) {
    MockMpcommAdapter adapter;
    char buf[32];
    issueMpcommTransfer(adapter, makeRequest(Request::READ, buf, 0xB000, 32),
                        "peer:2");
    EXPECT_EQ(adapter.get_calls, 1);
    EXPECT_EQ(adapter.put_calls, 0);
    expectOnlyTransfer(adapter, /*is_put=*/false, buf, "peer:2", 0xB000, 32);
}

TEST(MpcommTaskMapping, ARefusedTransferYieldsTheInvalidHandle) {
    MockMpcommAdapter adapter;
    adapter.issue_failures = 1;
    EXPECT_EQ(issueMpcommTransfer(
                  adapter, makeRequest(Request::READ, nullptr, 0, 8), "peer:1"),
              kInvalidMpcommTransferHandle);
}

TEST(MpcommTaskMapping, CompletionIsPolledLazilyAndReleasedOnce) {
    MockMpcommAdapter adapter;
    adapter.auto_complete = false;
    Request r = makeRequest(Request::WRITE, nullptr, 0x1000, 100);
    MpcommTask task;
    EXPECT_EQ(task.status_word.load(), INITIAL);
    auto h = issueMpcommTransfer(adapter, r, "p");
    startTask(task, r, h);
    EXPECT_EQ(adapter.is_complete_calls, 0) << "nothing polls on its own";

    pollMpcommTask(adapter, task);
    EXPECT_EQ(task.status_word.load(), PENDING);
    EXPECT_EQ(adapter.release_calls, 0);

    adapter.complete(h, true, 100);
    pollMpcommTask(adapter, task);
    EXPECT_EQ(task.status_word.load(), COMPLETED);
    EXPECT_EQ(task.transferred_bytes.load(), 100u);
    EXPECT_EQ(task.mpcomm_handle.load(), kInvalidMpcommTransferHandle);
    EXPECT_EQ(adapter.releasesOf(h), 1);

    // Further polls of a finished task do not touch the adapter.
    int calls = adapter.is_complete_calls;
    pollMpcommTask(adapter, task);
    EXPECT_EQ(adapter.is_complete_calls, calls);
    EXPECT_EQ(adapter.release_calls, 1);
    EXPECT_EQ(adapter.misuse, 0);
}

TEST(MpcommTaskMapping, AShortSuccessIsFailed) {
    MockMpcommAdapter adapter;
    MpcommTask task;
    auto h = startHeldTask(adapter, task, Request::READ, 4096);
    adapter.complete(h, true, 4000);
    pollMpcommTask(adapter, task);
    EXPECT_EQ(task.status_word.load(), FAILED);
    EXPECT_EQ(task.transferred_bytes.load(), 4000u);
    EXPECT_EQ(adapter.releasesOf(h), 1);
}

TEST(MpcommTaskMapping, AProviderErrorIsFailed) {
    MockMpcommAdapter adapter;
    MpcommTask task;
    auto h = startHeldTask(adapter, task, Request::WRITE, 64);
    adapter.complete(h, false, 0, -7);
    pollMpcommTask(adapter, task);
    EXPECT_EQ(task.status_word.load(), FAILED);
    EXPECT_EQ(task.transferred_bytes.load(), 0u);
    EXPECT_EQ(adapter.releasesOf(h), 1);
}

// While one poller is inside isTransferComplete() a second one polls the
// same task: it must not reach the adapter with that handle at all (it could
// otherwise ask about a handle the first has just released), and the
// handle is released exactly once.
TEST(MpcommTaskMapping, TwoThreadsPollingOneTaskReleaseItsHandleOnce) {
    MockMpcommAdapter adapter;
    Request r = makeRequest(Request::WRITE, nullptr, 0x1000, 64);
    constexpr int kRounds = 50;
    for (int round = 0; round < kRounds; ++round) {
        MpcommTask task;
        auto h = issueMpcommTransfer(adapter, r, "p");
        startTask(task, r, h);
        int calls_by_second = -1;
        bool nested = false;
        adapter.on_is_complete = [&](MpcommTransferHandle) {
            if (nested) return;
            nested = true;
            int before = adapter.is_complete_calls + adapter.result_calls +
                         adapter.release_calls;
            std::thread second([&] { pollMpcommTask(adapter, task); });
            second.join();
            calls_by_second = adapter.is_complete_calls + adapter.result_calls +
                              adapter.release_calls - before;
            EXPECT_EQ(task.status_word.load(), PENDING);
        };
        std::thread first([&] { pollMpcommTask(adapter, task); });
        first.join();
        ASSERT_EQ(calls_by_second, 0) << "round " << round;
        ASSERT_EQ(task.status_word.load(), COMPLETED);
        ASSERT_EQ(adapter.releasesOf(h), 1) << "round " << round;
    }
    EXPECT_EQ(adapter.result_calls, kRounds);
    EXPECT_EQ(adapter.release_calls, kRounds);
    EXPECT_EQ(adapter.misuse, 0);
}

TEST(MpcommTaskMapping, AnIncompleteTransferKeepsItsHandleForTheNextPoll) {
    MockMpcommAdapter adapter;
    MpcommTask task;
    auto h = startHeldTask(adapter, task, Request::READ, 64);
    pollMpcommTask(adapter, task);
    pollMpcommTask(adapter, task);
    EXPECT_EQ(task.mpcomm_handle.load(), h);
    EXPECT_EQ(task.status_word.load(), PENDING);
    EXPECT_EQ(adapter.is_complete_calls, 2);
    EXPECT_EQ(adapter.release_calls, 0);
}

TEST(MpcommTaskMapping, AnAbandonedTaskFailsWithoutTouchingTheAdapter) {
    MockMpcommAdapter adapter;
    MpcommTask task;
    startHeldTask(adapter, task, Request::WRITE, 64);
    abandonMpcommTask(task);
    EXPECT_EQ(task.status_word.load(), FAILED);
    EXPECT_EQ(task.mpcomm_handle.load(), kInvalidMpcommTransferHandle);
    EXPECT_EQ(adapter.is_complete_calls, 0);
    EXPECT_EQ(adapter.release_calls, 0);
    // A finished task keeps its verdict.
    MpcommTask done;
    done.status_word = COMPLETED;
    abandonMpcommTask(done);
    EXPECT_EQ(done.status_word.load(), COMPLETED);
}

}  // namespace
}  // namespace mooncake::tent
