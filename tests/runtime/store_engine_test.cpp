// Engines that find each other through a real redis-server, etcd or HTTP
// metadata server: two processes, byte-exact transfers by segment name over
// tcp and (ON build) mpcomm, key expiry of a killed process, name
// collisions, a store outage and its end, and a target restarted under the
// same name.
#include <vector>

#include "kit/log_capture.h"
#include "kit/wait_until.h"
#include "runtime/store_engine_support.h"

namespace mooncake::tent::testing {
namespace {

using Clock = std::chrono::steady_clock;

int64_t msSince(Clock::time_point start) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() -
                                                                 start)
        .count();
}

TEST_P(StoreEngineTest, FindsTheTargetByNameAndMovesBytesExactly) {
    const std::string name = uniqueName("seg-find");
    // Opened by name and read once: pattern 7, byte-exact.
    startPair(name);
    EXPECT_TRUE(keyPresent(engine_->getSegmentName()));

    SegmentInfo info;
    ASSERT_TRUE(engine_->getSegmentInfo(handle_, info).ok());
    ASSERT_EQ(info.buffers.size(), 1u);
    EXPECT_EQ(info.buffers[0].base, target_.base());
    EXPECT_EQ(info.buffers[0].length, kBufferSize);

    // A WRITE of another pattern into the second half, read back.
    const size_t half = kBufferSize / 2;
    fillPattern(local_.data(), half, 9);
    ASSERT_EQ(transfer(Request::WRITE, 0, target_.base() + half, half),
              COMPLETED);
    ASSERT_EQ(readAll(target_.base()), COMPLETED);
    EXPECT_EQ(firstMismatch(local_.data(), half, 7), half);
    EXPECT_EQ(firstMismatch(local_.data() + half, half, 9), half);
    EXPECT_TRUE(engine_->unregisterLocalMemory(local_.data()).ok());

    // An engine that stops takes its key with it at once, long before
    // its TTL would: the target exiting cleanly, and the initiator.
    std::string why;
    ASSERT_TRUE(target_.finish(why)) << why;
    EXPECT_FALSE(keyPresent(name)) << "the target's key outlived it";
    const std::string initiator = engine_->getSegmentName();
    engine_.reset();
    EXPECT_FALSE(keyPresent(initiator)) << "the initiator's key outlived it";
}

TEST_P(StoreEngineTest, KilledTargetsKeyLapsesWithinItsTtl) {
    const std::string name = uniqueName("seg-expire");
    startTarget(target_, name, 7);
    ASSERT_TRUE(keyPresent(name));
    target_.kill();
    const auto killed = Clock::now();
    // The TTL, plus etcd's expiry sweep (every 0.5 s) and slack.
    ASSERT_TRUE(waitUntil([&] { return !keyPresent(name); },
                          std::chrono::milliseconds(kTestTtlMs + 3000)));
    const int64_t elapsed = msSince(killed);
    EXPECT_LE(elapsed, kTestTtlMs + 1500) << "key of " << name;
    // A new initiator cannot open it, and is told why.
    auto engine = startInitiator();
    SegmentID handle = 0;
    Status s = engine->openSegment(handle, name);
    EXPECT_EQ(s.message(), "cannot open segment " + name + ": segment " + name +
                               " is not published in the " + type_ +
                               " metadata store at " + server_->address() +
                               " (key mooncake/tent/segments/" + name +
                               ": no process holds that name)");
}

TEST_P(StoreEngineTest, NameHeldByALiveProcessIsRefusedNamingTheHolder) {
    const std::string name = uniqueName("seg-taken");
    startTarget(target_, name, 7);
    std::string error;
    EXPECT_EQ(second_.start(targetOptions(name, 8), error),
              TargetProcess::Started::kFailed);
    const std::string expected_start =
        "TransferEngine is not available: segment name " + name +
        " is held by pid " + std::to_string(target_.pid()) + " on machine ";
    EXPECT_EQ(error.substr(0, expected_start.size()), expected_start) << error;
    EXPECT_NE(error.find(" in the " + type_ + " metadata store at " +
                         server_->address() + " (key mooncake/tent/segments/" +
                         name + "); choose another local_segment_name"),
              std::string::npos)
        << error;
    // The holder still serves: opened by name and read, pattern 7.
    openTarget(name, kLongCacheTtlMs);
}

