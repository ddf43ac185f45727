// RemoteDescMemo: the per-thread descriptors submitTransfer() finds its
// targets in. It must never hand out a descriptor the SegmentManager would
// not: every event that replaces or drops the manager's copy (an
// invalidation, a refresh, a close, the TTL) sends the look-up back to it.
#include "runtime/remote_desc_memo.h"

#include <gtest/gtest.h>

#include <thread>

#include "kit/descriptor_fetcher.h"

namespace mooncake::tent {
namespace {

using std::chrono::milliseconds;
using testing::DescriptorFetcher;

std::string fetchOf(const SegmentDesc* desc) {
    return desc == nullptr ? "null" : desc->getMemory().transport_attrs.at(TCP);
}

struct MemoWorld {
    std::shared_ptr<DescriptorFetcher> fetcher =
        DescriptorFetcher::numberedFetches();
    SegmentManager mgr;
    SegmentID a = 0;
    SegmentID b = 0;
    explicit MemoWorld(milliseconds ttl = milliseconds(3600 * 1000))
        : mgr("local", fetcher, ttl) {
        EXPECT_TRUE(mgr.openRemote(a, "peer:1").ok());
        EXPECT_TRUE(mgr.openRemote(b, "peer:2").ok());
    }
    // find() as a submission calls it: the count, then the clock.
    const SegmentDesc* find(RemoteDescMemo& memo, SegmentID id) {
        const uint64_t changes = mgr.remoteChanges();
        return memo.find(id, SegmentManager::cacheNow(), changes);
    }
    const SegmentDesc* get(RemoteDescMemo& memo, SegmentID id) {
        const SegmentDesc* desc = nullptr;
        EXPECT_TRUE(memo.get(mgr, id, SegmentManager::cacheNow(), desc).ok());
        return desc;
    }
};

TEST(RemoteDescMemoTest, AHitIsTheManagersCopyUntilAnInvalidation) {
    MemoWorld w;
    RemoteDescMemo& memo = RemoteDescMemo::forThread(w.mgr);
    EXPECT_EQ(w.find(memo, w.a), nullptr) << "nothing memoised yet";
    const SegmentDesc* first = w.get(memo, w.a);
    EXPECT_EQ(fetchOf(first), "fetch#1");
    EXPECT_EQ(w.find(memo, w.a), first);
    EXPECT_EQ(w.find(memo, w.b), nullptr);
    EXPECT_EQ(fetchOf(w.get(memo, w.b)), "fetch#2");
    EXPECT_EQ(w.fetcher->calls(), 2);

    // Invalidated from another thread (a watch event): the memo's copy of
    // a is stale, and so, by the shared count, is b's lease.
    std::thread([&] { ASSERT_TRUE(w.mgr.invalidateRemote(w.a).ok()); }).join();
    EXPECT_EQ(w.find(memo, w.a), nullptr);
    EXPECT_EQ(w.find(memo, w.b), nullptr);
    EXPECT_EQ(fetchOf(w.get(memo, w.a)), "fetch#3");
    EXPECT_EQ(fetchOf(w.get(memo, w.b)), "fetch#2") << "b's copy stood";
    EXPECT_EQ(fetchOf(w.find(memo, w.a)), "fetch#3");

    // A refresh (getSegmentInfo) replaces the manager's copy: so the memo's.
    SegmentDescRef fresh;
    ASSERT_TRUE(w.mgr.getRemote(fresh, w.a).ok());
    EXPECT_EQ(w.find(memo, w.a), nullptr);
    EXPECT_EQ(w.get(memo, w.a), fresh.get());
    EXPECT_EQ(w.find(memo, w.a), fresh.get());
}

TEST(RemoteDescMemoTest, AClosedSegmentIsNeverHandedOut) {
    MemoWorld w;
    RemoteDescMemo& memo = RemoteDescMemo::forThread(w.mgr);
    ASSERT_NE(w.get(memo, w.a), nullptr);
    ASSERT_TRUE(w.mgr.closeRemote(w.a).ok());
    EXPECT_EQ(w.find(memo, w.a), nullptr);
    const SegmentDesc* desc = nullptr;
    Status s = memo.get(w.mgr, w.a, SegmentManager::cacheNow(), desc);
    EXPECT_FALSE(s.ok());
    EXPECT_EQ(desc, nullptr);
    EXPECT_EQ(w.find(memo, w.a), nullptr);
}

TEST(RemoteDescMemoTest, TheTtlBoundsAHit) {
    MemoWorld w(milliseconds(0));  // opening a and b fetched #1 and #2
    RemoteDescMemo& memo = RemoteDescMemo::forThread(w.mgr);
    EXPECT_EQ(fetchOf(w.get(memo, w.a)), "fetch#3");
    EXPECT_EQ(w.find(memo, w.a), nullptr) << "expired as it was read";
    EXPECT_EQ(fetchOf(w.get(memo, w.a)), "fetch#4");

    w.mgr.setCacheTtl(milliseconds(3600 * 1000));
    const SegmentDesc* desc = w.get(memo, w.a);
    EXPECT_EQ(fetchOf(desc), "fetch#5");
    const uint64_t changes = w.mgr.remoteChanges();
    const auto now = SegmentManager::cacheNow();
    EXPECT_EQ(memo.find(w.a, now, changes), desc);
    EXPECT_EQ(memo.find(w.a, now + milliseconds(3600 * 1000 + 1), changes),
              nullptr);
}

TEST(RemoteDescMemoTest, AReplacedDescriptorIsReReadNextTime) {
    MemoWorld w;
    RemoteDescMemo& memo = RemoteDescMemo::forThread(w.mgr);
    ASSERT_NE(w.get(memo, w.a), nullptr);
    // What submitTransfer does with a descriptor re-read after a miss.
    SegmentDescRef fresh;
    bool refreshed = false;
    ASSERT_TRUE(w.mgr.refreshAfterMiss(fresh, w.a, refreshed).ok());
    ASSERT_TRUE(refreshed);
    memo.replace(w.a, fresh);
    EXPECT_EQ(w.find(memo, w.a), nullptr);
    EXPECT_EQ(w.get(memo, w.a), fresh.get());
}

TEST(RemoteDescMemoTest, ManagersAndThreadsDoNotShareAMemo) {
    MemoWorld one;
    MemoWorld two;  // the same ids name other segments here
    ASSERT_EQ(one.a, two.a);
    RemoteDescMemo& memo = RemoteDescMemo::forThread(one.mgr);
    const SegmentDesc* mine = one.get(memo, one.a);
    ASSERT_NE(mine, nullptr);
    RemoteDescMemo& other = RemoteDescMemo::forThread(two.mgr);
    EXPECT_EQ(two.find(other, two.a), nullptr);
    EXPECT_NE(two.get(other, two.a), mine);
    // Back to the first manager: emptied, so asked again (a hit there).
    RemoteDescMemo& again = RemoteDescMemo::forThread(one.mgr);
    EXPECT_EQ(one.find(again, one.a), nullptr);
    EXPECT_EQ(one.get(again, one.a), mine);

    std::thread([&] {
        RemoteDescMemo& theirs = RemoteDescMemo::forThread(one.mgr);
        EXPECT_EQ(one.find(theirs, one.a), nullptr);
    }).join();
}

TEST(RemoteDescMemoTest, IdsPastTheSlotsAndTheLocalSegmentAreAskedEachTime) {
    MemoWorld w;
    RemoteDescMemo& memo = RemoteDescMemo::forThread(w.mgr);
    EXPECT_EQ(w.get(memo, LOCAL_SEGMENT_ID), w.mgr.getLocal().get());
    EXPECT_EQ(w.find(memo, LOCAL_SEGMENT_ID), nullptr);
    const SegmentDesc* desc = nullptr;
    Status s = memo.get(w.mgr, RemoteDescMemo::kMaxSlots,
                        SegmentManager::cacheNow(), desc);
    EXPECT_FALSE(s.ok()) << "no such segment";
    EXPECT_EQ(w.find(memo, RemoteDescMemo::kMaxSlots), nullptr);
}

}  // namespace
}  // namespace mooncake::tent
