// The shm mapping cache (bound 32 per target, pins), the object probe and
// names, routing (same machine and same user only) and shm_path in the
// descriptor JSON.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include "kit/request_builder.h"
#include "tent/runtime/segment.h"
#include "tent/runtime/transport_selector.h"
#include "transport/shm/shm_mapping_cache.h"
#include "transport/shm/shm_object.h"

namespace mooncake::tent::testing {
namespace {

std::vector<std::unique_ptr<ShmObject>> createObjects(size_t n) {
    std::vector<std::unique_ptr<ShmObject>> objects(n);
    for (auto& o : objects) EXPECT_TRUE(ShmObject::create(4096, o).ok());
    return objects;
}

TEST(ShmMappingCacheTest, HoldsAtMost32PerTargetEvictingTheLeastRecent) {
    auto objects = createObjects(40);
    ShmMappingCache cache;
    for (auto& o : objects) {
        ShmMappingCache::Pin pin;
        ASSERT_TRUE(cache.acquire(1, o->name(), 4096, pin).ok());
    }
    EXPECT_EQ(cache.mapped(1), 32u);
    EXPECT_EQ(cache.stats().opens, 40u);
    EXPECT_EQ(cache.stats().evictions, 8u);
    ShmMappingCache::Pin pin;
    // The most recent is still mapped; the first was evicted.
    ASSERT_TRUE(cache.acquire(1, objects[39]->name(), 4096, pin).ok());
    EXPECT_EQ(cache.stats().opens, 40u);
    ASSERT_TRUE(cache.acquire(1, objects[0]->name(), 4096, pin).ok());
    EXPECT_EQ(cache.stats().opens, 41u);
    // Another target has a bound of its own.
    ASSERT_TRUE(cache.acquire(2, objects[0]->name(), 4096, pin).ok());
    EXPECT_EQ(cache.mapped(2), 1u);
    EXPECT_EQ(cache.mapped(1), 32u);
}

TEST(ShmMappingCacheTest, PinnedMappingsAreNeverEvicted) {
    auto objects = createObjects(34);
    ShmMappingCache cache;
    std::vector<ShmMappingCache::Pin> pins(33);
    for (size_t i = 0; i < 33; ++i) {
        ASSERT_TRUE(cache.acquire(1, objects[i]->name(), 4096, pins[i]).ok());
    }
    // Every mapping was pinned when the 33rd came: the bound is exceeded.
    EXPECT_EQ(cache.mapped(1), 33u);
    EXPECT_EQ(cache.stats().evictions, 0u);
    pins.clear();
    ShmMappingCache::Pin pin;
    ASSERT_TRUE(cache.acquire(1, objects[33]->name(), 4096, pin).ok());
    EXPECT_EQ(cache.mapped(1), 32u);
    EXPECT_EQ(cache.stats().evictions, 2u);
}

TEST(ShmMappingCacheTest, ADroppedMappingStaysUsableWhilePinned) {
    auto objects = createObjects(1);
    ShmMappingCache cache;
    ShmMappingCache::Pin pin;
    ASSERT_TRUE(cache.acquire(1, objects[0]->name(), 4096, pin).ok());
    cache.drop(1, objects[0]->name());
    EXPECT_EQ(cache.mapped(1), 0u);
    EXPECT_EQ(cache.stats().drops, 1u);
    std::memset(pin->addr(), 0x6B, 4096);
    EXPECT_EQ(static_cast<unsigned char*>(objects[0]->addr())[4095], 0x6B);
}

TEST(ShmObjectTest, ProbeTellsLiveUnlinkedReplacedAndOrphaned) {
    std::unique_ptr<ShmObject> created;
    ASSERT_TRUE(ShmObject::create(8192, created).ok());
    const std::string name = created->name();
    std::unique_ptr<ShmObject> mapped;
    ASSERT_TRUE(ShmObject::open(name, 8192, mapped).ok());
    EXPECT_EQ(mapped->probe(), ShmObject::Probe::kLive);
    created.reset();  // unmapped, unlinked, lock released
    EXPECT_EQ(mapped->probe(), ShmObject::Probe::kUnlinked);

    // The same name made again by someone else, without the creator's
    // lock: first a different object, then an orphan once mapped.
    int fd = shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(ftruncate(fd, 8192), 0);
    close(fd);
    EXPECT_EQ(mapped->probe(), ShmObject::Probe::kReplaced);
    std::unique_ptr<ShmObject> orphan;
    ASSERT_TRUE(ShmObject::open(name, 8192, orphan).ok());
    EXPECT_EQ(orphan->probe(), ShmObject::Probe::kCreatorGone);
    shm_unlink(name.c_str());
}

TEST(ShmObjectTest, NamesAreMooncakePidAndEightHexDigits) {
    EXPECT_TRUE(ShmObject::validName("/mooncake_123_0a1b2c3d"));
    EXPECT_EQ(ShmObject::creatorPid("/mooncake_123_0a1b2c3d"), 123);
    for (const char* bad :
         {"/mooncake_123_0A1B2C3D", "/mooncake__0a1b2c3d",
          "/mooncake_12x_0a1b2c3d", "/other_1_0a1b2c3d", "/mooncake_1_0a1b2c3",
          "/mooncake_1_0a1b2c3d/../x", "mooncake_1_0a1b2c3d"}) {
        EXPECT_FALSE(ShmObject::validName(bad)) << bad;
    }
    std::unique_ptr<ShmObject> out;
    Status s = ShmObject::open("/etc/passwd", 4096, out);
    EXPECT_EQ(s.message(),
              "shm: object name \"/etc/passwd\" is not of the form "
              "/mooncake_<pid>_<8 hex digits>");
}

TEST(ShmObjectTest, AShorterObjectThanRegisteredIsRefused) {
    std::unique_ptr<ShmObject> created;
    ASSERT_TRUE(ShmObject::create(4096, created).ok());
    std::unique_ptr<ShmObject> out;
    Status s = ShmObject::open(created->name(), 8192, out);
    EXPECT_EQ(s.message(), "shm: " + created->name() +
                               " holds 4096 bytes, fewer than the 8192 the "
                               "peer registered");
}

TEST(ShmRoutingTest, ShmOnlyForTheSameMachineAndUser) {
    TransportSelector selector;
    selector.setLoaded({SHM, TCP});
    const std::vector<TransportType> order = {SHM, TCP};
    Request r = makeRequest(Request::WRITE, nullptr, 1, 0x10100, 0x100);
    RouteContext context;
    context.segment_name = "peer";
    context.buffer_transports = &order;
    TransportType chosen = UNSPEC;

    context.same_machine = true;
    context.same_user = true;
    ASSERT_TRUE(selector.select(r, context, chosen).ok());
    EXPECT_EQ(chosen, SHM);

    context.same_user = false;
    ASSERT_TRUE(selector.select(r, context, chosen).ok());
    EXPECT_EQ(chosen, TCP);
    r.transport_hint = SHM;
    Status s = selector.select(r, context, chosen);
    EXPECT_EQ(s.message(),
              "transport_hint shm cannot carry local * -> remote * (segment "
              "peer): shm: the target runs as another user");

    context.same_machine = false;
    context.same_user = true;
    r.transport_hint = UNSPEC;
    ASSERT_TRUE(selector.select(r, context, chosen).ok());
    EXPECT_EQ(chosen, TCP);
}

TEST(ShmDescriptorTest, ShmPathRoundTripsAndIsOptional) {
    SegmentDesc desc = oneBufferSegment("peer", {SHM, TCP});
    Json::Value plain = segmentToJson(desc);
    EXPECT_FALSE(plain["buffers"][0].isMember("shm_path"));
    SegmentDesc parsed;
    ASSERT_TRUE(segmentFromJson(plain, parsed).ok());
    EXPECT_EQ(parsed.getMemory().buffers[0].shm_path, "");

    desc.getMemory().buffers[0].shm_path = "/mooncake_42_00ff00ff";
    Json::Value with = segmentToJson(desc);
    EXPECT_EQ(with["buffers"][0]["shm_path"].asString(),
              "/mooncake_42_00ff00ff");
    ASSERT_TRUE(segmentFromJson(with, parsed).ok());
    EXPECT_EQ(parsed.getMemory().buffers[0].shm_path, "/mooncake_42_00ff00ff");

    with["buffers"][0]["shm_path"] = 7;
    Status s = segmentFromJson(with, parsed);
    EXPECT_EQ(s.message(),
              "segment descriptor field buffers[0].shm_path is not a string");
}

}  // namespace
}  // namespace mooncake::tent::testing
