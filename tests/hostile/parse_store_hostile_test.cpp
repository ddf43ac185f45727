// Hostile values under a segment's key in a real redis-server and etcd:
// nested 1,002 deep (it killed a target starting under that name and an
// initiator opening it), 1,000,000 buffers (77 MB, accepted in ~5 s and
// 1.2 GiB), and counts just above and below metadata/max_segment_buffers.
// Each is refused by name or held in proportion to what it lists, and the
// engine then reads from a well-behaved target byte-exact.
#include <gmock/gmock.h>

#include <chrono>
#include <cstdio>

#include "hostile/parse_support.h"
#include "kit/log_capture.h"
#include "runtime/store_engine_support.h"

namespace mooncake::tent::testing {
namespace {

using ::testing::HasSubstr;

const std::string kDepthError = "JSON nesting depth " +
                                std::to_string(kProbeDepth) +
                                " exceeds rpc/max_json_depth=64";

// Bytes an opened segment may hold per buffer it lists (the descriptor in
// the segment cache and the fetcher's last-read copy); measured ~250.
constexpr uint64_t kHeldBytesPerBufferBound = 512;

class ParseStoreHostileTest : public StoreEngineTest {
 protected:
    static std::string keyOf(const std::string& name) {
        return "mooncake/tent/segments/" + name;
    }

    void put(const std::string& name, const std::string& value) {
        bool swapped = false;
        Status s = client_->compareAndSet(keyOf(name), "", value, swapped);
        ASSERT_TRUE(s.ok()) << s.ToString();
        ASSERT_TRUE(swapped);
    }

    Status open(const std::string& name) {
        SegmentID handle = 0;
        return engine_->openSegment(handle, name);
    }

