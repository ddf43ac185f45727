// RemoteDescMemo: the per-thread descriptors submitTransfer() finds its
// targets in. It must never hand out a descriptor the SegmentManager would
// not: every event that replaces or drops the manager's copy (an
// invalidation, a refresh, a close, the TTL) sends the look-up back to it.
#include "runtime/remote_desc_memo.h"

#include <gtest/gtest.h>

#include <cstdint>
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
    // The memoised descriptor as a submission finds it: the count, then
    // the clock.
    const SegmentDesc* find(RemoteDescMemo& memo, SegmentID id) {
        const uint64_t changes = mgr.remoteChanges();
        const RemoteDescMemo::Entry* entry =
            memo.findEntry(id, SegmentManager::cacheNow(), changes);
        return entry != nullptr ? entry->desc.get() : nullptr;
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
    const RemoteDescMemo::Entry* entry = memo.findEntry(w.a, now, changes);
    ASSERT_NE(entry, nullptr);
    EXPECT_EQ(entry->desc.get(), desc);
    EXPECT_EQ(memo.findEntry(w.a, now + milliseconds(3600 * 1000 + 1), changes),
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

// A routing decision lives with the descriptor it was made for: any event
// that replaces the slot's descriptor drops it, and it answers only the
// exact key (local version, selector generation, hint) it was noted under.
// The decision noted for `handle`'s memoised descriptor under `key`, as a
// submission reads it, or null.
Transport* routeOf(const RemoteDescMemo& memo, SegmentID handle,
                   const RemoteDescMemo::RouteKey& key) {
    const RemoteDescMemo::Entry* entry = memo.entryOf(handle);
    return entry != nullptr ? entry->routeFor(key) : nullptr;
}

TEST(RemoteDescMemoTest, ARouteIsForgottenWithItsDescriptorAndKey) {
    MemoWorld w;
    RemoteDescMemo& memo = RemoteDescMemo::forThread(w.mgr);
    // Never called: only compared.
    Transport* const tcp = reinterpret_cast<Transport*>(uintptr_t{0x1000});
    RemoteDescMemo::RouteKey key;
    key.local_version = 3;
    key.selector_generation = 7;
    key.hint = TCP;
    ASSERT_NE(w.get(memo, w.a), nullptr);
    ASSERT_NE(w.get(memo, w.b), nullptr);
    EXPECT_EQ(routeOf(memo, w.a, key), nullptr) << "nothing noted yet";
    memo.noteRoute(w.a, key, tcp);
    EXPECT_EQ(routeOf(memo, w.a, key), tcp);
    EXPECT_EQ(routeOf(memo, w.b, key), nullptr) << "another target";
    RemoteDescMemo::RouteKey other = key;
    other.hint = SHM;
    EXPECT_EQ(routeOf(memo, w.a, other), nullptr) << "another hint";
    other = key;
    other.local_version = 4;
    EXPECT_EQ(routeOf(memo, w.a, other), nullptr) << "a new local snapshot";
    other = key;
    other.selector_generation = 8;
    EXPECT_EQ(routeOf(memo, w.a, other), nullptr) << "the selector changed";

    // The descriptor invalidated and read again: the decision went with it.
    ASSERT_TRUE(w.mgr.invalidateRemote(w.a).ok());
    EXPECT_EQ(fetchOf(w.get(memo, w.a)), "fetch#3");
    EXPECT_EQ(routeOf(memo, w.a, key), nullptr);

    // So with a descriptor re-read after a miss.
    memo.noteRoute(w.a, key, tcp);
    SegmentDescRef fresh;
    bool refreshed = false;
    ASSERT_TRUE(w.mgr.refreshAfterMiss(fresh, w.a, refreshed).ok());
    ASSERT_TRUE(refreshed);
    memo.replace(w.a, fresh);
    EXPECT_EQ(routeOf(memo, w.a, key), nullptr);

    // No decision for the local segment (not held in a slot), nor under
    // generation 0 (a selector never set up).
    memo.noteRoute(LOCAL_SEGMENT_ID, key, tcp);
    EXPECT_EQ(routeOf(memo, LOCAL_SEGMENT_ID, key), nullptr);
    ASSERT_NE(w.get(memo, w.b), nullptr);
    other = key;
    other.selector_generation = 0;
    memo.noteRoute(w.b, other, tcp);
    EXPECT_EQ(routeOf(memo, w.b, other), nullptr);
}

// local() keeps the manager's snapshot while its version holds, and hands
// out the new one as soon as an update swapped it in.
TEST(RemoteDescMemoTest, TheLocalSnapshotFollowsEveryUpdate) {
    MemoWorld w;
    RemoteDescMemo& memo = RemoteDescMemo::forThread(w.mgr);
    const SegmentDesc* first = &memo.local(w.mgr);
    EXPECT_EQ(first, w.mgr.getLocal().get());
    EXPECT_EQ(&memo.local(w.mgr), first);
    const uint64_t version = memo.localVersion();
    std::thread([&] {
        ASSERT_TRUE(w.mgr
                        .updateLocal([](SegmentDesc& desc) {
                            desc.machine_id = "moved";
                            return Status::OK();
                        })
                        .ok());
    }).join();
    const SegmentDesc& now = memo.local(w.mgr);
    EXPECT_EQ(&now, w.mgr.getLocal().get());
    EXPECT_EQ(now.machine_id, "moved");
    EXPECT_NE(memo.localVersion(), version);
}

}  // namespace
}  // namespace mooncake::tent
