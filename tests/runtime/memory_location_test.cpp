// One rule for where memory lives: every kind of location gets the same
// verdict (host memory, device memory, or refused by name) from the parser,
// upstream's LocationParser, the selector, and the registration of each
// transport (tcp, shm, mpcomm), alone and through the engine. Device kinds
// run on FakeDevicePlatform, whose device memory is host memory, so that
// tcp's staging (which only device memory takes) is observed by its copy
// counts without a GPU.
#include "tent/runtime/memory_location.h"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

#include "kit/engine_config.h"
#include "kit/fake_device_platform.h"
#include "kit/mock_mpcomm_adapter.h"
#include "kit/request_builder.h"
#include "kit/scoped_env.h"
#include "kit/wait_until.h"
#include "tent/runtime/topology.h"
#include "tent/runtime/transport_selector.h"
#include "tent/transfer_engine.h"
#include "tent/transport/mpcomm/mpcomm_transport.h"
#include "tent/transport/shm/shm_transport.h"
#include "tent/transport/tcp/tcp_transport.h"

namespace mooncake::tent {
namespace {

using testing::FakeDevicePlatform;
using testing::ScopedPlatform;

enum class Verdict { kHost, kDevice, kRefused };

struct Case {
    const char* location;
    Verdict verdict;
    const char* type;  // LocationParser::type()
    int index;         // LocationParser::index()
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.location; }

const Case kCases[] = {
    {"cpu:0", Verdict::kHost, "cpu", 0},
    {"cuda:0", Verdict::kDevice, "cuda", 0},
    {"rocm:1", Verdict::kDevice, "rocm", 1},
    {"tpu:0", Verdict::kRefused, "tpu", -1},
    {"xyz:1", Verdict::kRefused, "xyz", -1},
};

constexpr size_t kLength = 64 << 10;

// The parser's refusal, which every refusing layer carries.
std::string refusal(const std::string& location) {
    return "location \"" + location +
           "\" is not one of \"*\", \"cpu\", \"cpu:<numa node>\", "
           "\"cuda:<device>\", \"rocm:<device>\", \"musa:<device>\", "
           "\"npu:<device>\"";
}

class MemoryLocationTest : public ::testing::TestWithParam<Case> {
 protected:
    const std::string location_ = GetParam().location;
    const Verdict verdict_ = GetParam().verdict;
};

TEST_P(MemoryLocationTest, TheParserAndUpstreamsLocationParserAgree) {
    MemoryLocation where;
    Status s = parseMemoryLocation(location_, &where);
    LocationParser parser(location_);
    EXPECT_EQ(parser.type(), GetParam().type);
    EXPECT_EQ(parser.index(), GetParam().index);
    EXPECT_EQ(parser.valid(), verdict_ != Verdict::kRefused);
    if (verdict_ == Verdict::kRefused) {
        EXPECT_EQ(s, Status::InvalidArgument(refusal(location_)));
        EXPECT_FALSE(isDeviceMemoryLocation(location_));
        return;
    }
    ASSERT_TRUE(s.ok()) << s.message();
    EXPECT_EQ(where.device(), verdict_ == Verdict::kDevice);
    EXPECT_EQ(isDeviceMemoryLocation(location_), verdict_ == Verdict::kDevice);
    EXPECT_EQ(memoryLocationKindName(where.kind), std::string(parser.type()));
    EXPECT_EQ(where.index, GetParam().index);
}

// Only tcp is loaded and it carries DRAM to DRAM: a device end needs a
// capability it lacks, an unknown end is refused before any is asked.
TEST_P(MemoryLocationTest, TheSelectorRoutesByTheSameVerdictAtEitherEnd) {
    TransportSelector selector;
    selector.setLoaded({TCP});
    const std::vector<TransportType> registered{TCP};
    Request request =
        testing::makeRequest(Request::WRITE, nullptr, 1, 0x1000, 0x100);
    for (bool local_end : {true, false}) {
        // Views: location_ outlives the select() call.
        const std::string_view at(location_);
        const std::string_view host("cpu:0");
        RouteContext context;
        context.segment_name = "peer";
        context.local_location = local_end ? at : host;
        context.remote_location = local_end ? host : at;
        context.buffer_transports = &registered;
        TransportType chosen = UNSPEC;
        Status s = selector.select(request, context, chosen);
        const std::string pair =
            "local " + std::string(context.local_location) + " -> remote " +
            std::string(context.remote_location);
        switch (verdict_) {
            case Verdict::kHost:
                ASSERT_TRUE(s.ok()) << s.message();
                EXPECT_EQ(chosen, TCP);
                break;
            case Verdict::kDevice:
                EXPECT_EQ(s, Status::InvalidArgument(
                                 "no transport can carry " + pair +
                                 " (segment peer): tcp: no " +
                                 (local_end ? "gpu_to_dram" : "dram_to_gpu")));
                break;
            case Verdict::kRefused:
                EXPECT_EQ(s, Status::InvalidArgument(
                                 std::string("cannot route: ") +
                                 (local_end ? "local " : "remote ") +
                                 refusal(location_)));
                break;
        }
    }
}

// A segment whose buffers are all host memory lets routing skip finding
// the buffer; one at this location keeps that shortcut exactly when it is
// host memory (an unknown one must reach the selector to be refused).
TEST_P(MemoryLocationTest, SegmentIndexingCountsOnlyHostMemoryAsDram) {
    MemorySegmentDesc memory;
    memory.buffers.resize(2);
    memory.buffers[0].addr = 0x1000;
    memory.buffers[0].length = 0x1000;
    memory.buffers[0].location = "*";
    memory.buffers[1].addr = 0x4000;
    memory.buffers[1].length = 0x1000;
    memory.buffers[1].location = location_;
    memory.indexBuffers();
    EXPECT_EQ(memory.dram_buffers, verdict_ == Verdict::kHost ? 2u : 1u);
    EXPECT_EQ(memory.allDram(), verdict_ == Verdict::kHost);
}

// tcp on its own, not installed: the CPU platform has no device memory,
// so there is no stager and device memory is refused naming the location.
TEST_P(MemoryLocationTest, TcpRegistrationAloneAgrees) {
    TcpTransport tcp;
    BufferDesc desc;
    desc.addr = 0x10000;
    desc.length = 0x1000;
    desc.location = location_;
    Status s = tcp.addMemoryBuffer(desc, MemoryOptions());
    switch (verdict_) {
        case Verdict::kHost:
            ASSERT_TRUE(s.ok()) << s.message();
            EXPECT_EQ(desc.transports, std::vector<TransportType>{TCP});
            break;
        case Verdict::kDevice:
            EXPECT_EQ(s, Status::InvalidArgument(
                             "tcp transport cannot register device memory "
                             "at " +
                             location_ +
                             ": the cpu platform has none (device memory "
                             "needs a build with USE_CUDA=ON)"));
            break;
        case Verdict::kRefused:
            EXPECT_EQ(s, Status::InvalidArgument(refusal(location_)));
            break;
    }
}

// shm on its own: it allocates and registers host memory only.
TEST_P(MemoryLocationTest, ShmAllocationAndRegistrationAloneAgree) {
    ShmTransport shm;
    MemoryOptions options;
    options.location = location_;
    void* p = nullptr;
    Status s = shm.allocateLocalMemory(&p, kLength, options);
    std::vector<char> plain(4096);
    BufferDesc desc;
    desc.addr = reinterpret_cast<uint64_t>(plain.data());
    desc.length = plain.size();
    desc.location = location_;
    std::ostringstream range;
    range << "[0x" << std::hex << desc.addr << ", +0x" << desc.length << ")";
    Status r = shm.addMemoryBuffer(desc, options);
    switch (verdict_) {
        case Verdict::kHost:
            ASSERT_TRUE(s.ok()) << s.message();
            EXPECT_FALSE(shm.objectNameOf(p).empty());
            EXPECT_TRUE(shm.freeLocalMemory(p, kLength).ok());
            EXPECT_TRUE(r.ok()) << r.message();
            break;
        case Verdict::kDevice:
            EXPECT_EQ(s, Status::InvalidArgument(
                             "shm transport allocates host memory only, "
                             "not " +
                             location_));
            EXPECT_EQ(r, Status::InvalidArgument(
                             "shm transport cannot register " + range.str() +
                             ": it is device memory at " + location_ +
                             "; shm carries host memory only"));
            break;
        case Verdict::kRefused:
            EXPECT_EQ(s, Status::InvalidArgument("shm allocateLocalMemory: " +
                                                 refusal(location_)));
            EXPECT_EQ(r, Status::InvalidArgument(
                             "shm transport cannot register " + range.str() +
                             ": " + refusal(location_)));
            break;
    }
    EXPECT_EQ(p == nullptr, verdict_ != Verdict::kHost);
}

// Engines in this process under the fake platform. A buffer of a device
// kind is host memory the platform is told lives at that location.
class MemoryLocationEngineTest : public MemoryLocationTest {
 protected:
    // Registers `buffer` with `engine` at location_ (adopted as device
    // memory first when it is one); the engine's verdict.
    Status registerAt(TransferEngine& engine, std::vector<char>& buffer) {
        if (verdict_ == Verdict::kDevice) {
            fake_->adopt(buffer.data(), buffer.size(), location_);
        }
        MemoryOptions options;
        options.location = location_;
        return engine.registerLocalMemory(buffer.data(), buffer.size(),
                                          options);
    }

