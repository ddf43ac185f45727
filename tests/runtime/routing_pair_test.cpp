// Routing by capability over real engines in two processes: a forked
// target serves a host buffer; the initiator holds "device" memory (host
// memory the FakeDevicePlatform places at cuda:0), so that no case needs a
// GPU. VRAM never reaches a transport that did not declare it: it is
// refused naming both locations and each transport's reason, or routed to
// one that can carry it. MPComm's GPU capability follows nvidia_peermem
// and transports/mpcomm/disable_gpu_direct_rdma.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "kit/fake_device_platform.h"
#include "kit/log_capture.h"
#include "kit/two_process_fixture.h"
#include "tent/runtime/transport.h"
#include "tent/transport/mpcomm/mpcomm_transport.h"
#include "tent/transport/tcp/tcp_transport.h"

namespace mooncake::tent {
namespace {

using testing::FakeDevicePlatform;
using testing::kBufferSize;
using testing::LogCapture;
using testing::patternByte;
using testing::ScopedPlatform;

constexpr size_t kChunk = 64 << 10;

// TCP declaring DRAM only, whatever the tree's TCP transport carries: the
// transport "without GPU capability" of these cases. Counts the requests
// it is handed, so that a case can tell which transport carried one.
class DramOnlyTcp : public TcpTransport {
 public:
    const Capabilities capabilities() const override {
        Capabilities caps;
        caps.dram_to_dram = true;
        return caps;
    }
    Status submitTransferTasks(SubBatchRef batch,
                               const std::vector<Request>& list) override {
        submitted.fetch_add(list.size());
        return TcpTransport::submitTransferTasks(batch, list);
    }
    static inline std::atomic<size_t> submitted{0};
};

// Installs transport factory overrides for one test.
class ScopedOverride {
 public:
    ScopedOverride(TransportType type, TransportFactory factory) : type_(type) {
        setTransportFactoryOverride(type, std::move(factory));
    }
    ~ScopedOverride() { setTransportFactoryOverride(type_, {}); }
    ScopedOverride(const ScopedOverride&) = delete;
    ScopedOverride& operator=(const ScopedOverride&) = delete;

 private:
    TransportType type_;
};

// A /proc/modules stand-in, with or without nvidia_peermem.
class ModulesFile {
 public:
    explicit ModulesFile(bool peermem) {
        char name[] = "/tmp/tent_routing_modules_XXXXXX";
        int fd = mkstemp(name);
        EXPECT_GE(fd, 0);
        close(fd);
        path_ = name;
        std::ofstream(path_) << (peermem ? "nvidia_peermem 16384 0 - Live 0x0\n"
                                         : "nvme 16384 0 - Live 0x0\n");
    }
    ~ModulesFile() { unlink(path_.c_str()); }
    const std::string& path() const { return path_; }

 private:
    std::string path_;
};

std::shared_ptr<Config> tcpAndMpcomm() {
    auto conf = testing::onlyTransport(TCP);
    conf->set("transports/mpcomm/enable", true);
    return conf;
}

class RoutingPairTest : public testing::TwoProcessTest {
 protected:
    // Starts a target (kit/target_process.h) with `xport`, and tcp beside
    // it when `with_tcp`, serving the kit's pattern buffer (host memory);
    // skips, or fails under TENT_MPCOMM_TEST_REQUIRE_PROVIDER=1, when it has
    // no `xport`.
    void startTarget(TransportType xport, bool with_tcp) {
        testing::TargetOptions options;
        options.xport = xport;
        options.with_tcp = with_tcp;
        startTargetWith(options);
    }

