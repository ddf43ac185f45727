// The Platform seam: the build's platform on host memory, the test
// override, location parsing, and registration learning where each buffer
// lives (the segment descriptor a peer reads carries it).
#include "tent/runtime/platform.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "kit/engine_config.h"
#include "kit/fake_device_platform.h"
#include "tent/runtime/memory_location.h"
#include "tent/transfer_engine.h"

namespace mooncake::tent {
namespace {

using testing::FakeDevicePlatform;
using testing::ScopedPlatform;

// The one local buffer's location as the descriptor publishes it.
std::string publishedLocation(TransferEngine& engine) {
    SegmentInfo info;
    EXPECT_TRUE(engine.getSegmentInfo(LOCAL_SEGMENT_ID, info).ok());
    EXPECT_EQ(info.buffers.size(), 1u);
    return info.buffers.empty() ? "" : info.buffers[0].location;
}

TEST(PlatformTest, TheBuildPlatformAllocatesCopiesAndLocatesHostMemory) {
    auto platform = defaultPlatform();
    void* a = nullptr;
    void* b = nullptr;
    ASSERT_TRUE(platform->allocate(&a, 8192, "cpu:0").ok());
    ASSERT_TRUE(platform->allocate(&b, 8192, kWildcardLocation).ok());
    std::memset(a, 0x5a, 8192);
    ASSERT_TRUE(platform->copy(b, a, 8192).ok());
    EXPECT_EQ(std::memcmp(a, b, 8192), 0);
    Location where;
    ASSERT_TRUE(platform->locate(b, 8192, where).ok());
    EXPECT_EQ(where.rfind("cpu:", 0), 0u) << where;
    EXPECT_FALSE(isDeviceMemoryLocation(where));
    EXPECT_TRUE(platform->free(a, 8192, "cpu:0").ok());
    EXPECT_TRUE(platform->free(b, 8192, kWildcardLocation).ok());
}

TEST(PlatformTest, ACpuBuildRefusesDeviceMemoryNamingTheBuildOption) {
#ifdef USE_CUDA
    GTEST_SKIP() << "built with USE_CUDA=ON: cuda:N is served by the CUDA "
                    "platform";
#else
    void* p = nullptr;
    Status s = defaultPlatform()->allocate(&p, 4096, "cuda:0");
    EXPECT_EQ(s, Status::NotImplemented(
                     "cannot allocate at location cuda:0: device memory "
                     "needs a build with USE_CUDA=ON"));
    EXPECT_EQ(p, nullptr);
#endif
}

TEST(PlatformTest, ACudaBuildServesDeviceMemoryOrNamesTheCallAndDevice) {
#ifndef USE_CUDA
    GTEST_SKIP() << "built with USE_CUDA=OFF: no CUDA platform to test";
#else
    auto platform = defaultPlatform();
    EXPECT_STREQ(platform->name(), "cuda");
    void* dev = nullptr;
    Status s = platform->allocate(&dev, 1 << 20, "cuda:0");
    if (!s.ok()) {
        // No device here: the error names the call, the device and CUDA's
        // own message, and host memory still locates as host memory.
        EXPECT_EQ(s.code(), Status::Code::kInternalError) << s;
        EXPECT_EQ(std::string(s.message())
                      .rfind("cudaSetDevice on cuda:0 failed: ", 0),
                  0u)
            << s;
        EXPECT_NE(std::string(s.message()).find("(error "), std::string::npos)
            << s;
        std::vector<char> host(64);
        Location where;
        ASSERT_TRUE(platform->locate(host.data(), host.size(), where).ok());
        EXPECT_EQ(where.rfind("cpu:", 0), 0u) << where;
        GTEST_SKIP() << "no usable CUDA device: " << s.message();
    }
    Location where;
    ASSERT_TRUE(platform->locate(dev, 1 << 20, where).ok());
    EXPECT_EQ(where, "cuda:0");
    std::vector<uint8_t> out(1 << 20), back(1 << 20);
    for (size_t i = 0; i < out.size(); ++i) out[i] = uint8_t(i * 7 + 1);
    ASSERT_TRUE(platform->copy(dev, out.data(), out.size()).ok());
    ASSERT_TRUE(platform->copy(back.data(), dev, back.size()).ok());
    EXPECT_EQ(out, back);
    EXPECT_TRUE(platform->free(dev, 1 << 20, "cuda:0").ok());
#endif
}

TEST(PlatformTest, TheTestOverrideIsUsedUntilReset) {
    auto fake = std::make_shared<FakeDevicePlatform>();
    {
        ScopedPlatform scoped(fake);
        EXPECT_EQ(currentPlatform(), fake);
    }
    EXPECT_EQ(currentPlatform(), defaultPlatform());
}

TEST(PlatformTest, LocationsParseOrNameTheBadValue) {
    MemoryLocation p;
    ASSERT_TRUE(parseMemoryLocation("cuda:3", &p).ok());
    EXPECT_TRUE(p.device());
    EXPECT_EQ(p.kind, MemoryLocationKind::kCuda);
    EXPECT_EQ(p.index, 3);
    ASSERT_TRUE(parseMemoryLocation("cpu:1", &p).ok());
    EXPECT_FALSE(p.device());
    EXPECT_EQ(p.index, 1);
    ASSERT_TRUE(parseMemoryLocation("*", &p).ok());
    EXPECT_TRUE(p.wildcard);
    for (const char* bad : {"gpu:0", "cuda:", "cuda:x", "cpu:-1", "cuda:70000",
                            "", "cuda", "rocm", "cpu:0:1", "CPU:0"}) {
        EXPECT_EQ(parseMemoryLocation(bad, &p),
                  Status::InvalidArgument(
                      std::string("location \"") + bad +
                      "\" is not one of \"*\", \"cpu\", \"cpu:<numa "
                      "node>\", \"cuda:<device>\", \"rocm:<device>\", "
                      "\"musa:<device>\", \"npu:<device>\""))
            << bad;
        EXPECT_TRUE(p.wildcard) << bad;
        EXPECT_FALSE(p.device()) << bad;
    }
    EXPECT_TRUE(isDeviceMemoryLocation("cuda:0"));
    EXPECT_TRUE(isDeviceMemoryLocation("rocm:0"));
    EXPECT_FALSE(isDeviceMemoryLocation("cpu:0"));
    EXPECT_FALSE(isDeviceMemoryLocation(kWildcardLocation));
    EXPECT_FALSE(isDeviceMemoryLocation("cudaish:0"));
}

TEST(PlatformTest, RegistrationPublishesTheLocationThePlatformFinds) {
    TransferEngine engine(testing::onlyTransport(TCP));
    ASSERT_TRUE(engine.available());
    std::vector<char> host(4096);
    ASSERT_TRUE(engine.registerLocalMemory(host.data(), host.size()).ok());
    std::string where = publishedLocation(engine);
    EXPECT_EQ(where.rfind("cpu:", 0), 0u) << where;
    ASSERT_TRUE(engine.unregisterLocalMemory(host.data()).ok());

    // The caller's NUMA node is kept: the platform may not know it.
    MemoryOptions options;
    options.location = "cpu:1";
    ASSERT_TRUE(
        engine.registerLocalMemory(host.data(), host.size(), options).ok());
    EXPECT_EQ(publishedLocation(engine), "cpu:1");
    ASSERT_TRUE(engine.unregisterLocalMemory(host.data()).ok());
}

TEST(PlatformTest, HostMemoryRegisteredAsDeviceMemoryIsRefusedNamingBoth) {
    TransferEngine engine(testing::onlyTransport(TCP));
    ASSERT_TRUE(engine.available());
    std::vector<char> host(4096);
    MemoryOptions options;
    options.location = "cuda:0";
    Status s = engine.registerLocalMemory(host.data(), host.size(), options);
    Location found;
    ASSERT_TRUE(
        currentPlatform()->locate(host.data(), host.size(), found).ok());
    std::string want = "cannot register buffer " +
                       testing::bufferText(host.data(), host.size()) +
                       " at location cuda:0: the " + defaultPlatform()->name() +
                       " platform locates it at " + found;
#ifndef USE_CUDA
    want += " (device memory needs a build with USE_CUDA=ON)";
#endif
    EXPECT_EQ(s, Status::InvalidArgument(want));

    options.location = "dram";
    EXPECT_EQ(engine.registerLocalMemory(host.data(), host.size(), options),
              Status::InvalidArgument(
                  "cannot register buffer " +
                  testing::bufferText(host.data(), host.size()) +
                  ": location \"dram\" is not one of \"*\", \"cpu\", "
                  "\"cpu:<numa node>\", \"cuda:<device>\", "
                  "\"rocm:<device>\", \"musa:<device>\", "
                  "\"npu:<device>\""));
    SegmentInfo info;
    ASSERT_TRUE(engine.getSegmentInfo(LOCAL_SEGMENT_ID, info).ok());
    EXPECT_TRUE(info.buffers.empty());
}

TEST(PlatformTest, DeviceMemoryOnTheWrongDeviceIsRefusedNamingBoth) {
    auto fake = std::make_shared<FakeDevicePlatform>();
    ScopedPlatform scoped(fake);
    TransferEngine engine(testing::onlyTransport(TCP));
    ASSERT_TRUE(engine.available());
    void* dev = nullptr;
    MemoryOptions at1;
    at1.location = "cuda:1";
    ASSERT_TRUE(engine.allocateLocalMemory(&dev, 4096, at1).ok());
    EXPECT_TRUE(fake->isDevice(dev));
    MemoryOptions at0;
    at0.location = "cuda:0";
    EXPECT_EQ(engine.registerLocalMemory(dev, 4096, at0),
              Status::InvalidArgument(
                  "cannot register buffer " + testing::bufferText(dev, 4096) +
                  " at location cuda:0: the fake-device platform locates "
                  "it at cuda:1"));
    EXPECT_TRUE(engine.freeLocalMemory(dev).ok());
    EXPECT_FALSE(fake->isDevice(dev));
}

// Device memory of one kind registered as another kind's, same index:
// the kinds must agree too, not only host versus device.
TEST(PlatformTest, DeviceMemoryOfAnotherKindIsRefusedNamingBoth) {
    auto fake = std::make_shared<FakeDevicePlatform>();
    ScopedPlatform scoped(fake);
    TransferEngine engine(testing::onlyTransport(TCP));
    ASSERT_TRUE(engine.available());
    std::vector<char> memory(4096);
    fake->adopt(memory.data(), memory.size(), "rocm:0");
    MemoryOptions options;
    options.location = "cuda:0";
    EXPECT_EQ(engine.registerLocalMemory(memory.data(), memory.size(), options),
              Status::InvalidArgument(
                  "cannot register buffer " +
                  testing::bufferText(memory.data(), memory.size()) +
                  " at location cuda:0: the fake-device platform locates "
                  "it at rocm:0"));
    options.location = "rocm:0";
    ASSERT_TRUE(
        engine.registerLocalMemory(memory.data(), memory.size(), options).ok());
    EXPECT_EQ(publishedLocation(engine), "rocm:0");
    EXPECT_TRUE(engine.unregisterLocalMemory(memory.data()).ok());
}

}  // namespace
}  // namespace mooncake::tent