    std::string published(TransferEngine& engine) {
        SegmentInfo info;
        EXPECT_TRUE(engine.getSegmentInfo(LOCAL_SEGMENT_ID, info).ok());
        return info.buffers.empty() ? "(none)" : info.buffers[0].location;
    }

    Status refusedRegistration(const std::vector<char>& buffer) {
        return Status::InvalidArgument(
            "cannot register buffer " +
            testing::bufferText(buffer.data(), buffer.size()) + ": " +
            refusal(location_));
    }

    std::shared_ptr<FakeDevicePlatform> fake_ =
        std::make_shared<FakeDevicePlatform>();
    ScopedPlatform scoped_{fake_};
};

// Bytes really cross tcp between two engines, with both buffers at the
// location: tcp stages exactly the device kinds, one copy of every byte at
// each end, and moves host memory without any copy.
TEST_P(MemoryLocationEngineTest, TcpEnginesStageExactlyTheDeviceKinds) {
    TransferEngine target(testing::onlyTransport(TCP));
    TransferEngine initiator(testing::onlyTransport(TCP));
    ASSERT_TRUE(target.available() && initiator.available());
    std::vector<char> remote(kLength, 0);
    std::vector<char> local(kLength);
    for (size_t i = 0; i < local.size(); ++i) local[i] = char(i * 7 + 3);
    Status at_target = registerAt(target, remote);
    Status at_initiator = registerAt(initiator, local);
    if (verdict_ == Verdict::kRefused) {
        EXPECT_EQ(at_target, refusedRegistration(remote));
        EXPECT_EQ(at_initiator, refusedRegistration(local));
        EXPECT_EQ(published(initiator), "(none)");
        return;
    }
    ASSERT_TRUE(at_target.ok()) << at_target.message();
    ASSERT_TRUE(at_initiator.ok()) << at_initiator.message();
    EXPECT_EQ(published(initiator), location_);
    SegmentID seg = 0;
    ASSERT_TRUE(initiator.openSegment(seg, target.getSegmentName()).ok());
    BatchID batch = initiator.allocateBatch(1);
    ASSERT_TRUE(
        initiator
            .submitTransfer(
                batch, {testing::makeRequest(
                           Request::WRITE, local.data(), seg,
                           reinterpret_cast<uint64_t>(remote.data()), kLength)})
            .ok());
    TransferStatus st;
    ASSERT_TRUE(testing::waitUntil([&] {
        return initiator.getTransferStatus(batch, 0, st).ok() &&
               st.s != PENDING;
    }));
    EXPECT_EQ(st.s, COMPLETED);
    EXPECT_TRUE(initiator.freeBatch(batch).ok());
    EXPECT_EQ(std::memcmp(remote.data(), local.data(), kLength), 0);
    const bool device = verdict_ == Verdict::kDevice;
    EXPECT_EQ(fake_->copied_bytes.load(), device ? 2 * kLength : 0u);
    EXPECT_EQ(fake_->host_to_device.load() > 0, device);
    EXPECT_EQ(fake_->device_to_host.load() > 0, device);
    EXPECT_EQ(fake_->host_to_host.load(), 0);
    EXPECT_TRUE(initiator.unregisterLocalMemory(local.data()).ok());
    EXPECT_TRUE(target.unregisterLocalMemory(remote.data()).ok());
}

// An engine with shm alone: host memory is allocated as a shared object
// and registered; device memory is allocated by the platform and no
// transport registers it; an unknown kind is refused by name at both.
TEST_P(MemoryLocationEngineTest, ShmEngineAgrees) {
    TransferEngine engine(testing::onlyTransport(SHM));
    ASSERT_TRUE(engine.available());
    MemoryOptions options;
    options.location = location_;
    void* p = nullptr;
    Status allocated = engine.allocateLocalMemory(&p, kLength, options);
    std::vector<char> buffer(kLength);
    Status registered = registerAt(engine, buffer);
    switch (verdict_) {
        case Verdict::kHost:
            ASSERT_TRUE(allocated.ok()) << allocated.message();
            EXPECT_FALSE(fake_->isDevice(p));
            EXPECT_TRUE(engine.registerLocalMemory(p, kLength, options).ok());
            EXPECT_TRUE(engine.unregisterLocalMemory(p).ok());
            EXPECT_TRUE(registered.ok()) << registered.message();
            break;
        case Verdict::kDevice:
            ASSERT_TRUE(allocated.ok()) << allocated.message();
            EXPECT_TRUE(fake_->isDevice(p));
            EXPECT_EQ(registered,
                      Status::InvalidArgument(
                          "no loaded transport could register buffer " +
                          testing::bufferText(buffer.data(), buffer.size()) +
                          " (loaded: shm)"));
            break;
        case Verdict::kRefused:
            EXPECT_EQ(allocated,
                      Status::InvalidArgument("allocateLocalMemory: " +
                                              refusal(location_)));
            EXPECT_EQ(registered, refusedRegistration(buffer));
            break;
    }
    if (p) {
        EXPECT_TRUE(engine.freeLocalMemory(p).ok());
    }
}

// An engine with mpcomm alone over the mock adapter, on a host without
// nvidia_peermem: host memory registers, device memory is refused by the
// transport (no GPU support), an unknown kind by the engine.
class MpcommLocationTest : public MemoryLocationEngineTest {
 protected:
    std::unique_ptr<TransferEngine> mpcommEngine() {
        setTransportFactoryOverride(MPCOMM, [this] {
            auto transport = std::make_unique<MpcommTransport>(
                std::make_shared<testing::MockMpcommAdapter>());
            transport->setModulesPath(no_peermem_.path());
            return transport;
        });
        auto engine =
            std::make_unique<TransferEngine>(testing::onlyTransport(MPCOMM));
        setTransportFactoryOverride(MPCOMM, nullptr);
        return engine;
    }