    // The initiator's engine, built after the test's overrides are in
    // place, with a host buffer (local_) and a "device" one (vram_ at
    // cuda:0 on the fake platform).
    void startInitiatorWith(std::shared_ptr<Config> conf) {
        engine_ = std::make_unique<TransferEngine>(conf);
        ASSERT_TRUE(engine_->available());
        if (!testing::hasTransport(*engine_, xport_)) {
            skipOrFail(std::string("initiator engine has no ") +
                       transportTypeName(xport_) + " transport");
            return;
        }
        ASSERT_TRUE(engine_->allocateLocalMemory(&local_, kBufferSize).ok());
        ASSERT_TRUE(engine_->registerLocalMemory(local_, kBufferSize).ok());
        ASSERT_TRUE(engine_->openSegment(target_, target_name_).ok());
        SegmentInfo info;
        ASSERT_TRUE(engine_->getSegmentInfo(target_, info).ok());
        ASSERT_EQ(info.buffers.size(), 1u);
        remote_location_ = info.buffers[0].location;
        ASSERT_EQ(remote_location_.rfind("cpu:", 0), 0u) << remote_location_;
        ASSERT_TRUE(
            engine_->allocateLocalMemory(&vram_, kBufferSize, "cuda:0").ok());
    }

    void TearDown() override {
        if (engine_ && vram_) {
            engine_->unregisterLocalMemory(vram_, kBufferSize);
            engine_->freeLocalMemory(vram_);
        }
        TwoProcessTest::TearDown();
    }

    // A WRITE of the start of the "device" buffer into the target, with
    // no hint: the engine chooses.
    TransferStatus writeFromVram(TransportType hint = UNSPEC) {
        Request r = testing::makeRequest(Request::WRITE, vram_, target_,
                                         target_base_, kChunk, hint);
        return run({r})[0];
    }

    // The line the engine logged for the failed task (its reason).
    static std::string failureLine(LogCapture& logs) {
        for (const std::string& line : logs.lines()) {
            if (line.find(" failed: ") != std::string::npos) {
                return line.substr(line.find(" failed: ") + 9);
            }
        }
        return "(no failure logged)";
    }

    std::string refusal(const std::string& reasons) const {
        return "no transport can carry local cuda:0 -> remote " +
               remote_location_ + " (segment " + target_name_ + "): " + reasons;
    }

    std::shared_ptr<FakeDevicePlatform> fake_ =
        std::make_shared<FakeDevicePlatform>();
    void* vram_ = nullptr;
    Location remote_location_;
};

TEST_F(RoutingPairTest, VramToDramOverTcpWithoutGpuCapabilityIsRefused) {
    ASSERT_NO_FATAL_FAILURE(startTarget(TCP, false));
    ScopedOverride tcp(TCP, [] { return std::make_unique<DramOnlyTcp>(); });
    ScopedPlatform platform(fake_);
    ASSERT_NO_FATAL_FAILURE(startInitiatorWith(testing::onlyTransport(TCP)));

    LogCapture logs;
    EXPECT_EQ(writeFromVram().s, FAILED);
    EXPECT_EQ(failureLine(logs), refusal("tcp: no gpu_to_dram"));
    // Nothing was staged or copied: the bytes never left "device" memory.
    EXPECT_EQ(fake_->device_to_host.load(), 0);

    LogCapture hinted;
    EXPECT_EQ(writeFromVram(TCP).s, FAILED);
    EXPECT_EQ(failureLine(hinted),
              "transport_hint tcp cannot carry local cuda:0 -> remote " +
                  remote_location_ + " (segment " + target_name_ +
                  "): tcp: no gpu_to_dram");

    // DRAM to DRAM still goes, byte-exact.
    expectTargetsInitialPattern();
}

class MpcommRoutingTest : public RoutingPairTest {
 protected:
    // Target and initiator with tcp and mpcomm; the initiator's tcp is
    // DRAM-only and its mpcomm reads `modules` for nvidia_peermem.
    void startWithMpcomm(bool peermem, bool disable_gpu_direct) {
        ASSERT_NO_FATAL_FAILURE(startTarget(MPCOMM, true));
        if (IsSkipped()) return;
        modules_ = std::make_unique<ModulesFile>(peermem);
        const std::string path = modules_->path();
        tcp_ = std::make_unique<ScopedOverride>(
            TCP, [] { return std::make_unique<DramOnlyTcp>(); });
        mpcomm_ = std::make_unique<ScopedOverride>(MPCOMM, [path] {
            auto t = std::make_unique<MpcommTransport>();
            t->setModulesPath(path);
            return t;
        });
        platform_ = std::make_unique<ScopedPlatform>(fake_);
        auto conf = tcpAndMpcomm();
        conf->set("transports/mpcomm/disable_gpu_direct_rdma",
                  disable_gpu_direct);
        ASSERT_NO_FATAL_FAILURE(startInitiatorWith(conf));
        if (IsSkipped()) return;
        // MPComm needs its local memory registered; where it cannot carry
        // VRAM the buffer stays unregistered and the platform places it.
        if (peermem && !disable_gpu_direct) {
            ASSERT_TRUE(engine_->registerLocalMemory(vram_, kBufferSize).ok());
        }
    }