    // engine_ (already started) opens a well-behaved target named `name`
    // and reads its buffer: pattern 7, byte-exact.
    void readGoodTarget(const std::string& name) {
        ASSERT_NO_FATAL_FAILURE(startTarget(target_, name, 7));
        Status s = engine_->openSegment(handle_, name);
        ASSERT_TRUE(s.ok()) << s.ToString();
        local_.assign(kBufferSize, 0);
        ASSERT_TRUE(
            engine_->registerLocalMemory(local_.data(), local_.size()).ok());
        ASSERT_EQ(readAll(target_.base()), COMPLETED);
        EXPECT_EQ(mismatch(7), kBufferSize);
        EXPECT_TRUE(engine_->unregisterLocalMemory(local_.data()).ok());
    }
};

// Finding 3: the probe's nesting under a segment key.
TEST_P(ParseStoreHostileTest, DeepValueUnderASegmentKeyIsRefusedByName) {
    const std::string bad = uniqueName("seg-deep");
    ASSERT_NO_FATAL_FAILURE(put(bad, std::string(kProbeDepth, '[')));

    // A target starting under that name is told what the record is.
    std::string why;
    EXPECT_EQ(second_.start(targetOptions(bad, 8), why),
              TargetProcess::Started::kFailed);
    EXPECT_THAT(why, HasSubstr("segment name " + bad +
                               " is held by an unknown holder (the record "
                               "is not a segment record: " +
                               kDepthError + ")"));

    // An initiator opening it gets the named error, and lives on.
    engine_ = startInitiator();
    ASSERT_TRUE(engine_->available());
    Status s = open(bad);
    EXPECT_THAT(
        std::string(s.message()),
        HasSubstr("key " + keyOf(bad) + " holds invalid JSON: " + kDepthError))
        << s.ToString();
    ASSERT_NO_FATAL_FAILURE(readGoodTarget(uniqueName("seg-good")));
}

// Records of the wrong shape under a segment's key: an array (jsoncpp's
// operator[] throws on it) and a holder whose fields have the wrong types
// (asString() and asInt64() throw on them). A target starting under the
// name is refused, naming what it found, and lives to report it.
TEST_P(ParseStoreHostileTest, WrongShapedRecordsAreRefusedWithoutThrowing) {
    const std::string array = uniqueName("seg-array");
    ASSERT_NO_FATAL_FAILURE(put(array, "[1]"));
    std::string why;
    EXPECT_EQ(second_.start(targetOptions(array, 8), why),
              TargetProcess::Started::kFailed);
    EXPECT_THAT(why, HasSubstr("segment name " + array +
                               " is held by an unknown holder (the record "
                               "is not a segment record: not a JSON "
                               "object)"));

    const std::string typed = uniqueName("seg-typed");
    ASSERT_NO_FATAL_FAILURE(
        put(typed,
            "{\"holder\":{\"pid\":\"1\",\"machine\":{},\"rpc\":[],"
            "\"incarnation\":7},\"segment\":[]}"));
    EXPECT_EQ(second_.start(targetOptions(typed, 8), why),
              TargetProcess::Started::kFailed);
    EXPECT_THAT(why, HasSubstr("segment name " + typed +
                               " is held by pid 0 on machine ? (rpc ?, "
                               "incarnation ?)"));
    engine_ = startInitiator();
    ASSERT_TRUE(engine_->available());
    Status s = open(typed);
    EXPECT_THAT(std::string(s.message()),
                HasSubstr("segment descriptor is not a JSON object"))
        << s.ToString();
    ASSERT_NO_FATAL_FAILURE(readGoodTarget(uniqueName("seg-good")));
}

// metadata/max_value_bytes on both stores, lowered to 1 KiB so that etcd
// (which stores at most 1.5 MiB) can hold values over it: 4 KiB is refused
// by its decoded size, 100 KiB as soon as the reply passes the base64 of
// the limit plus its envelope.
TEST_P(ParseStoreHostileTest,
       ValuesOverMaxValueBytesAreRefusedNamingTheirSize) {
    auto conf =
        storeEngineConfig(type_, server_->address(), "", xport_, kTestTtlMs);
    conf->set("metadata/max_value_bytes", 1024);
    engine_ = std::make_unique<TransferEngine>(conf);
    ASSERT_TRUE(engine_->available());

    const std::string small = uniqueName("seg-4k");
    ASSERT_NO_FATAL_FAILURE(put(small, std::string(4096, 'x')));
    Status s = open(small);
    EXPECT_THAT(std::string(s.message()),
                HasSubstr(type_ + " at " + server_->address() + ": value of " +
                          keyOf(small) +
                          " is 4096 bytes, above "
                          "metadata/max_value_bytes=1024"))
        << s.ToString();

    const std::string big = uniqueName("seg-100k");
    ASSERT_NO_FATAL_FAILURE(put(big, std::string(100 << 10, 'y')));
    s = open(big);
    const std::string expected =
        type_ == "redis"
            ? "redis at " + server_->address() + ": value of " + keyOf(big) +
                  " is 102400 bytes, above metadata/max_value_bytes=1024"
            : "etcd at " + server_->address() +
                  " (metadata/store_timeout_ms=3000) answered /v3/kv/range "
                  "with more than 66904 bytes (metadata/max_value_bytes=1024, "
                  "base64-encoded)";
    EXPECT_THAT(std::string(s.message()), HasSubstr(expected)) << s.ToString();
    EXPECT_TRUE(s.IsInvalidEntry()) << s.ToString();

    ASSERT_NO_FATAL_FAILURE(readGoodTarget(uniqueName("seg-good")));
}

// Finding 4: a descriptor of 1,000,000 buffers. Redis only: etcd refuses
// a request above 1.5 MiB itself (--max-request-bytes).
TEST_P(ParseStoreHostileTest,
       HugeDescriptorsAreRefusedQuicklyAndHeldInProportion) {
    if (type_ != "redis") {
        GTEST_SKIP() << "etcd stores no value above 1.5 MiB";
    }
    const std::string huge = uniqueName("seg-huge");
    size_t huge_bytes = 0;
    {
        const std::string value =
            "{\"segment\":" + descriptorWithBuffers(huge, 1000000) + "}";
        huge_bytes = value.size();
        ASSERT_GT(huge_bytes, 64u << 20);
        ASSERT_NO_FATAL_FAILURE(put(huge, value));
    }
    engine_ = startInitiator();
    ASSERT_TRUE(engine_->available());

    const bool peak_reset = resetPeakResident();
    const uint64_t rss_before = residentBytes();
    const auto start = std::chrono::steady_clock::now();
    LogCapture log;
    Status s = open(huge);
    const auto elapsed_ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(
            std::chrono::steady_clock::now() - start)
            .count();
    EXPECT_THAT(std::string(s.message()),
                HasSubstr("redis at " + server_->address() + ": value of " +
                          keyOf(huge) + " is " + std::to_string(huge_bytes) +
                          " bytes, above metadata/max_value_bytes=67108864"))
        << s.ToString();
    // Refused by its length before a byte of it is read; the store
    // answered, so no outage is reported.
    EXPECT_LT(elapsed_ms, 1000);
    EXPECT_EQ(log.countContaining("is unreachable"), 0);
    const uint64_t peak = residentBytes(peak_reset ? "VmHWM:" : "VmRSS:");
    std::printf("%zu-byte value refused in %lld ms, peak grew by %lld KiB\n",
                huge_bytes, static_cast<long long>(elapsed_ms),
                static_cast<long long>(peak - rss_before) / 1024);
    EXPECT_LT(peak, rss_before + kRssSlackBytes)
        << "VmHWM went from " << rss_before << " to " << peak;

    // Under the byte cap, one buffer too many: refused by count.
    const std::string wide = uniqueName("seg-wide");
    ASSERT_NO_FATAL_FAILURE(
        put(wide, "{\"segment\":" + descriptorWithBuffers(wide, 65537) + "}"));
    s = open(wide);
    EXPECT_THAT(std::string(s.message()),
                HasSubstr("segment descriptor lists 65537 buffers, above "
                          "metadata/max_segment_buffers=65536"))
        << s.ToString();

    // At the cap: accepted, and held in proportion to what it lists.
    const std::string full = uniqueName("seg-full");
    ASSERT_NO_FATAL_FAILURE(
        put(full, "{\"segment\":" + descriptorWithBuffers(full, 65536) + "}"));
    const uint64_t heap_before = heapInUse();
    s = open(full);
    ASSERT_TRUE(s.ok()) << s.ToString();
    const uint64_t held = heapInUse() - heap_before;
    const uint64_t per_buffer = held / 65536;
    std::printf(
        "opened segment of 65536 buffers holds %llu bytes (%llu per "
        "buffer)\n",
        static_cast<unsigned long long>(held),
        static_cast<unsigned long long>(per_buffer));
    RecordProperty("held_bytes_per_buffer", static_cast<int>(per_buffer));
    EXPECT_LT(per_buffer, kHeldBytesPerBufferBound);

    ASSERT_NO_FATAL_FAILURE(readGoodTarget(uniqueName("seg-good")));
}

INSTANTIATE_TEST_SUITE_P(Stores, ParseStoreHostileTest,
                         ::testing::Values(StoreCase{"redis", "tcp"},
                                           StoreCase{"etcd", "tcp"}),
                         [](const ::testing::TestParamInfo<StoreCase>& info) {
                             return std::get<0>(info.param);
                         });

}  // namespace
}  // namespace mooncake::tent::testing
