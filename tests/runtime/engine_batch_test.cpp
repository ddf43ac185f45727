// TransferEngine batches against a fake transport: ids stay unique when
// the engine reuses a batch's slot, status reads racing freeBatch() never
// reach a freed sub-batch (and wait, rather than fail, while a free closes
// the batch to count its tasks), and concurrent submissions to one batch
// all land. The engine finds batches without a lock (engine_batch_table.h), so
// these are the races that design must get right.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <climits>
#include <future>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "kit/request_builder.h"
#include "kit/wait_until.h"
#include "tent/runtime/transport.h"
#include "tent/transfer_engine.h"

namespace mooncake::tent {
namespace {

// Completes tasks when `complete` says so. Freed sub-batches are kept (not
// deleted) and marked, so that any later use of one is counted in
// `misuse` instead of being undefined behaviour.
class FakeTransport : public Transport {
 public:
    // The engine routes only what a transport declares it can carry.
    FakeTransport() { caps.dram_to_dram = true; }

    struct Sub : SubBatch {
        explicit Sub(size_t cap) : capacity(cap) {}
        size_t size() const override {
            return count.load(std::memory_order_acquire);
        }
        const size_t capacity;
        std::mutex mu;
        std::atomic<size_t> count{0};
        std::atomic<bool> freed{false};
    };

    Status allocateSubBatch(SubBatchRef& batch, size_t max_size) override {
        auto sub = std::make_unique<Sub>(max_size);
        batch = sub.get();
        allocations.fetch_add(1);
        live_subs->fetch_add(1);
        std::lock_guard<std::mutex> lock(mu_);
        subs_.push_back(std::move(sub));
        return Status::OK();
    }
    Status freeSubBatch(SubBatchRef& batch) override {
        auto* sub = static_cast<Sub*>(batch);
        if (sub->freed.exchange(true)) misuse.fetch_add(1);
        frees.fetch_add(1);
        live_subs->fetch_sub(1);
        batch = nullptr;
        return Status::OK();
    }
    // In place when `recycle_in_place` and the capacity is the same, else
    // the base's free and allocate.
    Status recycleSubBatch(SubBatchRef& batch, size_t max_size) override {
        recycles.fetch_add(1);
        auto* sub = static_cast<Sub*>(batch);
        if (!recycle_in_place.load() || sub->capacity != max_size) {
            return Transport::recycleSubBatch(batch, max_size);
        }
        if (sub->freed.load()) misuse.fetch_add(1);
        sub->count.store(0);
        return Status::OK();
    }
    Status submitTransferTasks(SubBatchRef batch,
                               const std::vector<Request>& list) override {
        auto* sub = static_cast<Sub*>(batch);
        if (sub->freed.load()) misuse.fetch_add(1);
        std::lock_guard<std::mutex> lock(sub->mu);
        size_t used = sub->count.load(std::memory_order_relaxed);
        if (list.size() > sub->capacity - used) {
            return Status::TooManyRequests("fake: over capacity");
        }
        sub->count.store(used + list.size(), std::memory_order_release);
        return Status::OK();
    }
    Status getTransferStatus(SubBatchRef batch, int task_id,
                             TransferStatus& status) override {
        auto* sub = static_cast<Sub*>(batch);
        if (sub->freed.load()) misuse.fetch_add(1);
        polls.fetch_add(1);
        if (hold_next_poll.exchange(false)) {
            held.set_value();
            released.wait_for(std::chrono::seconds(30));
        }
        if (task_id < 0 || static_cast<size_t>(task_id) >= sub->size()) {
            misuse.fetch_add(1);
            return Status::InvalidArgument("fake: task id out of range");
        }
        status.s = complete.load() ? COMPLETED : PENDING;
        status.transferred_bytes = 0;
        return Status::OK();
    }
    const char* getName() const override { return "fake"; }

    // When set, the next poll clears it, fulfils `held` and waits (30 s at
    // most) until `release` is fulfilled.
    std::atomic<bool> hold_next_poll{false};
    std::promise<void> held;
    std::promise<void> release;
    std::shared_future<void> released = release.get_future().share();

    std::atomic<bool> complete{true};
    std::atomic<long> polls{0};
    std::atomic<int> misuse{0};
    std::atomic<int> frees{0};
    std::atomic<int> allocations{0};
    std::atomic<int> recycles{0};
    std::atomic<bool> recycle_in_place{false};
    // Allocated and not freed; shared, so that it outlives the engine that
    // owns this transport.
    std::shared_ptr<std::atomic<int>> live_subs =
        std::make_shared<std::atomic<int>>(0);