TEST_P(StoreEngineTest, OutageKeepsCachedTransfersAndRestartRepublishes) {
    const std::string name = uniqueName("seg-outage");
    // A short cache, so that the outage outlives it: transfers then go
    // on with the last descriptor read.
    constexpr int kCacheTtlMs = 200;
    startPair(name, kCacheTtlMs);

    LogCapture log;
    server_->stop();
    const std::string warning = type_ + " metadata store at " +
                                server_->address() + " is unreachable (";
    // Transfers for five cache lifetimes and at least one failed renewal.
    const auto start = Clock::now();
    int rounds = 0;
    while (msSince(start) < 5 * kCacheTtlMs ||
           log.countContaining(warning) == 0) {
        ASSERT_LT(msSince(start), 20000) << "no WARNING after 20 s";
        ASSERT_EQ(readAll(target_.base()), COMPLETED) << "round " << rounds;
        ASSERT_EQ(mismatch(7), kBufferSize);
        ++rounds;
    }
    EXPECT_EQ(log.countContaining(warning), 1) << "one WARNING per outage";

    // Restarted empty: whatever is found now was published again.
    Status s = server_->restart(/*wipe=*/true);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_TRUE(waitUntil([&] { return keyPresent(name); }))
        << "the target did not publish again";
    EXPECT_TRUE(waitUntil([&] {
        return keyPresent(engine_->getSegmentName());
    })) << "the initiator did not publish again";
    EXPECT_TRUE(waitUntil([&] {
        return log.countContaining(type_ + " metadata store at " +
                                   server_->address() +
                                   " is reachable again") == 1;
    }));
    // A new engine finds the target by name.
    auto fresh = startInitiator();
    SegmentID fresh_handle = 0;
    ASSERT_TRUE(fresh->openSegment(fresh_handle, name).ok());
    std::vector<uint8_t> other(kBufferSize);
    ASSERT_TRUE(fresh->registerLocalMemory(other.data(), other.size()).ok());
    ASSERT_EQ(transferOnce(*fresh, Request::READ, other.data(), fresh_handle,
                           target_.base(), kBufferSize),
              COMPLETED);
    EXPECT_EQ(firstMismatch(other.data(), kBufferSize, 7), kBufferSize);
    EXPECT_EQ(log.countContaining(warning), 1);
}

TEST_P(StoreEngineTest, TargetRestartedUnderTheSameNameIsReadAgain) {
    const std::string name = uniqueName("seg-restart");
    // The documented bound: one cache lifetime plus a store read (tcp);
    // mpcomm re-reads on the first failed transfer.
    constexpr int kCacheTtlMs = 500;
    startPair(name, kCacheTtlMs);

    target_.kill();
    // Same machine, holder gone: the name is taken over at once.
    startTarget(target_, name, 8);
    const auto restarted = Clock::now();
    bool read_again = false;
    int failed = 0;
    while (msSince(restarted) < kCacheTtlMs + 5000) {
        if (readAll(target_.base()) == COMPLETED &&
            mismatch(8) == kBufferSize) {
            read_again = true;
            break;
        }
        ++failed;
    }
    ASSERT_TRUE(read_again) << "after " << failed << " failed reads";
    EXPECT_LE(msSince(restarted), kCacheTtlMs + 2000) << failed << " failed";
    // And a WRITE lands byte-exact on the new process.
    fillPattern(local_.data(), kBufferSize, 11);
    ASSERT_EQ(transfer(Request::WRITE, 0, target_.base(), kBufferSize),
              COMPLETED);
    ASSERT_EQ(readAll(target_.base()), COMPLETED);
    EXPECT_EQ(mismatch(11), kBufferSize);
}

