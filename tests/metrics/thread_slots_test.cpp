// Per-thread blocks: a scrape sums every live block and the retired total,
// a thread's exit folds its block so sums never go down, and a set
// destroyed before its threads exit (or a thread recording from a
// thread_local destructor) touches no freed memory (the ASan and TSan
// builds run these).
#include "metrics/thread_slots.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "kit/wait_until.h"

namespace mooncake {
namespace tent {
namespace metrics {
namespace {

using testing::BoundedThread;
using testing::waitUntil;

// Threads that record and then hold until released, so their blocks stay
// live while the test looks.
class HeldWriters {
 public:
    HeldWriters(ThreadSlots& set, int n, uint64_t each) {
        for (int i = 0; i < n; ++i)
            threads_.push_back(std::make_unique<BoundedThread>(
                "writer", [this, &set, i, each] {
                    set.local().add(0, each * (i + 1));
                    set.local().add(1, 1);
                    ready_.fetch_add(1);
                    waitUntil([this] { return release_.load(); });
                }));
        EXPECT_TRUE(waitUntil([&] { return ready_.load() == n; }));
    }
    void release() {
        release_.store(true);
        for (auto& t : threads_) t->join();
    }
    ~HeldWriters() { release(); }

 private:
    std::atomic<int> ready_{0};
    std::atomic<bool> release_{false};
    std::vector<std::unique_ptr<BoundedThread>> threads_;
};

TEST(ThreadSlotsTest, AScrapeSumsEveryLiveBlock) {
    ThreadSlots set(3);
    set.local().add(0, 1000);
    HeldWriters writers(set, 5, 10);
    EXPECT_EQ(set.liveBlocks(), 6u);
    const std::vector<uint64_t> sum = set.sum();
    // 1000 + 10 * (1 + 2 + 3 + 4 + 5)
    EXPECT_EQ(sum, (std::vector<uint64_t>{1150, 5, 0}));
    uint64_t range[2] = {7, 7};
    set.sumRange(1, 2, range);
    EXPECT_EQ(range[0], 5u);
    EXPECT_EQ(range[1], 0u);
}

TEST(ThreadSlotsTest, AnExitedThreadsCountsStayInTheSum) {
    ThreadSlots set(2);
    for (int t = 1; t <= 20; ++t) {
        BoundedThread("writer", [&] {
            for (int k = 0; k < 100; ++k) set.local().add(1, 3);
        }).join();
        ASSERT_EQ(set.sum()[1], 300u * t);
        // The exit folded the block away: nothing is kept per dead thread.
        ASSERT_EQ(set.liveBlocks(), 0u);
    }
}

TEST(ThreadSlotsTest, SumsNeverGoDownWhileThreadsComeAndGo) {
    ThreadSlots set(4);
    constexpr int kThreads = 16, kAdds = 2000;
    std::atomic<int> done{0};
    BoundedThread spawner("spawner", [&] {
        for (int i = 0; i < kThreads; ++i) {
            BoundedThread("writer", [&] {
                for (int k = 0; k < kAdds; ++k) set.local().add(2, 1);
            }).join();
            done.fetch_add(1);
        }
    });
    uint64_t last = 0;
    while (done.load() < kThreads) {
        const uint64_t now = set.sum()[2];
        ASSERT_GE(now, last);
        last = now;
    }
    spawner.join();
    EXPECT_EQ(set.sum()[2], uint64_t{kThreads} * kAdds);
}

TEST(ThreadSlotsTest, ASetDestroyedBeforeItsThreadsExitIsLeftSafely) {
    auto first = std::make_unique<ThreadSlots>(2);
    std::atomic<int> stage{0};
    uint64_t second_sum = 0;
    BoundedThread writer("writer", [&] {
        first->local().add(0, 5);
        stage.store(1);
        waitUntil([&] { return stage.load() == 2; });
        // The first set is gone; this thread's block of it is dropped on
        // its first use of another set, and this one counts normally.
        ThreadSlots second(2);
        second.local().add(1, 7);
        second_sum = second.sum()[1];
    });
    ASSERT_TRUE(waitUntil([&] { return stage.load() == 1; }));
    EXPECT_EQ(first->sum()[0], 5u);
    first.reset();
    stage.store(2);
    writer.join();
    EXPECT_EQ(second_sum, 7u);
}

TEST(ThreadSlotsTest, OneThreadKeepsSeparateBlocksPerSet) {
    ThreadSlots a(1), b(1);
    for (int k = 0; k < 10; ++k) {
        a.local().add(0, 1);
        b.local().add(0, 100);
    }
    EXPECT_EQ(a.sum()[0], 10u);
    EXPECT_EQ(b.sum()[0], 1000u);
    // A set made at a freed set's address is a new set, not the old one's
    // block.
    auto gone = std::make_unique<ThreadSlots>(1);
    gone->local().add(0, 9);
    gone.reset();
    ThreadSlots fresh(1);
    EXPECT_EQ(fresh.sum()[0], 0u);
    fresh.local().add(0, 1);
    EXPECT_EQ(fresh.sum()[0], 1u);
}

// A record from a thread_local destroyed after the thread's blocks were
// folded still counts, in a block the set keeps.
ThreadSlots* g_late_set = nullptr;
struct LateRecorder {
    ~LateRecorder() { g_late_set->local().add(0, 5); }
};
thread_local LateRecorder tls_late;

TEST(ThreadSlotsTest, ARecordFromAThreadExitDestructorCounts) {
    ThreadSlots set(1);
    g_late_set = &set;
    BoundedThread("writer", [&] {
        // Made before the thread's first record, so destroyed after its
        // blocks were folded.
        (void)&tls_late;
        set.local().add(0, 1);
    }).join();
    EXPECT_EQ(set.sum()[0], 6u);
    EXPECT_EQ(set.liveBlocks(), 1u);
}

// Events: the fold adds v[0] to slot `tag`, counts the events it folded
// and those folded on a thread that marked itself the writer.
std::atomic<uint64_t> g_folded{0};
std::atomic<uint64_t> g_folded_by_writer{0};
thread_local bool tls_is_writer = false;

void foldEvent(const ThreadSlots::Event& e, uint64_t* slots) {
    slots[e.tag] += e.v[0];
    g_folded.fetch_add(1);
    if (tls_is_writer) g_folded_by_writer.fetch_add(1);
}

ThreadSlots::Event event(uint64_t value, uint32_t slot) {
    return ThreadSlots::Event{{value, 0, 0, 0}, slot, 0};
}

class ThreadSlotsEventsTest : public ::testing::Test {
 protected:
    void SetUp() override {
        g_folded = 0;
        g_folded_by_writer = 0;
    }
};

TEST_F(ThreadSlotsEventsTest, ASumIncludesEveryEventPushedBeforeIt) {
    ThreadSlots set(2, &foldEvent);
    set.local().push(event(5, 0));
    set.local().push(event(7, 1));
    set.local().add(1, 1);
    // Below the wake mark: nothing has folded them yet.
    EXPECT_EQ(g_folded.load(), 0u);
    EXPECT_EQ(set.sum(), (std::vector<uint64_t>{5, 8}));
    EXPECT_EQ(g_folded.load(), 2u);
    // Each event is folded once.
    EXPECT_EQ(set.sum(), (std::vector<uint64_t>{5, 8}));
    uint64_t one = 0;
    set.local().push(event(3, 0));
    set.sumRange(0, 1, &one);
    EXPECT_EQ(one, 8u);
    EXPECT_EQ(set.drainPasses(), 0u);
}

TEST_F(ThreadSlotsEventsTest, ARingFilledToTheMarkWakesTheDrainThread) {
    ThreadSlots set(1, &foldEvent);
    tls_is_writer = true;
    for (uint64_t i = 0; i <= ThreadSlots::kWakeAt; ++i)
        set.local().push(event(1, 0));
    // Folded off this thread, with no sum asked for.
    EXPECT_TRUE(waitUntil([&] {
        return set.drainPasses() >= 1 &&
               g_folded.load() >= ThreadSlots::kWakeAt;
    }));
    EXPECT_EQ(g_folded_by_writer.load(), 0u);
    EXPECT_EQ(set.fullRings(), 0u);
    tls_is_writer = false;
    EXPECT_EQ(set.sum()[0], ThreadSlots::kWakeAt + 1);
}

TEST_F(ThreadSlotsEventsTest, AWriterDrainsItsFullRingItselfAndLosesNothing) {
    // No drain thread: each time the ring fills, its writer must fold it.
    ThreadSlots set(1, &foldEvent, /*drain_thread=*/false);
    constexpr uint64_t kEvents = ThreadSlots::kRingEvents * 3;
    BoundedThread("writer", [&] {
        tls_is_writer = true;
        for (uint64_t i = 0; i < kEvents; ++i) set.local().push(event(1, 0));
        tls_is_writer = false;
    }).join(std::chrono::seconds(30));
    EXPECT_EQ(set.fullRings(), 3u);
    EXPECT_EQ(g_folded_by_writer.load(), kEvents);
    EXPECT_EQ(set.drainPasses(), 0u);
    EXPECT_EQ(set.sum()[0], kEvents);
    EXPECT_EQ(g_folded.load(), kEvents);
}

TEST_F(ThreadSlotsEventsTest, AnExitingThreadsEventsStayInTheSum) {
    ThreadSlots set(1, &foldEvent);
    for (int t = 1; t <= 5; ++t) {
        BoundedThread("writer", [&] {
            for (int k = 0; k < 10; ++k) set.local().push(event(2, 0));
        }).join();
        EXPECT_EQ(set.liveBlocks(), 0u);
        EXPECT_EQ(set.sum()[0], 20u * t);
    }
}

// Sums taken while writers push and exit never go down and the last one
// is exact (the TSan build checks the ring's hand-over).
TEST_F(ThreadSlotsEventsTest, SumsDuringPushesAreMonotoneAndExact) {
    ThreadSlots set(2, &foldEvent);
    constexpr int kThreads = 4;
    constexpr uint64_t kPushes = ThreadSlots::kRingEvents * 2 + 7;
    std::atomic<int> running{kThreads};
    std::vector<std::unique_ptr<BoundedThread>> writers;
    for (int i = 0; i < kThreads; ++i)
        writers.push_back(std::make_unique<BoundedThread>("writer", [&] {
            for (uint64_t k = 0; k < kPushes; ++k) {
                set.local().push(event(1, 0));
                set.local().add(1, 1);
            }
            running.fetch_sub(1);
        }));
    uint64_t last = 0;
    while (running.load() > 0) {
        const uint64_t now = set.sum()[0];
        ASSERT_GE(now, last);
        last = now;
    }
    for (auto& w : writers) w->join(std::chrono::seconds(60));
    EXPECT_EQ(set.sum(),
              (std::vector<uint64_t>{kThreads * kPushes, kThreads * kPushes}));
}

// A set destroyed with events still in a live thread's ring: the thread
// drops its block on its next first use of another set, touching no freed
// memory.
TEST_F(ThreadSlotsEventsTest, ASetDestroyedWithEventsPendingIsLeftSafely) {
    auto first = std::make_unique<ThreadSlots>(1, &foldEvent);
    std::atomic<int> stage{0};
    BoundedThread writer("writer", [&] {
        for (uint64_t i = 0; i < ThreadSlots::kWakeAt + 5; ++i)
            first->local().push(event(1, 0));
        stage.store(1);
        waitUntil([&] { return stage.load() == 2; });
        ThreadSlots second(1, &foldEvent);
        second.local().push(event(4, 0));
        EXPECT_EQ(second.sum()[0], 4u);
    });
    ASSERT_TRUE(waitUntil([&] { return stage.load() == 1; }));
    first.reset();
    stage.store(2);
    writer.join();
}

}  // namespace
}  // namespace metrics
}  // namespace tent
}  // namespace mooncake