 private:
    std::mutex mu_;
    std::vector<std::unique_ptr<Sub>> subs_;
};

// An engine whose only transport (the TCP row) is a FakeTransport.
class EngineBatchTest : public ::testing::Test {
 protected:
    void SetUp() override { ASSERT_NO_FATAL_FAILURE(makeEngine(30000)); }

    // Replaces engine_ (and fake_) with one whose batch/free_timeout_ms is
    // `free_timeout_ms`, or unset when kUnset.
    static constexpr int kUnset = INT32_MIN;
    void makeEngine(int free_timeout_ms) {
        engine_.reset();
        fake_ = nullptr;
        setTransportFactoryOverride(TCP, [this] {
            auto transport = std::make_unique<FakeTransport>();
            fake_ = transport.get();
            return transport;
        });
        auto conf = std::make_shared<Config>();
        conf->set("rpc_server_hostname", "127.0.0.1");
        conf->set("transports/mpcomm/enable", false);
        if (free_timeout_ms != kUnset) {
            conf->set("batch/free_timeout_ms", free_timeout_ms);
        }
        engine_ = std::make_unique<TransferEngine>(conf);
        setTransportFactoryOverride(TCP, nullptr);
        ASSERT_TRUE(engine_->available());
        ASSERT_NE(fake_, nullptr);
    }

    // freeBatch() of a batch whose one task stays PENDING: what it said
    // and how long it took.
    std::pair<Status, std::chrono::milliseconds> freeWithATaskPending(
        BatchID& id) {
        fake_->complete.store(false);
        id = engine_->allocateBatch(1);
        EXPECT_TRUE(engine_->submitTransfer(id, {request()}).ok());
        auto started = std::chrono::steady_clock::now();
        Status s = engine_->freeBatch(id);
        auto took = std::chrono::duration_cast<std::chrono::milliseconds>(
            std::chrono::steady_clock::now() - started);
        fake_->complete.store(true);
        return {s, took};
    }
    static std::string refusedAfter(BatchID id, const std::string& ms) {
        return "freeBatch: batch " + std::to_string(id) +
               " still has 1 task(s) in flight after batch/free_timeout_ms=" +
               ms + " ms; it stays allocated, free it again once they finish";
    }
    void TearDown() override {
        engine_.reset();  // frees the sub-batches left
    }

    static Request request() {
        return testing::makeRequest(Request::WRITE, nullptr, LOCAL_SEGMENT_ID,
                                    0, 8, TCP);
    }

    static bool isUnknown(const Status& s, BatchID id) {
        return s.IsInvalidArgument() &&
               std::string(s.message())
                       .find("unknown batch id " + std::to_string(id)) !=
                   std::string::npos;
    }

