// SegmentManager's one descriptor copy per engine: however many threads
// miss a segment at once, the store is read once for it.
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "kit/wait_until.h"
#include "tent/runtime/segment_manager.h"

namespace mooncake::tent {
namespace {

using std::chrono::milliseconds;
using testing::waitUntil;

// Counts reads; while closed, a read waits (bounded) for open(), so that
// the threads missing behind it pile up on the segment.
class GatedFetcher : public SegmentFetcher {
 public:
    Status fetch(const std::string& name, SegmentDesc& out) override {
        const int call = ++calls;
        std::unique_lock<std::mutex> lock(mu_);
        entered_ = true;
        if (!cv_.wait_for(lock, testing::kWaitBound, [&] { return open_; })) {
            return Status::InternalError("gate never opened");
        }
        out.name = name;
        out.type = SegmentType::Memory;
        out.getMemory().transport_attrs[TCP] = "read#" + std::to_string(call);
        return Status::OK();
    }
    void close() {
        std::lock_guard<std::mutex> lock(mu_);
        open_ = false;
        entered_ = false;
    }
    void open() {
        {
            std::lock_guard<std::mutex> lock(mu_);
            open_ = true;
        }
        cv_.notify_all();
    }
    bool entered() {
        std::lock_guard<std::mutex> lock(mu_);
        return entered_;
    }
    std::atomic<int> calls{0};

 private:
    std::mutex mu_;
    std::condition_variable cv_;
    bool open_ = true;
    bool entered_ = false;
};

TEST(SegmentSharedCacheTest, ThreadsMissingAtOnceReadTheStoreOnce) {
    constexpr int kThreads = 8;
    auto fetcher = std::make_shared<GatedFetcher>();
    SegmentManager mgr("local", fetcher, std::chrono::hours(1));
    SegmentID id = 0;
    ASSERT_TRUE(mgr.openRemote(id, "peer:1").ok());
    ASSERT_EQ(fetcher->calls.load(), 1);
    ASSERT_TRUE(mgr.invalidateRemote(id).ok());

    fetcher->close();
    std::atomic<int> arrived{0};
    std::vector<SegmentDescRef> seen(kThreads);
    std::vector<std::thread> threads;
    for (int i = 0; i < kThreads; ++i) {
        threads.emplace_back([&, i] {
            ++arrived;
            EXPECT_TRUE(mgr.getRemoteCached(seen[i], id).ok());
        });
    }
    // One thread is in the store read, every other one has started its
    // look-up: those wait for the read instead of making their own.
    ASSERT_TRUE(waitUntil(
        [&] { return fetcher->entered() && arrived.load() == kThreads; }));
    fetcher->open();
    for (auto& t : threads) t.join();
    EXPECT_EQ(fetcher->calls.load(), 2);
    EXPECT_EQ(mgr.remoteFetches(), 2u);
    for (int i = 0; i < kThreads; ++i) {
        ASSERT_NE(seen[i], nullptr);
        EXPECT_EQ(seen[i], seen[0]) << "thread " << i;
        EXPECT_EQ(seen[i]->getMemory().transport_attrs.at(TCP), "read#2");
    }
}

// One read per peer per engine, not per thread: N threads over P peers.
TEST(SegmentSharedCacheTest, StoreReadsAreOnePerPeerWhateverTheThreads) {
    constexpr int kThreads = 8;
    constexpr int kPeers = 5;
    auto fetcher = std::make_shared<GatedFetcher>();
    SegmentManager mgr("local", fetcher, std::chrono::hours(1));
    std::vector<SegmentID> ids(kPeers);
    for (int p = 0; p < kPeers; ++p) {
        ASSERT_TRUE(mgr.openRemote(ids[p], "peer:" + std::to_string(p)).ok());
    }
    std::vector<std::thread> threads;
    for (int i = 0; i < kThreads; ++i) {
        threads.emplace_back([&] {
            for (int round = 0; round < 100; ++round) {
                for (int p = 0; p < kPeers; ++p) {
                    SegmentDescRef d;
                    EXPECT_TRUE(mgr.getRemoteCached(d, ids[p]).ok());
                    EXPECT_EQ(d->name, "peer:" + std::to_string(p));
                }
            }
        });
    }
    for (auto& t : threads) t.join();
    EXPECT_EQ(fetcher->calls.load(), kPeers);
}

// Readers and invalidations racing (run under TSan by scripts/check.sh):
// every reader gets a whole descriptor of the right segment, and the store
// is read at most once per invalidation (plus the open).
TEST(SegmentSharedCacheTest, ConcurrentReadersAndInvalidations) {
    constexpr int kReaders = 4;
    constexpr int kInvalidations = 200;
    auto fetcher = std::make_shared<GatedFetcher>();
    SegmentManager mgr("local", fetcher, std::chrono::hours(1));
    SegmentID id = 0;
    ASSERT_TRUE(mgr.openRemote(id, "peer:1").ok());
    std::atomic<bool> stop{false};
    std::vector<std::thread> readers;
    for (int i = 0; i < kReaders; ++i) {
        readers.emplace_back([&] {
            SegmentManager::RemoteLease lease;
            while (!stop.load()) {
                SegmentDescRef d;
                EXPECT_TRUE(mgr.getRemoteCached(d, id, lease).ok());
                ASSERT_NE(d, nullptr);
                EXPECT_EQ(d->name, "peer:1");
            }
        });
    }
    for (int i = 0; i < kInvalidations; ++i) {
        ASSERT_TRUE(mgr.invalidateRemote(id).ok());
    }
    stop = true;
    for (auto& t : readers) t.join();
    EXPECT_LE(fetcher->calls.load(), kInvalidations + 1);
    EXPECT_GE(fetcher->calls.load(), 1);
}

}  // namespace
}  // namespace mooncake::tent