TEST_P(StoreEngineTest, BufferRegisteredAgainAtTheSameAddressIsReadAgain) {
    const std::string name = uniqueName("seg-rereg");
    constexpr int kCacheTtlMs = 500;
    startPair(name, kCacheTtlMs);
    // The base address and length do not change on a re-registration; the
    // registration epoch does (one step for the unregister, one for the
    // register), so only the epoch tells a republished descriptor from the
    // one published at start.
    SegmentDesc before;
    ASSERT_NO_FATAL_FAILURE(storedSegment(name, before));
    ASSERT_EQ(before.getMemory().buffers.size(), 1u);
    EXPECT_EQ(before.getMemory().buffers[0].addr, target_.base());

    // A seed that is not a byte is refused, naming it; nothing changes,
    // in the target's memory or in the store.
    EXPECT_EQ(target_.ask("rereg 256"),
              "bad seed \"256\": want an integer in [0, 255]");
    ASSERT_EQ(readAll(target_.base()), COMPLETED);
    EXPECT_EQ(mismatch(7), kBufferSize);
    SegmentDesc refused;
    ASSERT_NO_FATAL_FAILURE(storedSegment(name, refused));
    EXPECT_EQ(refused.registration_epoch, before.registration_epoch);

    // Registered again, with pattern 8, before the answer comes back.
    ASSERT_EQ(target_.ask("rereg 8"), "ok");
    const auto reregistered = Clock::now();
    // In the store already (the registration waited for the write): the
    // same process, the same single buffer, two epochs later. Read at
    // once, not polled: a later write would not be what the call waited
    // for.
    SegmentDesc after;
    ASSERT_NO_FATAL_FAILURE(storedSegment(name, after));
    EXPECT_EQ(after.incarnation, before.incarnation);
    EXPECT_EQ(after.registration_epoch, before.registration_epoch + 2)
        << "the re-registration was not republished";
    ASSERT_EQ(after.getMemory().buffers.size(), 1u);
    EXPECT_EQ(after.getMemory().buffers[0].addr, target_.base());
    EXPECT_EQ(after.getMemory().buffers[0].length, kBufferSize);
    // And what the initiator reads from the store now says the same.
    SegmentInfo info;
    ASSERT_TRUE(engine_->getSegmentInfo(handle_, info).ok());
    ASSERT_EQ(info.buffers.size(), 1u);
    EXPECT_EQ(info.buffers[0].base, target_.base());
    EXPECT_EQ(info.buffers[0].length, kBufferSize);
    // The same bound as a restart: one cache lifetime plus a store read.
    bool read_again = false;
    int failed = 0;
    while (msSince(reregistered) < kCacheTtlMs + 5000) {
        if (readAll(target_.base()) == COMPLETED &&
            mismatch(8) == kBufferSize) {
            read_again = true;
            break;
        }
        ++failed;
    }
    ASSERT_TRUE(read_again) << "after " << failed << " failed reads";
    EXPECT_LE(msSince(reregistered), kCacheTtlMs + 2000) << failed << " failed";
}

TEST_P(StoreEngineTest, UnreachableStoreAtStartIsAnErrorNamingTheServers) {
    const std::string servers = "127.0.0.1:" + std::to_string(freeTcpPort());
    auto conf = storeEngineConfig(type_, servers, "", xport_, kTestTtlMs);
    conf->set("metadata/store_timeout_ms", 500);
    TransferEngine engine(conf);
    ASSERT_FALSE(engine.available());
    SegmentID handle = 0;
    Status s = engine.openSegment(handle, "x");
    const std::string expected =
        "TransferEngine is not available: cannot "
        "reach the " +
        type_ + " metadata store at " + servers + ": ";
    EXPECT_EQ(std::string(s.message()).substr(0, expected.size()), expected)
        << s.message();
    EXPECT_NE(s.message().find("metadata/store_timeout_ms=500"),
              std::string::npos)
        << s.message();
}

std::vector<StoreCase> cases() {
    std::vector<StoreCase> out;
    for (const char* store : {"redis", "etcd", "http"}) {
        out.emplace_back(store, "tcp");
#ifdef TENT_HAVE_MPCOMM
        out.emplace_back(store, "mpcomm");
#endif
    }
    return out;
}

INSTANTIATE_TEST_SUITE_P(Stores, StoreEngineTest, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<StoreCase>& info) {
                             return std::get<0>(info.param) + "_" +
                                    std::get<1>(info.param);
                         });

}  // namespace
}  // namespace mooncake::tent::testing
