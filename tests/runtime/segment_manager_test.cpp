// SegmentManager: the local descriptor's snapshots and the cache of
// opened peers (fetches, leases, TTLs, per-thread and per-manager entries).
#include "tent/runtime/segment_manager.h"

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "kit/descriptor_fetcher.h"
#include "runtime/segment_test_support.h"

namespace mooncake::tent {
namespace {

using std::chrono::milliseconds;
using testing::DescriptorFetcher;
using testing::makeBuffer;

TEST(SegmentManagerTest, LocalStartsEmptyUnderItsName) {
    SegmentManager mgr("10.0.0.1:15000", nullptr);
    SegmentDescRef local = mgr.getLocal();
    ASSERT_TRUE(local);
    EXPECT_EQ(local->name, "10.0.0.1:15000");
    EXPECT_EQ(local->type, SegmentType::Memory);
    EXPECT_TRUE(local->getMemory().buffers.empty());
    SegmentDescRef same;
    ASSERT_TRUE(mgr.getRemoteCached(same, LOCAL_SEGMENT_ID).ok());
    EXPECT_EQ(same, local);
}

TEST(SegmentManagerTest, HeldSnapshotIsUnchangedByUpdates) {
    SegmentManager mgr("local", nullptr);
    SegmentDescRef before = mgr.getLocal();
    ASSERT_TRUE(mgr.updateLocal([](SegmentDesc& d) {
                       d.getMemory().transport_attrs[MPCOMM] = "v1:1.2.3.4:5";
                       d.getMemory().buffers.push_back(makeBuffer(1, 2));
                       return Status::OK();
                   })
                    .ok());
    SegmentDescRef after = mgr.getLocal();
    EXPECT_NE(before, after);
    EXPECT_TRUE(before->getMemory().transport_attrs.empty());
    EXPECT_TRUE(before->getMemory().buffers.empty());
    EXPECT_EQ(after->getMemory().transport_attrs.at(MPCOMM), "v1:1.2.3.4:5");
}

TEST(SegmentManagerTest, FailedMutatorPublishesNothing) {
    SegmentManager mgr("local", nullptr);
    SegmentDescRef before = mgr.getLocal();
    Status s = mgr.updateLocal([](SegmentDesc& d) {
        d.getMemory().buffers.push_back(makeBuffer(1, 2));
        return Status::InvalidArgument("nope");
    });
    EXPECT_EQ(s, Status::InvalidArgument("nope"));
    EXPECT_EQ(mgr.getLocal(), before);
    EXPECT_TRUE(mgr.getLocal()->getMemory().buffers.empty());
}

TEST(SegmentManagerTest, SynchronizeCountsOnlyNewSnapshots) {
    SegmentManager mgr("local", nullptr);
    EXPECT_EQ(mgr.publishedVersion(), 0u);
    ASSERT_TRUE(mgr.synchronizeLocal().ok());
    EXPECT_EQ(mgr.publishedVersion(), 0u);
    ASSERT_TRUE(
        mgr.updateLocal([](SegmentDesc&) { return Status::OK(); }).ok());
    ASSERT_TRUE(mgr.synchronizeLocal().ok());
    ASSERT_TRUE(mgr.synchronizeLocal().ok());
    EXPECT_EQ(mgr.publishedVersion(), 1u);
}

TEST(SegmentManagerTest, ConcurrentUpdatesAllLand) {
    constexpr int kThreads = 8;
    constexpr int kPerThread = 200;
    SegmentManager mgr("local", nullptr);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
        threads.emplace_back([&mgr, t] {
            for (int i = 0; i < kPerThread; ++i) {
                uint64_t addr = uint64_t(t) * kPerThread + i;
                ASSERT_TRUE(mgr.updateLocal([addr](SegmentDesc& d) {
                                   d.getMemory().buffers.push_back(
                                       makeBuffer(addr, 1));
                                   return Status::OK();
                               })
                                .ok());
            }
        });
    }
    for (auto& th : threads) th.join();
    SegmentDescRef local = mgr.getLocal();
    ASSERT_EQ(local->getMemory().buffers.size(), size_t(kThreads * kPerThread));
    std::vector<bool> seen(kThreads * kPerThread, false);
    for (const BufferDesc& b : local->getMemory().buffers) seen[b.addr] = true;
    for (size_t i = 0; i < seen.size(); ++i) EXPECT_TRUE(seen[i]) << i;
}

TEST(SegmentManagerTest, ConcurrentReadersSeeConsistentSnapshots) {
    // Each update writes the same count into two places; a torn snapshot
    // would show them differing.
    SegmentManager mgr("local", nullptr);
    constexpr int kUpdates = 500;
    std::atomic<bool> done{false};
    std::atomic<int> inconsistent{0};
    std::vector<std::thread> readers;
    for (int r = 0; r < 4; ++r) {
        readers.emplace_back([&] {
            size_t last = 0;
            while (!done.load()) {
                SegmentDescRef snap = mgr.getLocal();
                size_t n = snap->getMemory().buffers.size();
                const std::string* found =
                    snap->getMemory().getTransportAttrs(TCP);
                std::string attr = found ? *found : "";
                if (attr != (n == 0 ? "" : std::to_string(n)) || n < last) {
                    ++inconsistent;
                }
                last = n;
            }
        });
    }
    for (int i = 1; i <= kUpdates; ++i) {
        ASSERT_TRUE(mgr.updateLocal([i](SegmentDesc& d) {
                           d.getMemory().buffers.push_back(makeBuffer(i, 1));
                           d.getMemory().transport_attrs[TCP] =
                               std::to_string(i);
                           return Status::OK();
                       })
                        .ok());
    }
    done = true;
    for (auto& th : readers) th.join();
    EXPECT_EQ(inconsistent.load(), 0);
    EXPECT_EQ(mgr.getLocal()->getMemory().buffers.size(), size_t(kUpdates));
}

TEST(SegmentManagerTest, OpenCloseReopenGivesAFreshId) {
    auto fetcher = DescriptorFetcher::numberedFetches();
    SegmentManager mgr("local", fetcher);
    SegmentID a = LOCAL_SEGMENT_ID, b = LOCAL_SEGMENT_ID;
    ASSERT_TRUE(mgr.openRemote(a, "peer:1").ok());
    EXPECT_EQ(a, 1u);
    ASSERT_TRUE(mgr.openRemote(b, "peer:2").ok());
    EXPECT_EQ(b, 2u);
    SegmentID again = 0;
    ASSERT_TRUE(mgr.openRemote(again, "peer:1").ok());
    EXPECT_EQ(again, a);  // an open name keeps its id
    SegmentDescRef desc;
    ASSERT_TRUE(mgr.getRemoteCached(desc, a).ok());
    EXPECT_EQ(desc->name, "peer:1");  // the descriptor names the segment

    ASSERT_TRUE(mgr.closeRemote(a).ok());
    Status s = mgr.getRemoteCached(desc, a);
    EXPECT_EQ(s, Status::InvalidArgument("unknown segment id 1"));
    EXPECT_EQ(mgr.closeRemote(a),
              Status::InvalidArgument("unknown segment id 1"));

    SegmentID reopened = 0;
    ASSERT_TRUE(mgr.openRemote(reopened, "peer:1").ok());
    EXPECT_EQ(reopened, 3u);
    EXPECT_EQ(mgr.invalidateRemote(77),
              Status::InvalidArgument("unknown segment id 77"));
}

TEST(SegmentManagerTest, OpenFailurePropagatesNamingTheSegment) {
    auto fetcher = DescriptorFetcher::numberedFetches();
    SegmentManager mgr("local", fetcher);
    fetcher->failNext();
    SegmentID id = 0;
    Status s = mgr.openRemote(id, "peer:9");
    EXPECT_EQ(s, Status::RpcServiceError(
                     "cannot open segment peer:9: peer peer:9 is down"));
    ASSERT_TRUE(mgr.openRemote(id, "peer:9").ok());
    EXPECT_EQ(id, 1u);  // the failed attempt consumed no id
}

TEST(SegmentManagerTest, CachedWithinTtlFetchesOnce) {
    auto fetcher = DescriptorFetcher::numberedFetches();
    SegmentManager mgr("local", fetcher, milliseconds(3600 * 1000));
    SegmentID id = 0;
    ASSERT_TRUE(mgr.openRemote(id, "peer:1").ok());
    EXPECT_EQ(fetcher->calls(), 1);
    SegmentDescRef first, second;
    ASSERT_TRUE(mgr.getRemoteCached(first, id).ok());
    ASSERT_TRUE(mgr.getRemoteCached(second, id).ok());
    EXPECT_EQ(fetcher->calls(), 1);
    EXPECT_EQ(first, second);
    EXPECT_EQ(first->getMemory().transport_attrs.at(TCP), "fetch#1");

    ASSERT_TRUE(mgr.invalidateRemote(id).ok());
    ASSERT_TRUE(mgr.getRemoteCached(second, id).ok());
    EXPECT_EQ(fetcher->calls(), 2);
    EXPECT_EQ(second->getMemory().transport_attrs.at(TCP), "fetch#2");
    ASSERT_TRUE(mgr.getRemoteCached(second, id).ok());
    EXPECT_EQ(fetcher->calls(), 2);

    // getRemote always fetches and refreshes the cache.
    ASSERT_TRUE(mgr.getRemote(second, id).ok());
    EXPECT_EQ(fetcher->calls(), 3);
    ASSERT_TRUE(mgr.getRemoteCached(first, id).ok());
    EXPECT_EQ(fetcher->calls(), 3);
    EXPECT_EQ(first->getMemory().transport_attrs.at(TCP), "fetch#3");
}

TEST(SegmentManagerTest, ALeaseIsCurrentExactlyWhileTheCachedCopyStands) {
    auto fetcher = DescriptorFetcher::numberedFetches();
    SegmentManager mgr("local", fetcher, milliseconds(3600 * 1000));
    SegmentID id = 0;
    ASSERT_TRUE(mgr.openRemote(id, "peer:1").ok());
    SegmentManager::RemoteLease lease;
    EXPECT_FALSE(lease.current(SegmentManager::cacheNow()));
    SegmentDescRef desc;
    ASSERT_TRUE(mgr.getRemoteCached(desc, id, lease).ok());
    EXPECT_EQ(fetcher->calls(), 1);
    auto now = SegmentManager::cacheNow();
    EXPECT_TRUE(lease.current(now));

    // Invalidated from another thread: every thread's copy is gone.
    std::thread([&] { ASSERT_TRUE(mgr.invalidateRemote(id).ok()); }).join();
    EXPECT_FALSE(lease.current(now));
    ASSERT_TRUE(mgr.getRemoteCached(desc, id, lease).ok());
    EXPECT_EQ(fetcher->calls(), 2);
    EXPECT_EQ(desc->getMemory().transport_attrs.at(TCP), "fetch#2");
    EXPECT_TRUE(lease.current(now));

    // Refreshed on this thread: getRemoteCached() would hand out the new
    // copy, so the lease on the old one lapses.
    SegmentDescRef fresh;
    ASSERT_TRUE(mgr.getRemote(fresh, id).ok());
    EXPECT_EQ(fetcher->calls(), 3);
    EXPECT_FALSE(lease.current(now));
    ASSERT_TRUE(mgr.getRemoteCached(desc, id, lease).ok());
    EXPECT_EQ(fetcher->calls(), 3);
    EXPECT_EQ(desc, fresh);

    // The TTL bounds it like the cache it stands for.
    now = SegmentManager::cacheNow();
    EXPECT_TRUE(lease.current(now));
    EXPECT_FALSE(lease.current(now + milliseconds(3600 * 1000 + 1)));

    // Another thread's lease is its own: filling it takes the engine's
    // shared copy (no fetch), and leaves this one standing.
    std::thread([&] {
        SegmentManager::RemoteLease theirs;
        SegmentDescRef d;
        ASSERT_TRUE(mgr.getRemoteCached(d, id, theirs).ok());
        EXPECT_TRUE(theirs.current(SegmentManager::cacheNow()));
        EXPECT_EQ(d, fresh);
    }).join();
    EXPECT_EQ(fetcher->calls(), 3);
    EXPECT_TRUE(lease.current(now));

    ASSERT_TRUE(mgr.closeRemote(id).ok());
    EXPECT_FALSE(lease.current(now));
    // The local descriptor is never cached, so never leased.
    ASSERT_TRUE(mgr.getRemoteCached(desc, LOCAL_SEGMENT_ID, lease).ok());
    EXPECT_EQ(desc, mgr.getLocal());
    EXPECT_FALSE(lease.current(now));
}

// One count stands for all of a manager's leases: an invalidation of any
// segment ends them all, and re-filling one is a cache hit, not a fetch.
// A lease may outlive its manager, and then it is not current.
TEST(SegmentManagerTest,
     AnyInvalidationEndsEveryLeaseAndLeasesOutliveTheirManager) {
    auto fetcher = DescriptorFetcher::numberedFetches();
    auto mgr = std::make_unique<SegmentManager>("local", fetcher,
                                                milliseconds(3600 * 1000));
    SegmentID a = 0;
    SegmentID b = 0;
    ASSERT_TRUE(mgr->openRemote(a, "peer:1").ok());
    ASSERT_TRUE(mgr->openRemote(b, "peer:2").ok());
    SegmentManager::RemoteLease lease_a;
    SegmentManager::RemoteLease lease_b;
    SegmentDescRef desc_a;
    SegmentDescRef desc_b;
    ASSERT_TRUE(mgr->getRemoteCached(desc_a, a, lease_a).ok());
    ASSERT_TRUE(mgr->getRemoteCached(desc_b, b, lease_b).ok());
    auto now = SegmentManager::cacheNow();
    EXPECT_TRUE(lease_a.current(now));
    EXPECT_TRUE(lease_b.current(now));
    const int fetched = fetcher->calls();

    ASSERT_TRUE(mgr->invalidateRemote(b).ok());
    EXPECT_FALSE(lease_a.current(now));
    EXPECT_FALSE(lease_b.current(now));
    SegmentDescRef held = desc_a;
    ASSERT_TRUE(mgr->getRemoteCached(desc_a, a, lease_a).ok());
    EXPECT_EQ(fetcher->calls(), fetched) << "a's copy was still good";
    EXPECT_EQ(desc_a, held);
    EXPECT_TRUE(lease_a.current(now));

    mgr.reset();
    EXPECT_FALSE(lease_a.current(now));
    EXPECT_FALSE(lease_b.current(now));
}

TEST(SegmentManagerTest, ZeroTtlFetchesEveryTime) {
    auto fetcher = DescriptorFetcher::numberedFetches();
    SegmentManager mgr("local", fetcher, milliseconds(0));
    SegmentID id = 0;
    ASSERT_TRUE(mgr.openRemote(id, "peer:1").ok());
    SegmentDescRef desc;
    for (int i = 0; i < 5; ++i) ASSERT_TRUE(mgr.getRemoteCached(desc, id).ok());
    EXPECT_EQ(fetcher->calls(), 6);
}

TEST(SegmentManagerTest, SetCacheTtlAppliesToNewEntries) {
    auto fetcher = DescriptorFetcher::numberedFetches();
    SegmentManager mgr("local", fetcher, milliseconds(3600 * 1000));
    mgr.setCacheTtl(milliseconds(0));
    SegmentID id = 0;
    ASSERT_TRUE(mgr.openRemote(id, "peer:1").ok());
    SegmentDescRef desc;
    ASSERT_TRUE(mgr.getRemoteCached(desc, id).ok());
    ASSERT_TRUE(mgr.getRemoteCached(desc, id).ok());
    EXPECT_EQ(fetcher->calls(), 3);
}

TEST(SegmentManagerTest, ThreadsShareOneCopyPerEngine) {
    auto fetcher = DescriptorFetcher::numberedFetches();
    SegmentManager mgr("local", fetcher, milliseconds(3600 * 1000));
    SegmentID id = 0;
    ASSERT_TRUE(mgr.openRemote(id, "peer:1").ok());
    SegmentDescRef mine;
    ASSERT_TRUE(mgr.getRemoteCached(mine, id).ok());
    EXPECT_EQ(fetcher->calls(), 1);

    SegmentDescRef theirs;
    std::thread other([&] {
        ASSERT_TRUE(mgr.getRemoteCached(theirs, id).ok());
        ASSERT_TRUE(mgr.getRemoteCached(theirs, id).ok());
    });
    other.join();
    EXPECT_EQ(fetcher->calls(), 1);
    EXPECT_EQ(theirs, mine);
    EXPECT_EQ(mgr.remoteFetches(), 1u);

    // An invalidation from this thread drops the other thread's entry and
    // the shared copy: the next look-up anywhere reads the store once.
    std::promise<void> filled, invalidated;
    std::thread holder([&] {
        SegmentDescRef d;
        EXPECT_TRUE(mgr.getRemoteCached(d, id).ok());  // shared copy
        filled.set_value();
        invalidated.get_future().wait();
        EXPECT_TRUE(mgr.getRemoteCached(d, id).ok());  // fetch #2
        EXPECT_EQ(d->getMemory().transport_attrs.at(TCP), "fetch#2");
    });
    filled.get_future().wait();
    EXPECT_EQ(fetcher->calls(), 1);
    ASSERT_TRUE(mgr.invalidateRemote(id).ok());
    invalidated.set_value();
    holder.join();
    EXPECT_EQ(fetcher->calls(), 2);
    ASSERT_TRUE(mgr.getRemoteCached(mine, id).ok());
    EXPECT_EQ(mine->getMemory().transport_attrs.at(TCP), "fetch#2");
    EXPECT_EQ(fetcher->calls(), 2);
}

TEST(SegmentManagerTest, ManagersDoNotShareCacheEntries) {
    auto fetcher = DescriptorFetcher::numberedFetches();
    SegmentManager one("a", fetcher, milliseconds(3600 * 1000));
    SegmentManager two("b", fetcher, milliseconds(3600 * 1000));
    SegmentID id1 = 0, id2 = 0;
    ASSERT_TRUE(one.openRemote(id1, "peer:1").ok());
    ASSERT_TRUE(two.openRemote(id2, "peer:2").ok());
    ASSERT_EQ(id1, id2);  // same numeric id in different managers
    SegmentDescRef d1, d2;
    ASSERT_TRUE(one.getRemoteCached(d1, id1).ok());
    ASSERT_TRUE(two.getRemoteCached(d2, id2).ok());
    EXPECT_EQ(d1->name, "peer:1");
    EXPECT_EQ(d2->name, "peer:2");
}

}  // namespace
}  // namespace mooncake::tent

