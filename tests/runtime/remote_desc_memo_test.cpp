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
// exact key (local version, selector generation, change count, hint) it
// was noted under.
struct RouteWorld : MemoWorld {
    RemoteDescMemo& memo = RemoteDescMemo::forThread(mgr);
    SegmentManager::CacheClock::time_point now = SegmentManager::cacheNow();
    // Never called: only compared.
    Transport* const tcp = reinterpret_cast<Transport*>(uintptr_t{0x1000});
    // A submission's key for `hint`, under local version 3 and selector
    // generation 7 unless told, and the manager's change count now.
    uint64_t key(TransportType hint, uint64_t local_version = 3,
                 uint64_t generation = 7) {
        return keyAt(now, hint, local_version, generation);
    }
    // The same for a submission made at `at`.
    uint64_t keyAt(SegmentManager::CacheClock::time_point at,
                   TransportType hint, uint64_t local_version = 3,
                   uint64_t generation = 7) {
        return RemoteDescMemo::routeKey(
            memo.routeBase(local_version, generation, mgr.remoteChanges(), at),
            hint);
    }
    void note(SegmentID handle, uint64_t route_key) {
        memo.noteRoute(handle, route_key, tcp, now, mgr.remoteChanges());
    }
    // The decision for `handle` under `route_key`, as a submission finds it
    // on a target change (findRouted()) and on a hint change (routeFor()
    // of the entry findEntry() gave); the two must agree.
    Transport* routeOf(SegmentID handle, uint64_t route_key) {
        const RemoteDescMemo::Entry* routed =
            memo.findRouted(handle, route_key);
        const RemoteDescMemo::Entry* entry =
            memo.findEntry(handle, now, mgr.remoteChanges());
        Transport* found =
            entry != nullptr ? entry->routeFor(route_key) : nullptr;
        EXPECT_EQ(routed != nullptr ? routed->route : nullptr, found);
        EXPECT_TRUE(routed == nullptr || routed == entry);
        return found;
    }
};

TEST(RemoteDescMemoTest, ARouteIsForgottenWithItsDescriptorAndKey) {
    RouteWorld w;
    ASSERT_NE(w.get(w.memo, w.a), nullptr);
    ASSERT_NE(w.get(w.memo, w.b), nullptr);
    EXPECT_EQ(w.routeOf(w.a, w.key(TCP)), nullptr) << "nothing noted yet";
    w.note(w.a, w.key(TCP));
    EXPECT_EQ(w.routeOf(w.a, w.key(TCP)), w.tcp);
    EXPECT_EQ(w.routeOf(w.b, w.key(TCP)), nullptr) << "another target";
    EXPECT_EQ(w.routeOf(w.a, w.key(SHM)), nullptr) << "another hint";
    EXPECT_EQ(
        w.routeOf(w.a,
                  w.key(static_cast<TransportType>(TCP + (int64_t{1} << 31)))),
        nullptr)
        << "a hint equal in its low bits only";
    EXPECT_EQ(w.routeOf(w.a, w.key(TCP, 4)), nullptr) << "a new local snapshot";
    EXPECT_EQ(w.routeOf(w.a, w.key(TCP, 3, 8)), nullptr)
        << "the selector changed";
    // Noted again under the key of now: found by every submission until
    // the lease's TTL ends (one hour in MemoWorld), by none after.
    const uint64_t now_key = w.key(TCP);
    w.note(w.a, now_key);
    ASSERT_NE(w.memo.findRouted(w.a, now_key), nullptr);
    const uint64_t before_end =
        w.keyAt(w.now + milliseconds(3600 * 1000 - 1000), TCP);
    EXPECT_EQ(before_end, now_key) << "the same epoch";
    EXPECT_NE(w.memo.findRouted(w.a, before_end), nullptr);
    const uint64_t after_end =
        w.keyAt(w.now + milliseconds(3600 * 1000 + 1), TCP);
    EXPECT_NE(after_end, now_key) << "the lease's TTL ran out";
    EXPECT_EQ(w.memo.findRouted(w.a, after_end), nullptr);

    // Noted again; then an invalidation moves the change count: the
    // decision is not found, even before the descriptor is read again.
    w.note(w.a, w.key(TCP));
    ASSERT_EQ(w.routeOf(w.a, w.key(TCP)), w.tcp);
    ASSERT_TRUE(w.mgr.invalidateRemote(w.a).ok());
    EXPECT_EQ(w.routeOf(w.a, w.key(TCP)), nullptr) << "invalidated";
    EXPECT_EQ(fetchOf(w.get(w.memo, w.a)), "fetch#3");
    EXPECT_EQ(w.routeOf(w.a, w.key(TCP)), nullptr) << "read again";

    // So with a descriptor re-read after a miss.
    w.note(w.a, w.key(TCP));
    ASSERT_EQ(w.routeOf(w.a, w.key(TCP)), w.tcp);
    SegmentDescRef fresh;
    bool refreshed = false;
    ASSERT_TRUE(w.mgr.refreshAfterMiss(fresh, w.a, refreshed).ok());
    ASSERT_TRUE(refreshed);
    w.memo.replace(w.a, fresh);
    EXPECT_EQ(w.memo.entryOf(w.a)->routeFor(w.key(TCP)), nullptr);

    // Not noted: for the local segment (not held in a slot), under
    // generation 0 (a selector never set up), for an UNSPEC hint, or for
    // a lease filled after the change count the key stands for.
    w.note(LOCAL_SEGMENT_ID, w.key(TCP));
    EXPECT_EQ(w.memo.findRouted(LOCAL_SEGMENT_ID, w.key(TCP)), nullptr);
    ASSERT_NE(w.get(w.memo, w.b), nullptr);
    w.note(w.b, w.key(TCP, 3, 0));
    EXPECT_EQ(w.routeOf(w.b, w.key(TCP, 3, 0)), nullptr) << "generation 0";
    w.note(w.b, w.key(UNSPEC));
    EXPECT_EQ(w.routeOf(w.b, w.key(UNSPEC)), nullptr) << "no hint";
    const uint64_t stale = w.key(TCP);
    ASSERT_TRUE(w.mgr.invalidateRemote(w.b).ok());
    ASSERT_NE(w.get(w.memo, w.b), nullptr);
    w.memo.noteRoute(w.b, stale, w.tcp, w.now, w.mgr.remoteChanges() - 1);
    EXPECT_EQ(w.memo.entryOf(w.b)->routeFor(stale), nullptr)
        << "the lease is newer than the key";
    w.note(w.b, w.key(TCP));
    EXPECT_EQ(w.routeOf(w.b, w.key(TCP)), w.tcp);
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