    void TearDown() override {
        RoutingPairTest::TearDown();
        platform_.reset();
        mpcomm_.reset();
        tcp_.reset();
    }

    std::unique_ptr<ModulesFile> modules_;
    std::unique_ptr<ScopedOverride> tcp_;
    std::unique_ptr<ScopedOverride> mpcomm_;
    std::unique_ptr<ScopedPlatform> platform_;
};

TEST_F(MpcommRoutingTest, WithPeermemVramGoesOverMpcommByteExact) {
    ASSERT_NO_FATAL_FAILURE(startWithMpcomm(true, false));
    if (IsSkipped()) return;
    auto* bytes = static_cast<uint8_t*>(vram_);
    for (size_t i = 0; i < kChunk; ++i) bytes[i] = patternByte(i, 42);
    DramOnlyTcp::submitted = 0;
    TransferStatus st = writeFromVram();
    ASSERT_EQ(st.s, COMPLETED);
    EXPECT_EQ(st.transferred_bytes, kChunk);
    // tcp comes first in the buffer's order, but never saw the request.
    EXPECT_EQ(DramOnlyTcp::submitted.load(), 0u);
    // Read back into host memory: the target now holds the device bytes.
    std::memset(local_, 0, kChunk);
    auto states = run({testing::makeRequest(Request::READ, local_, target_,
                                            target_base_, kChunk)});
    ASSERT_EQ(states[0].s, COMPLETED);
    EXPECT_EQ(DramOnlyTcp::submitted.load(), 1u);  // DRAM: buffer order
    for (size_t i = 0; i < kChunk; ++i) {
        ASSERT_EQ(static_cast<uint8_t*>(local_)[i], patternByte(i, 42))
            << "byte " << i;
    }
}

TEST_F(MpcommRoutingTest, WithoutPeermemVramIsRefusedByBoth) {
    ASSERT_NO_FATAL_FAILURE(startWithMpcomm(false, false));
    if (IsSkipped()) return;
    LogCapture logs;
    EXPECT_EQ(writeFromVram().s, FAILED);
    EXPECT_EQ(failureLine(logs),
              refusal("tcp: no gpu_to_dram; mpcomm: no gpu_to_dram"));
}

TEST_F(MpcommRoutingTest, DisableGpuDirectRdmaRefusesVramDespitePeermem) {
    ASSERT_NO_FATAL_FAILURE(startWithMpcomm(true, true));
    if (IsSkipped()) return;
    LogCapture logs;
    EXPECT_EQ(writeFromVram(MPCOMM).s, FAILED);
    EXPECT_EQ(failureLine(logs),
              "transport_hint mpcomm cannot carry local cuda:0 -> remote " +
                  remote_location_ + " (segment " + target_name_ +
                  "): mpcomm: no gpu_to_dram");
}

}  // namespace
}  // namespace mooncake::tent