    void expectAgreement() {
        std::unique_ptr<TransferEngine> engine = mpcommEngine();
        ASSERT_TRUE(engine->available());
        std::vector<char> buffer(kLength);
        Status s = registerAt(*engine, buffer);
        switch (verdict_) {
            case Verdict::kHost:
                ASSERT_TRUE(s.ok()) << s.message();
                EXPECT_EQ(published(*engine), location_);
                EXPECT_TRUE(engine->unregisterLocalMemory(buffer.data()).ok());
                break;
            case Verdict::kDevice:
                EXPECT_EQ(
                    s, Status::InvalidArgument(
                           "no loaded transport could register buffer " +
                           testing::bufferText(buffer.data(), buffer.size()) +
                           " (loaded: mpcomm)"));
                break;
            case Verdict::kRefused:
                EXPECT_EQ(s, refusedRegistration(buffer));
                break;
        }
    }

    testing::TempFile no_peermem_{
        "ib_core 434176 2 rdma_ucm, Live 0x0000000000000000\n"};
};

TEST_P(MpcommLocationTest, MpcommEngineAgrees) { expectAgreement(); }

INSTANTIATE_TEST_SUITE_P(Kinds, MemoryLocationTest,
                         ::testing::ValuesIn(kCases));
INSTANTIATE_TEST_SUITE_P(Kinds, MemoryLocationEngineTest,
                         ::testing::ValuesIn(kCases));
INSTANTIATE_TEST_SUITE_P(Kinds, MpcommLocationTest,
                         ::testing::ValuesIn(kCases));

}  // namespace
}  // namespace mooncake::tent
