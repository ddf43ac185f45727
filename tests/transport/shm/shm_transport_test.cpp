// tent_shm_transport_test: the shm transport's rules (docs/shm.md) through
// the engine and through ShmTransport itself: object names and mode,
// shm-backed allocation, prefix registrations versus refused sub-ranges
// and overflows, malloc'd memory left to the other transports, and a stale
// mapping dropped with exactly one descriptor re-read.
#include "tent/transport/shm/shm_transport.h"

#include <dirent.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <regex>
#include <set>
#include <sstream>

#include "kit/descriptor_fetcher.h"
#include "kit/request_builder.h"
#include "kit/two_process_fixture.h"
#include "tent/runtime/control_plane.h"
#include "tent/runtime/segment_manager.h"
#include "tent/transfer_engine.h"

namespace mooncake::tent::testing {
namespace {

// This process's objects in /dev/shm, without the leading '/'.
std::set<std::string> ownObjects() {
    std::set<std::string> names;
    const std::string prefix = "mooncake_" + std::to_string(getpid()) + "_";
    DIR* dir = opendir("/dev/shm");
    if (!dir) return names;
    while (dirent* e = readdir(dir)) {
        std::string n = e->d_name;
        if (n.compare(0, prefix.size(), prefix) == 0) names.insert(n);
    }
    closedir(dir);
    return names;
}

std::string hexOf(const void* p) {
    std::ostringstream os;
    os << "0x" << std::hex << reinterpret_cast<uint64_t>(p);
    return os.str();
}

std::unique_ptr<TransferEngine> shmEngine(bool with_tcp) {
    auto conf = onlyTransport(SHM);
    conf->set("transports/tcp/enable", with_tcp);
    auto engine = std::make_unique<TransferEngine>(conf);
    EXPECT_TRUE(engine->available());
    EXPECT_TRUE(hasTransport(*engine, SHM));
    return engine;
}

TEST(ShmEngineTest, SharedMemoryIsA0600ObjectNamedForThisPid) {
    auto engine = shmEngine(false);
    const std::set<std::string> before = ownObjects();
    void* p = nullptr;
    ASSERT_TRUE(engine->allocateSharedMemory(&p, 1u << 20).ok());
    std::set<std::string> added;
    for (const std::string& n : ownObjects()) {
        if (!before.count(n)) added.insert(n);
    }
    ASSERT_EQ(added.size(), 1u);
    const std::string name = *added.begin();
    EXPECT_TRUE(std::regex_match(
        name,
        std::regex("mooncake_" + std::to_string(getpid()) + "_[0-9a-f]{8}")))
        << name;
    struct stat st;
    ASSERT_EQ(stat(("/dev/shm/" + name).c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0600u);
    EXPECT_EQ(st.st_uid, geteuid());
    EXPECT_EQ(st.st_size, 1 << 20);
    // The mapping is the object: bytes written here are in the file.
    std::memset(p, 0x5A, 1u << 20);
    ASSERT_TRUE(engine->freeSharedMemory(p).ok());
    EXPECT_EQ(stat(("/dev/shm/" + name).c_str(), &st), -1);
    EXPECT_EQ(ownObjects(), before);
}

TEST(ShmEngineTest, HostAllocationsAreSharedWhenShmIsLoaded) {
    auto engine = shmEngine(true);
    const size_t before = ownObjects().size();
    void* p = nullptr;
    ASSERT_TRUE(engine->allocateLocalMemory(&p, 4096, "cpu").ok());
    EXPECT_EQ(ownObjects().size(), before + 1);
    ASSERT_TRUE(engine->freeLocalMemory(p).ok());
    EXPECT_EQ(ownObjects().size(), before);
}

TEST(ShmEngineTest, SharedMemoryNeedsTheShmTransport) {
    TransferEngine engine(onlyTransport(TCP));
    void* p = nullptr;
    Status s = engine.allocateSharedMemory(&p, 4096);
    EXPECT_EQ(s.message(),
              "allocateSharedMemory: the shm transport is not loaded (set "
              "transports/shm/enable to true)");
    EXPECT_EQ(p, nullptr);
}

TEST(ShmEngineTest, FreeSharedMemoryRefusesOtherMemory) {
    auto engine = shmEngine(true);
    int local = 0;
    Status s = engine->freeSharedMemory(&local);
    EXPECT_EQ(s.message(), "freeSharedMemory: " + hexOf(&local) +
                               " was not allocated by allocateSharedMemory");
}

TEST(ShmEngineTest, PrefixRegistersSubRangeAndOverflowAreRefused) {
    auto engine = shmEngine(true);
    void* p = nullptr;
    ASSERT_TRUE(engine->allocateSharedMemory(&p, 65536).ok());
    const std::set<std::string> names = ownObjects();
    char* base = static_cast<char*>(p);

    Status sub = engine->registerLocalMemory(base + 4096, 4096);
    ASSERT_FALSE(sub.ok());
    const std::string sub_text(sub.message());
    EXPECT_NE(
        sub_text.find("shm transport cannot register [" + hexOf(base + 4096) +
                      ", +0x1000): a sub-range of shared allocation "
                      "/mooncake_" +
                      std::to_string(getpid()) + "_"),
        std::string::npos)
        << sub_text;
    EXPECT_NE(sub_text.find(" at " + hexOf(base) + " (length 65536)"),
              std::string::npos)
        << sub_text;

    Status over = engine->registerLocalMemory(base, 131072);
    ASSERT_FALSE(over.ok());
    const std::string over_text(over.message());
    EXPECT_NE(over_text.find("shm transport cannot register [" + hexOf(base) +
                             ", +0x20000): it overflows shared allocation"),
              std::string::npos)
        << over_text;
    EXPECT_NE(over_text.find("(length 65536) by 65536 bytes"),
              std::string::npos)
        << over_text;

    // Neither refusal left a registration behind: the prefix registers
    // once, and a second time is refused as a duplicate.
    ASSERT_TRUE(engine->registerLocalMemory(base, 32768).ok());
    EXPECT_FALSE(engine->registerLocalMemory(base, 32768).ok());
    ASSERT_TRUE(engine->unregisterLocalMemory(base, 32768).ok());
    ASSERT_TRUE(engine->freeSharedMemory(p).ok());
}

// Two ShmTransports in this process, each over its own SegmentManager; the
// importer resolves the exporter's name through a counting fetcher.
class ShmPairTest : public ::testing::Test {
 protected:
    void SetUp() override {
        fetcher_ = std::make_shared<DescriptorFetcher>();
        exporter_sm_ = std::make_shared<SegmentManager>("exporter", fetcher_);
        importer_sm_ = std::make_shared<SegmentManager>("importer", fetcher_);
        fetcher_->add("exporter", exporter_sm_);
        std::string name = "exporter";
        ASSERT_TRUE(exporter_
                        .install(name,
                                 std::make_shared<ControlService>(exporter_sm_),
                                 nullptr, nullptr)
                        .ok());
        name = "importer";
        ASSERT_TRUE(importer_
                        .install(name,
                                 std::make_shared<ControlService>(importer_sm_),
                                 nullptr, nullptr)
                        .ok());
    }

    // Opened once the exporter has published what the test needs: the
    // importer reads the descriptor then, and keeps it cached.
    void openTarget() {
        ASSERT_TRUE(importer_sm_->openRemote(target_, "exporter").ok());
    }

    void TearDown() override {
        for (void* p : exported_) exporter_.freeLocalMemory(p, 0);
    }

    // Allocates and publishes one shared buffer of `size` bytes.
    void* exportBuffer(size_t size) {
        void* p = nullptr;
        MemoryOptions options;
        EXPECT_TRUE(exporter_.allocateLocalMemory(&p, size, options).ok());
        BufferDesc desc;
        desc.addr = reinterpret_cast<uint64_t>(p);
        desc.length = size;
        desc.location = "cpu";
        EXPECT_TRUE(exporter_.addMemoryBuffer(desc, options).ok());
        EXPECT_EQ(desc.shm_path, exporter_.objectNameOf(p));
        EXPECT_TRUE(exporter_sm_
                        ->updateLocal([&](SegmentDesc& seg) {
                            seg.getMemory().buffers.push_back(desc);
                            return Status::OK();
                        })
                        .ok());
        EXPECT_TRUE(exporter_sm_->synchronizeLocal().ok());
        exported_.insert(p);
        return p;
    }

    void unexport(void* p) {
        EXPECT_TRUE(exporter_sm_
                        ->updateLocal([&](SegmentDesc& seg) {
                            seg.getMemory().buffers.clear();
                            return Status::OK();
                        })
                        .ok());
        EXPECT_TRUE(exporter_sm_->synchronizeLocal().ok());
        EXPECT_TRUE(exporter_.freeLocalMemory(p, 0).ok());
        exported_.erase(p);
    }

    TransferStatusEnum write(void* source, void* target, size_t length) {
        Transport::SubBatchRef batch = nullptr;
        EXPECT_TRUE(importer_.allocateSubBatch(batch, 1).ok());
        Request r = makeRequest(Request::WRITE, source, target_,
                                reinterpret_cast<uint64_t>(target), length);
        EXPECT_TRUE(importer_.submitTransferTasks(batch, {r}).ok());
        TransferStatus status;
        EXPECT_TRUE(importer_.getTransferStatus(batch, 0, status).ok());
        importer_.freeSubBatch(batch);
        return status.s;
    }

    std::shared_ptr<DescriptorFetcher> fetcher_;
    std::shared_ptr<SegmentManager> exporter_sm_;
    std::shared_ptr<SegmentManager> importer_sm_;
    ShmTransport exporter_;
    ShmTransport importer_;
    SegmentID target_ = 0;
    std::set<void*> exported_;
};

TEST_F(ShmPairTest, MallocMemoryIsLeftToTheOtherTransports) {
    std::vector<char> plain(4096);
    BufferDesc desc;
    desc.addr = reinterpret_cast<uint64_t>(plain.data());
    desc.length = plain.size();
    ASSERT_TRUE(exporter_.addMemoryBuffer(desc, MemoryOptions()).ok());
    EXPECT_TRUE(desc.transports.empty());
    EXPECT_EQ(desc.shm_path, "");
}

TEST_F(ShmPairTest, WritesLandByteExactInThePeersObject) {
    constexpr size_t kSize = 1u << 20;
    char* x = static_cast<char*>(exportBuffer(kSize));
    openTarget();
    std::vector<char> src(kSize);
    for (size_t i = 0; i < kSize; ++i) src[i] = static_cast<char>(i * 7 + 3);
    ASSERT_EQ(write(src.data(), x, kSize), COMPLETED);
    EXPECT_EQ(std::memcmp(x, src.data(), kSize), 0);
    // A range one byte past the buffer fails and touches nothing.
    EXPECT_EQ(write(src.data(), x + 1, kSize), FAILED);
    EXPECT_EQ(importer_.mappedObjects(target_), 1u);
    EXPECT_EQ(importer_.refetches(), 0u);
}

// Recycled with its capacity, a sub-batch is emptied in place (the
// engine's path from one batch of a slot to the next); another capacity
// gets one of that capacity.
TEST_F(ShmPairTest, ARecycledSubBatchIsEmptiedInPlace) {
    constexpr size_t kSize = 4096;
    char* x = static_cast<char*>(exportBuffer(kSize));
    openTarget();
    std::vector<char> src(kSize, 0x33);
    Request r = makeRequest(Request::WRITE, src.data(), target_,
                            reinterpret_cast<uint64_t>(x), kSize);
    Transport::SubBatchRef batch = nullptr;
    ASSERT_TRUE(importer_.allocateSubBatch(batch, 2).ok());
    ASSERT_TRUE(importer_.submitTransferTasks(batch, {r, r}).ok());
    Transport::SubBatchRef before = batch;
    ASSERT_TRUE(importer_.recycleSubBatch(batch, 2).ok());
    EXPECT_EQ(batch, before);
    EXPECT_EQ(batch->size(), 0u);
    ASSERT_TRUE(importer_.submitTransferTasks(batch, {r, r}).ok());
    TransferStatus status;
    ASSERT_TRUE(importer_.getTransferStatus(batch, 1, status).ok());
    EXPECT_EQ(status.s, COMPLETED);
    EXPECT_TRUE(importer_.submitTransferTasks(batch, {r}).IsTooManyRequests());
    ASSERT_TRUE(importer_.recycleSubBatch(batch, 3).ok());
    ASSERT_NE(batch, nullptr);
    EXPECT_EQ(batch->size(), 0u);
    EXPECT_TRUE(importer_.submitTransferTasks(batch, {r, r, r}).ok());
    EXPECT_TRUE(importer_.freeSubBatch(batch).ok());
}

// A failed task's request is kept for the engine's failover, as it was
// submitted; a completed task keeps none, and a recycled sub-batch
// forgets them.
TEST_F(ShmPairTest, AFailedTasksRequestIsGivenBackAsSubmitted) {
    constexpr size_t kSize = 4096;
    char* x = static_cast<char*>(exportBuffer(kSize));
    openTarget();
    EXPECT_TRUE(importer_.keepsTaskRequests());
    std::vector<char> src(kSize, 0x5a);
    Request good = makeRequest(Request::WRITE, src.data(), target_,
                               reinterpret_cast<uint64_t>(x), kSize);
    Request past = makeRequest(Request::WRITE, src.data(), target_,
                               reinterpret_cast<uint64_t>(x) + 1, kSize);
    past.transport_hint = SHM;
    past.priority = 7;
    Transport::SubBatchRef batch = nullptr;
    ASSERT_TRUE(importer_.allocateSubBatch(batch, 2).ok());
    ASSERT_TRUE(importer_.submitTransferTasks(batch, {good, past}).ok());
    TransferStatus status;
    ASSERT_TRUE(importer_.getTransferStatus(batch, 1, status).ok());
    ASSERT_EQ(status.s, FAILED);

    Request kept;
    ASSERT_TRUE(importer_.getTaskRequest(batch, 1, kept).ok());
    EXPECT_EQ(kept.opcode, Request::WRITE);
    EXPECT_EQ(kept.source, src.data());
    EXPECT_EQ(kept.target_id, target_);
    EXPECT_EQ(kept.target_offset, reinterpret_cast<uint64_t>(x) + 1);
    EXPECT_EQ(kept.length, kSize);
    EXPECT_EQ(kept.transport_hint, SHM);
    EXPECT_EQ(kept.priority, 7);
    EXPECT_EQ(importer_.getTaskRequest(batch, 0, kept).message(),
              "shm: task 0 did not fail, and only a failed task's request is "
              "kept");
    EXPECT_TRUE(importer_.getTaskRequest(batch, 2, kept).IsInvalidArgument());

    ASSERT_TRUE(importer_.recycleSubBatch(batch, 2).ok());
    ASSERT_TRUE(importer_.submitTransferTasks(batch, {good, good}).ok());
    EXPECT_FALSE(importer_.getTaskRequest(batch, 1, kept).ok());
    EXPECT_TRUE(importer_.freeSubBatch(batch).ok());
}

TEST_F(ShmPairTest, AFreedObjectIsDroppedAndTheDescriptorReadOnce) {
    constexpr size_t kSize = 64u << 10;
    void* x = exportBuffer(kSize);
    openTarget();
    std::vector<char> src(kSize, 0x11);
    ASSERT_EQ(write(src.data(), x, kSize), COMPLETED);
    ASSERT_EQ(write(src.data(), x, kSize), COMPLETED);
    const int fetched = fetcher_->calls();
    const std::string old_name = exporter_.objectNameOf(x);

    // The exporter frees and allocates again; the importer's cached
    // descriptor still names the old object.
    unexport(x);
    void* y = exportBuffer(kSize);
    ASSERT_NE(exporter_.objectNameOf(y), old_name);
    std::fill(src.begin(), src.end(), 0x22);
    TransferStatusEnum again = write(src.data(), x, kSize);
    EXPECT_EQ(fetcher_->calls(), fetched + 1);
    EXPECT_EQ(importer_.refetches(), 1u);
    if (y == x) {
        // Same address: the fresh descriptor relocates into the new object.
        EXPECT_EQ(again, COMPLETED);
    } else {
        // A new address is the caller's to learn from BufferDesc.addr.
        EXPECT_EQ(again, FAILED);
        EXPECT_EQ(write(src.data(), y, kSize), COMPLETED);
    }
    EXPECT_EQ(std::memcmp(y, src.data(), kSize), 0);
    // Nothing more was fetched, and only the new object is mapped.
    EXPECT_EQ(fetcher_->calls(), fetched + 1);
    EXPECT_EQ(importer_.refetches(), 1u);
    EXPECT_EQ(importer_.mappedObjects(target_), 1u);
}

}  // namespace
}  // namespace mooncake::tent::testing