    std::unique_ptr<TransferEngine> engine_;
    FakeTransport* fake_ = nullptr;
};

TEST_F(EngineBatchTest, AFreedIdStaysUnknownWhenItsSlotIsReused) {
    std::set<BatchID> seen;
    BatchID first = engine_->allocateBatch(2);
    ASSERT_NE(first, 0u);
    ASSERT_TRUE(engine_->submitTransfer(first, {request()}).ok());
    ASSERT_TRUE(engine_->freeBatch(first).ok());
    seen.insert(first);
    // The slot comes back many times; every id it gets is new.
    for (int i = 0; i < 100; ++i) {
        BatchID id = engine_->allocateBatch(2);
        ASSERT_NE(id, 0u);
        EXPECT_TRUE(seen.insert(id).second) << "id " << id << " reused";
        ASSERT_TRUE(engine_->freeBatch(id).ok());
    }
    BatchID live = engine_->allocateBatch(2);
    ASSERT_TRUE(engine_->submitTransfer(live, {request()}).ok());
    TransferStatus status;
    EXPECT_TRUE(isUnknown(engine_->getTransferStatus(first, 0, status), first));
    EXPECT_TRUE(isUnknown(engine_->submitTransfer(first, {request()}), first));
    EXPECT_TRUE(isUnknown(engine_->freeBatch(first), first));
    // The live batch was not disturbed by the stale id's calls.
    ASSERT_TRUE(engine_->getTransferStatus(live, 0, status).ok());
    EXPECT_EQ(status.s, COMPLETED);
    std::vector<TransferStatus> list;
    ASSERT_TRUE(engine_->getTransferStatus(live, list).ok());
    EXPECT_EQ(list.size(), 1u);
    EXPECT_TRUE(engine_->freeBatch(live).ok());
    EXPECT_EQ(fake_->misuse.load(), 0);
}

TEST_F(EngineBatchTest, IdsNeverHandedOutAreUnknown) {
    BatchID live = engine_->allocateBatch(1);
    ASSERT_NE(live, 0u);
    const BatchID slot_mask = 0xffffffffull;
    // 0, a free slot's even generation, the next generation, a slot never
    // made, one past the table.
    for (BatchID forged :
         {BatchID{0}, live + (BatchID{1} << 32), live + (BatchID{2} << 32),
          (live & ~slot_mask) | 12345, (live & ~slot_mask) | slot_mask}) {
        TransferStatus status;
        EXPECT_TRUE(
            isUnknown(engine_->getTransferStatus(forged, 0, status), forged))
            << forged;
        EXPECT_TRUE(isUnknown(engine_->freeBatch(forged), forged)) << forged;
    }
    EXPECT_TRUE(engine_->freeBatch(live).ok());
}

TEST_F(EngineBatchTest, StatusReadsRacingFreeNeverReachAFreedSubBatch) {
    constexpr int kRounds = 3000;
    std::atomic<BatchID> current{0};
    std::atomic<bool> stop{false};
    std::atomic<long> answered{0};
    std::atomic<int> unexpected{0};
    auto poll = [&] {
        while (!stop.load()) {
            BatchID id = current.load();
            if (id == 0) continue;
            TransferStatus status;
            Status s = engine_->getTransferStatus(id, 0, status);
            std::vector<TransferStatus> list;
            Status all = engine_->getTransferStatus(id, list);
            for (const Status& r : {s, all}) {
                if (r.ok()) {
                    answered.fetch_add(1);
                } else if (!isUnknown(r, id) &&
                           std::string(r.message()).find("out of range") ==
                               std::string::npos) {
                    unexpected.fetch_add(1);
                }
            }
        }
    };
    std::vector<std::thread> pollers;
    for (int i = 0; i < 3; ++i) pollers.emplace_back(poll);
    // Every 64th batch lives until a poller has been answered on it, so the
    // reads are known to reach live batches, not only freed ids.
    int held_rounds = 0;
    bool answered_while_held = true;
    for (int round = 0; round < kRounds; ++round) {
        BatchID id = engine_->allocateBatch(4);
        ASSERT_NE(id, 0u);
        current.store(id);
        ASSERT_TRUE(
            engine_->submitTransfer(id, {request(), request(), request()})
                .ok());
        // After one miss the rest run free: the failure is reported once.
        if (round % 64 == 0 && answered_while_held) {
            const long before = answered.load();
            answered_while_held =
                testing::waitUntil([&] { return answered.load() > before; });
            ++held_rounds;
        }
        ASSERT_TRUE(engine_->freeBatch(id).ok());
    }
    stop.store(true);
    for (std::thread& t : pollers) t.join();
    EXPECT_EQ(fake_->misuse.load(), 0);
    EXPECT_EQ(unexpected.load(), 0);
    EXPECT_EQ(fake_->frees.load(), kRounds);
    EXPECT_TRUE(answered_while_held)
        << "a batch held alive got no answered status read";
    EXPECT_GE(answered.load(), held_rounds);
}

TEST_F(EngineBatchTest, ConcurrentSubmissionsToOneBatchAllLand) {
    constexpr int kThreads = 4;
    constexpr int kEach = 50;
    BatchID id = engine_->allocateBatch(kThreads * kEach);
    ASSERT_NE(id, 0u);
    std::atomic<int> failed{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
        threads.emplace_back([&] {
            for (int i = 0; i < kEach; ++i) {
                if (!engine_->submitTransfer(id, {request()}).ok()) {
                    failed.fetch_add(1);
                }
            }
        });
    }
    for (std::thread& t : threads) t.join();
    EXPECT_EQ(failed.load(), 0);
    std::vector<TransferStatus> list;
    ASSERT_TRUE(engine_->getTransferStatus(id, list).ok());
    ASSERT_EQ(list.size(), static_cast<size_t>(kThreads * kEach));
    for (const TransferStatus& s : list) EXPECT_EQ(s.s, COMPLETED);
    // Full: one more is refused whole.
    EXPECT_TRUE(engine_->submitTransfer(id, {request()}).IsTooManyRequests());
    EXPECT_TRUE(engine_->freeBatch(id).ok());
    EXPECT_EQ(fake_->misuse.load(), 0);
}

TEST_F(EngineBatchTest, AFreeWaitingOnTasksRefusesSubmissionsAndASecondFree) {
    fake_->complete.store(false);
    BatchID id = engine_->allocateBatch(4);
    ASSERT_TRUE(engine_->submitTransfer(id, {request()}).ok());
    const long polls_before = fake_->polls.load();
    Status first;
    testing::BoundedThread freer("freeBatch() after its task completed",
                                 [&] { first = engine_->freeBatch(id); });
    // Polls from freeBatch() mean it holds the batch and waits on the task.
    // On a miss the task completes, so the free can end and be joined.
    bool waiting = testing::waitUntil(
        [&] { return fake_->polls.load() >= polls_before + 2; });
    if (!waiting) fake_->complete.store(true);
    ASSERT_TRUE(waiting) << "freeBatch() never polled its task: "
                         << fake_->polls.load() - polls_before << " polls";
    Status submit = engine_->submitTransfer(id, {request()});
    Status second = engine_->freeBatch(id);
    // Status reads still answer while the free waits.
    TransferStatus status;
    EXPECT_TRUE(engine_->getTransferStatus(id, 0, status).ok());
    EXPECT_EQ(status.s, PENDING);
    fake_->complete.store(true);
    freer.join();
    EXPECT_TRUE(first.ok()) << first.message();
    EXPECT_EQ(submit.message(), "submitTransfer: batch " + std::to_string(id) +
                                    " is being freed");
    EXPECT_EQ(second.message(), "freeBatch: batch " + std::to_string(id) +
                                    " is already being freed");
    EXPECT_TRUE(isUnknown(engine_->getTransferStatus(id, 0, status), id));
    EXPECT_EQ(fake_->misuse.load(), 0);
}

// freeBatch() closes the batch to readers while it counts the tasks in
// flight once; a status read arriving then waits and answers once the free
// lets readers in again to wait for a task, rather than failing.
TEST_F(EngineBatchTest, AStatusReadWhileAFreeCountsWaitsAndThenAnswers) {
    fake_->complete.store(false);
    BatchID id = engine_->allocateBatch(4);
    ASSERT_TRUE(engine_->submitTransfer(id, {request()}).ok());
    TransferStatus status;
    std::future<Status> freed;
    std::future<Status> read;
    // Declared after the futures, so destroyed before them when an
    // assertion returns early: it releases the held poll and completes the
    // task, and the futures' destructors then wait for nothing long.
    struct Release {
        FakeTransport* fake;
        bool done = false;
        void now() {
            if (!done) fake->release.set_value();
            done = true;
        }
        ~Release() {
            now();
            fake->complete.store(true);
        }
    } release{fake_};
    fake_->hold_next_poll.store(true);
    freed =
        std::async(std::launch::async, [&] { return engine_->freeBatch(id); });
    // The free's first count polls the one task and is held there, with
    // the batch closed to readers.
    ASSERT_EQ(fake_->held.get_future().wait_for(std::chrono::seconds(20)),
              std::future_status::ready);
    const long polls_held = fake_->polls.load();
    read = std::async(std::launch::async, [&] {
        return engine_->getTransferStatus(id, 0, status);
    });
    // A bound on a negative: a read that failed fast would be ready here.
    EXPECT_EQ(read.wait_for(std::chrono::milliseconds(200)),
              std::future_status::timeout);
    EXPECT_EQ(fake_->polls.load(), polls_held);
    release.now();
    // The free found the task in flight and let readers in to wait for it.
    ASSERT_EQ(read.wait_for(std::chrono::seconds(20)),
              std::future_status::ready);
    Status read_status = read.get();
    EXPECT_TRUE(read_status.ok()) << read_status.message();
    EXPECT_EQ(status.s, PENDING);
    fake_->complete.store(true);
    ASSERT_EQ(freed.wait_for(std::chrono::seconds(20)),
              std::future_status::ready);
    Status free_status = freed.get();
    EXPECT_TRUE(free_status.ok()) << free_status.message();
    EXPECT_TRUE(isUnknown(engine_->getTransferStatus(id, 0, status), id));
    EXPECT_EQ(fake_->misuse.load(), 0);
}

// Runs `count` requests through a fresh batch of `capacity` and frees it;
// true when every one completed.
bool runBatch(TransferEngine& engine, size_t capacity, size_t count,
              const Request& request) {
    BatchID id = engine.allocateBatch(capacity);
    if (id == 0 ||
        !engine.submitTransfer(id, std::vector<Request>(count, request)).ok()) {
        return false;
    }
    std::vector<TransferStatus> list;
    bool all = engine.getTransferStatus(id, list).ok() && list.size() == count;
    for (const TransferStatus& status : list) all &= status.s == COMPLETED;
    return engine.freeBatch(id).ok() && all;
}

// A freed batch's sub-batch is recycled (emptied) at the free and serves
// the slot's next batch of the same capacity without an allocation; one of
// another capacity is recycled to it; teardown frees what slots kept.
TEST_F(EngineBatchTest, ASlotsNextBatchTakesTheSubBatchItsFreeRecycled) {
    fake_->recycle_in_place.store(true);
    // Four requests into a capacity of four, three times: a sub-batch not
    // emptied would refuse the second round.
    for (int round = 0; round < 3; ++round) {
        ASSERT_TRUE(runBatch(*engine_, 4, 4, request())) << round;
    }
    EXPECT_EQ(fake_->allocations.load(), 1);
    EXPECT_EQ(fake_->recycles.load(), 3);  // one per free
    EXPECT_EQ(fake_->frees.load(), 0);
    // Eight into a capacity of eight: the kept one (capacity four) is
    // recycled to it, here by the base's free and allocate.
    ASSERT_TRUE(runBatch(*engine_, 8, 8, request()));
    EXPECT_EQ(fake_->recycles.load(), 5);  // refit, then the free
    EXPECT_EQ(fake_->allocations.load(), 2);
    EXPECT_EQ(fake_->frees.load(), 1);
    EXPECT_EQ(fake_->live_subs->load(), 1);
    EXPECT_EQ(fake_->misuse.load(), 0);
    std::shared_ptr<std::atomic<int>> live = fake_->live_subs;
    engine_.reset();
    EXPECT_EQ(live->load(), 0);
}

// A transport that keeps the default recycles by freeing and allocating:
// every batch still gets a sub-batch of its own.
TEST_F(EngineBatchTest, TheDefaultRecycleFreesAndAllocates) {
    for (int round = 0; round < 3; ++round) {
        ASSERT_TRUE(runBatch(*engine_, 4, 4, request())) << round;
    }
    EXPECT_EQ(fake_->recycles.load(), 3);
    EXPECT_EQ(fake_->frees.load(), 3);
    EXPECT_EQ(fake_->allocations.load(), 4);
    EXPECT_EQ(fake_->misuse.load(), 0);
    std::shared_ptr<std::atomic<int>> live = fake_->live_subs;
    engine_.reset();
    EXPECT_EQ(live->load(), 0);
}

// A hint naming a transport this engine did not load fails that request
// alone; the requests around it, hinted to a loaded one, go through.
TEST_F(EngineBatchTest, AHintToATransportNotLoadedFailsOnlyItsRequest) {
    BatchID id = engine_->allocateBatch(4);
    ASSERT_NE(id, 0u);
    Request unloaded = request();
    unloaded.transport_hint = MPCOMM;
    ASSERT_TRUE(
        engine_->submitTransfer(id, {request(), unloaded, request()}).ok());
    std::vector<TransferStatus> list;
    ASSERT_TRUE(engine_->getTransferStatus(id, list).ok());
    ASSERT_EQ(list.size(), 3u);
    EXPECT_EQ(list[0].s, COMPLETED);
    EXPECT_EQ(list[1].s, FAILED);
    EXPECT_EQ(list[2].s, COMPLETED);
    // Two requests reached the transport, in one sub-batch.
    EXPECT_EQ(fake_->polls.load(), 2);
    EXPECT_TRUE(engine_->freeBatch(id).ok());
    EXPECT_EQ(fake_->frees.load(), 1);
    EXPECT_EQ(fake_->misuse.load(), 0);
}

// docs/reliability.md: "batch/free_timeout_ms of 0 or less refuses at
// once", the default is 10000, and the refusal names the key and value.
TEST_F(EngineBatchTest, AFreeTimeoutOfZeroOrLessRefusesAtOnce) {
    for (int ms : {0, -5}) {
        ASSERT_NO_FATAL_FAILURE(makeEngine(ms));
        BatchID id = 0;
        auto [s, took] = freeWithATaskPending(id);
        EXPECT_EQ(s.message(), refusedAfter(id, std::to_string(ms)));
        // At once: not after the 10 s default, nor a wait of any length.
        EXPECT_LT(took, std::chrono::milliseconds(2000)) << ms;
        EXPECT_TRUE(engine_->freeBatch(id).ok()) << "once the task is done";
    }
}

TEST_F(EngineBatchTest, TheFreeTimeoutDefaultsToTenSeconds) {
    ASSERT_NO_FATAL_FAILURE(makeEngine(kUnset));
    BatchID id = 0;
    auto [s, took] = freeWithATaskPending(id);
    EXPECT_EQ(s.message(), refusedAfter(id, "10000"));
    EXPECT_GE(took, std::chrono::milliseconds(10000));
    EXPECT_TRUE(engine_->freeBatch(id).ok());
}

}  // namespace
}  // namespace mooncake::tent