namespace mooncake::tent {
namespace {

// refreshAfterMiss(): one re-read per segment per interval, which drops
// every thread's copy; none for the local segment.
TEST(SegmentManagerTest, AMissRereadsOncePerSegmentPerInterval) {
    auto fetcher = testing::DescriptorFetcher::numberedFetches();
    SegmentManager mgr("local", fetcher, std::chrono::hours(1));
    EXPECT_EQ(mgr.missRefreshInterval(), std::chrono::milliseconds(1000));
    mgr.setMissRefreshInterval(std::chrono::hours(1));
    SegmentID a = 0, b = 0;
    ASSERT_TRUE(mgr.openRemote(a, "peer:1").ok());
    ASSERT_TRUE(mgr.openRemote(b, "peer:2").ok());
    ASSERT_EQ(fetcher->calls(), 2);

    // The first miss re-reads, however recently the segment was opened.
    SegmentDescRef desc;
    bool refreshed = false;
    ASSERT_TRUE(mgr.refreshAfterMiss(desc, a, refreshed).ok());
    EXPECT_TRUE(refreshed);
    EXPECT_EQ(fetcher->calls(), 3);
    EXPECT_EQ(desc->getMemory().transport_attrs.at(TCP), "fetch#3");
    EXPECT_EQ(mgr.missRefreshes(), 1u);
    // ...into this thread's cache.
    SegmentDescRef cached;
    ASSERT_TRUE(mgr.getRemoteCached(cached, a).ok());
    EXPECT_TRUE(cached == desc);
    EXPECT_EQ(fetcher->calls(), 3);

    // Within the interval: nothing fetched, `desc` untouched.
    for (int i = 0; i < 10; ++i) {
        SegmentDescRef held = desc;
        ASSERT_TRUE(mgr.refreshAfterMiss(held, a, refreshed).ok());
        EXPECT_FALSE(refreshed);
        EXPECT_TRUE(held == desc);
    }
    EXPECT_EQ(fetcher->calls(), 3);
    EXPECT_EQ(mgr.missRefreshes(), 1u);
    // Another segment has its own interval, and its re-read drops the copy
    // another thread holds.
    std::promise<void> filled, reread;
    std::thread holder([&] {
        SegmentDescRef d;
        EXPECT_TRUE(mgr.getRemoteCached(d, b).ok());  // shared copy, #2
        filled.set_value();
        reread.get_future().wait();
        EXPECT_TRUE(mgr.getRemoteCached(d, b).ok());  // the re-read, #4
        EXPECT_EQ(d->getMemory().transport_attrs.at(TCP), "fetch#4");
    });
    filled.get_future().wait();
    EXPECT_TRUE(mgr.refreshAfterMiss(desc, b, refreshed).ok());  // #4
    EXPECT_TRUE(refreshed);
    EXPECT_EQ(mgr.missRefreshes(), 2u);
    reread.set_value();
    holder.join();
    EXPECT_EQ(fetcher->calls(), 4);
    // The local segment is always current.
    ASSERT_TRUE(mgr.refreshAfterMiss(desc, LOCAL_SEGMENT_ID, refreshed).ok());
    EXPECT_FALSE(refreshed);
    EXPECT_EQ(mgr.missRefreshes(), 2u);
    EXPECT_EQ(mgr.refreshAfterMiss(desc, 99, refreshed).message(),
              "unknown segment id 99");

    // An interval of 0: every miss re-reads.
    mgr.setMissRefreshInterval(std::chrono::milliseconds(0));
    for (int i = 0; i < 3; ++i) {
        ASSERT_TRUE(mgr.refreshAfterMiss(desc, a, refreshed).ok());
        EXPECT_TRUE(refreshed);
    }
    EXPECT_EQ(mgr.missRefreshes(), 5u);
    EXPECT_EQ(fetcher->calls(), 7);
}

}  // namespace
}  // namespace mooncake::tent
