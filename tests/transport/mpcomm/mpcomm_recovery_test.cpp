// tent_mpcomm_recovery_test: MPComm peers across a cluster's lifetime, with
// real processes and real signals over the real provider (softmpcomm in
// CI): a silent peer fails only its own tasks within its bound, the
// initiator's engine goes down within the bound while a handshake is
// stuck, a peer killed and restarted under the same name is usable again,
// memory registered again is served with fresh keys, and install ->
// uninstall -> install works in one process.
//
// Ports: each test derives its own from the pid in 2000-14999: below the
// RPC range (15000-17000), the other suites' ranges (18000-31999) and the
// kernel's ephemeral ports (32768 and up).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <functional>
#include <map>
#include <string>
#include <thread>

#include "kit/log_capture.h"
#include "kit/request_builder.h"
#include "kit/two_process_fixture.h"
#include "kit/wait_until.h"
#include "tent/runtime/control_plane.h"
#include "tent/transport/mpcomm/mpcomm_adapter.h"
#include "tent/transport/mpcomm/mpcomm_transport.h"

namespace mooncake::tent::testing {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int64_t kConnectTimeoutMs = 1500;
constexpr int64_t kCacheTtlMs = 1000;
// Recovery after a restart: descriptor TTL + handshake bound, plus what a
// loaded 2-core CI machine needs to schedule both processes.
constexpr auto kRecoveryBound =
    std::chrono::milliseconds(kCacheTtlMs + kConnectTimeoutMs + 3000);

// Four ports per test (RPC, two target MPComm ports, initiator MPComm), a
// fresh block for each test of this process: a test that abandons a stuck
// handshake leaves its MPComm instance, and its port, to the process.
int basePort() {
    static const int process_base = 2000 + (getpid() % 400) * 32;
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    static std::map<std::string, int> index;
    auto it = index.emplace(info ? info->name() : "", int(index.size())).first;
    return process_base + (it->second % 8) * 4;
}

// A target engine in a child process, on a fixed RPC port (so a restart
// keeps its segment name) and MPComm port. It serves one kBufferSize buffer
// with pattern seed 7 and obeys commands on a pipe: "rereg" unregisters and
// registers the buffer again at the same address; EOF exits.
// argv[1] of the exec'd target child (see TargetProcess::start).
constexpr char kTargetFlag[] = "--recovery-target";

class TargetProcess {
 public:
    bool start(int rpc_port, int mpcomm_port, std::string& name, uint64_t& base,
               std::string& error) {
        int report[2], command[2];
        if (pipe(report) != 0 || pipe(command) != 0) {
            error = "pipe failed";
            return false;
        }
        pid_ = fork();
        if (pid_ < 0) {
            error = "fork failed";
            return false;
        }
        if (pid_ == 0) {
            // The child execs this binary again rather than running the
            // target in the forked copy: the parent has threads (an
            // engine, abandoned MPComm instances), and a forked copy of a
            // threaded process may only call async-signal-safe functions
            // (TSan refuses to start threads in it). main() below sends
            // the new image to serveTarget().
            close(report[0]);
            close(command[1]);
            std::string args[] = {
                std::to_string(rpc_port), std::to_string(mpcomm_port),
                std::to_string(report[1]), std::to_string(command[0])};
            execl("/proc/self/exe", "tent_mpcomm_recovery_target", kTargetFlag,
                  args[0].c_str(), args[1].c_str(), args[2].c_str(),
                  args[3].c_str(), nullptr);
            _exit(127);
        }
        close(report[1]);
        close(command[0]);
        command_fd_ = command[1];
        report_fd_ = report[0];
        std::string line;
        if (!readLine(report_fd_, line, Clock::now() + kDeadline)) {
            error = "target did not report within the deadline";
            return false;
        }
        if (line.rfind("ERROR ", 0) == 0) {
            error = line;
            return false;
        }
        std::istringstream is(line);
        is >> name >> base;
        return true;
    }

    // The target's life in the exec'd child: serves the buffer, answers
    // commands, exits at EOF on the command pipe.
    [[noreturn]] static void serve(int rpc_port, int mpcomm_port, int report_fd,
                                   int command_fd) {
        setenv("MPCOMM_TCP_PORT", std::to_string(mpcomm_port).c_str(), 1);
        auto say = [report_fd](const std::string& text) {
            std::string line = text + "\n";
            (void)!write(report_fd, line.data(), line.size());
        };
        auto conf = onlyTransport(MPCOMM);
        conf->set("rpc_server_port", rpc_port);
        TransferEngine engine(conf);
        if (!engine.available() || !hasTransport(engine, MPCOMM)) {
            say("ERROR target engine without MPComm");
            _exit(1);
        }
        void* buf = nullptr;
        std::string error = publishPatternBuffer(engine, buf);
        if (!error.empty()) {
            say("ERROR " + error);
            _exit(1);
        }
        say(targetReport(engine, buf));
        std::string command;
        while (readLine(command_fd, command, Clock::now() + kDeadline * 100)) {
            if (command == "rereg") {
                Status s = engine.unregisterLocalMemory(buf, kBufferSize);
                if (s.ok()) s = engine.registerLocalMemory(buf, kBufferSize);
                say(s.ok() ? "ok" : s.ToString());
            }
        }
        _exit(0);
    }

    // Sends `command` and waits for the target's answer line.
    std::string ask(const std::string& command) {
        std::string text = command + "\n", line;
        if (write(command_fd_, text.data(), text.size()) !=
            static_cast<ssize_t>(text.size())) {
            return "write failed";
        }
        if (!readLine(report_fd_, line, Clock::now() + kDeadline)) {
            return "no answer";
        }
        return line;
    }

    // SIGSTOP/SIGCONT and wait until the child is stopped/continued: kill()
    // returns before the signal takes effect.
    void stop() { signalAndWait(SIGSTOP, WUNTRACED); }
    void resume() { signalAndWait(SIGCONT, WCONTINUED); }

    void killNow() {
        if (pid_ <= 0) return;
        kill(pid_, SIGKILL);
        waitpid(pid_, nullptr, 0);
        pid_ = -1;
        closeFds();
    }

    ~TargetProcess() { killNow(); }

 private:
    void signalAndWait(int sig, int option) {
        kill(pid_, sig);
        int status = 0;
        waitpid(pid_, &status, option);
    }

    void closeFds() {
        if (command_fd_ >= 0) close(command_fd_);
        if (report_fd_ >= 0) close(report_fd_);
        command_fd_ = report_fd_ = -1;
    }

    pid_t pid_ = -1;
    int command_fd_ = -1;
    int report_fd_ = -1;
};

class MpcommRecoveryTest : public ::testing::Test {
 protected:
    void SetUp() override {
        unsetenv("MC_TENT_CONF");
        unsetenv("MPCOMM_REMOTE_TCP_PORT");
        // A stopped peer must not keep a provider call from its bound.
        setenv("SOFTMPCOMM_PROGRESS_TIMEOUT_MS", "1000", 1);
    }

    void startTarget(TargetProcess& target, int rpc_port, int mpcomm_port,
                     std::string& name, uint64_t& base) {
        std::string error;
        ASSERT_TRUE(target.start(rpc_port, mpcomm_port, name, base, error))
            << error;
    }

    void startInitiator(bool preconnect = true,
                        int64_t cache_ttl_ms = kCacheTtlMs) {
        auto conf = onlyTransport(MPCOMM);
        conf->set("transports/mpcomm/connect_timeout_ms", kConnectTimeoutMs);
        conf->set("transports/mpcomm/preconnect", preconnect);
        conf->set("metadata/cache_ttl_ms", cache_ttl_ms);
        setenv("MPCOMM_TCP_PORT", std::to_string(basePort() + 3).c_str(), 1);
        engine_ = std::make_unique<TransferEngine>(conf);
        ASSERT_TRUE(engine_->available());
        ASSERT_TRUE(hasTransport(*engine_, MPCOMM));
        ASSERT_TRUE(engine_->allocateLocalMemory(&local_, kBufferSize).ok());
        ASSERT_TRUE(engine_->registerLocalMemory(local_, kBufferSize).ok());
    }

    void TearDown() override {
        if (engine_ && local_) {
            engine_->unregisterLocalMemory(local_, kBufferSize);
            engine_->freeLocalMemory(local_);
        }
        engine_.reset();
    }

    uint8_t* local() { return static_cast<uint8_t*>(local_); }

    Request request(Request::OpCode op, SegmentID target, uint64_t base,
                    size_t offset, size_t length) {
        return testing::makeRequest(op, local() + offset, target, base + offset,
                                    length, MPCOMM);
    }

    std::vector<TransferStatus> run(const std::vector<Request>& requests) {
        return runBatch(*engine_, requests);
    }

    // WRITE `seed`'s pattern over the first `length` bytes of the target,
    // READ it back into a cleared buffer; true when both completed and
    // every byte matches.
    bool roundTrip(SegmentID target, uint64_t base, uint8_t seed,
                   size_t length = 1u << 20) {
        for (size_t i = 0; i < length; ++i) local()[i] = patternByte(i, seed);
        if (run({request(Request::WRITE, target, base, 0, length)})[0].s !=
            COMPLETED) {
            return false;
        }
        std::memset(local(), 0, length);
        if (run({request(Request::READ, target, base, 0, length)})[0].s !=
            COMPLETED) {
            return false;
        }
        for (size_t i = 0; i < length; ++i) {
            if (local()[i] != patternByte(i, seed)) {
                ADD_FAILURE() << "byte " << i << " differs after a completed "
                              << "WRITE+READ";
                return false;
            }
        }
        return true;
    }

    void expectRecoveryFromRestart(int restart_port_offset);

    // One target on basePort() (MPComm on +1) and an initiator that has
    // opened it.
    void startOpenedPair(TargetProcess& target, std::string& name,
                         uint64_t& base, SegmentID& id, bool preconnect,
                         int64_t cache_ttl_ms) {
        ASSERT_NO_FATAL_FAILURE(
            startTarget(target, basePort(), basePort() + 1, name, base));
        ASSERT_NO_FATAL_FAILURE(startInitiator(preconnect, cache_ttl_ms));
        ASSERT_TRUE(engine_->openSegment(id, name).ok());
    }

    // Round trips until one succeeds; how long that took.
    Clock::duration recover(SegmentID target, uint64_t base, uint8_t seed) {
        auto started = Clock::now();
        while (!roundTrip(target, base, seed) &&
               Clock::now() - started < kRecoveryBound * 2) {
        }
        return Clock::now() - started;
    }

    std::unique_ptr<TransferEngine> engine_;
    void* local_ = nullptr;
};

TEST_F(MpcommRecoveryTest, AStoppedPeerFailsOnlyItsTasksMidTransfer) {
    TargetProcess a, b;
    std::string name_a, name_b;
    uint64_t base_a = 0, base_b = 0;
    ASSERT_NO_FATAL_FAILURE(
        startTarget(a, basePort(), basePort() + 1, name_a, base_a));
    ASSERT_NO_FATAL_FAILURE(startTarget(b, 0, basePort() + 2, name_b, base_b));
    ASSERT_NO_FATAL_FAILURE(startInitiator());
    SegmentID id_a = 0, id_b = 0;
    ASSERT_TRUE(engine_->openSegment(id_a, name_a).ok());
    ASSERT_TRUE(engine_->openSegment(id_b, name_b).ok());
    ASSERT_TRUE(roundTrip(id_a, base_a, 1));  // both connected
    ASSERT_TRUE(roundTrip(id_b, base_b, 2));

    // 64 WRITEs of 4 MiB to `a` (256 MiB) and one to `b` in one batch; `a`
    // is stopped once its first task has completed, so bytes were moving
    // to it and most of its tasks are still to come when it stops.
    constexpr int kTasksA = 64;
    std::vector<Request> requests;
    for (int i = 0; i < kTasksA; ++i) {
        requests.push_back(
            request(Request::WRITE, id_a, base_a, 0, kBufferSize));
    }
    requests.push_back(request(Request::WRITE, id_b, base_b, 0, 1u << 20));
    BatchID batch = engine_->allocateBatch(requests.size());
    ASSERT_NE(batch, 0u);
    ASSERT_TRUE(engine_->submitTransfer(batch, requests).ok());
    auto state = [&](int task) {
        TransferStatus st;
        EXPECT_TRUE(engine_->getTransferStatus(batch, task, st).ok());
        return st.s;
    };
    const bool started = waitUntil([&] {
        for (int i = 0; i < kTasksA; ++i) {
            if (state(i) == COMPLETED) return true;
        }
        return false;
    });
    a.stop();
    auto stopped = Clock::now();
    EXPECT_TRUE(started) << "no WRITE to the peer completed before the stop";
    const bool settled = waitUntil(
        [&] {
            for (size_t i = 0; i < requests.size(); ++i) {
                if (state(i) == PENDING || state(i) == INITIAL) return false;
            }
            return true;
        },
        std::chrono::duration_cast<std::chrono::milliseconds>(kDeadline));
    auto took = Clock::now() - stopped;
    EXPECT_TRUE(settled) << "tasks still pending after the stop";
    int completed = 0, failed = 0;
    for (int i = 0; i < kTasksA; ++i) {
        completed += state(i) == COMPLETED;
        failed += state(i) == FAILED;
    }
    // Some of the stopped peer's tasks completed before the stop, the rest
    // failed: nothing else, and the other peer's task was not held up.
    EXPECT_GE(completed, 1);
    EXPECT_GE(failed, 1) << "every WRITE completed before the stop took";
    EXPECT_EQ(completed + failed, kTasksA);
    EXPECT_EQ(state(kTasksA), COMPLETED);
    // softmpcomm's no-progress bound (1000 ms here) plus scheduling.
    EXPECT_LT(took, std::chrono::milliseconds(1000 + 4000));
    EXPECT_TRUE(engine_->freeBatch(batch).ok());
    a.resume();
}

TEST_F(MpcommRecoveryTest, AStoppedPeersHandshakeIsBoundedAndSoIsTeardown) {
    // The provider's own handshake bound is far above ours, so it is the
    // transport's bound that must fire.
    setenv("SOFTMPCOMM_HANDSHAKE_TIMEOUT_MS", "30000", 1);
    TargetProcess a, b;
    std::string name_a, name_b;
    uint64_t base_a = 0, base_b = 0;
    ASSERT_NO_FATAL_FAILURE(
        startTarget(a, basePort(), basePort() + 1, name_a, base_a));
    ASSERT_NO_FATAL_FAILURE(startTarget(b, 0, basePort() + 2, name_b, base_b));
    ASSERT_NO_FATAL_FAILURE(
        startInitiator(/*preconnect=*/false, /*cache_ttl_ms=*/60000));
    SegmentID id_a = 0, id_b = 0;
    ASSERT_TRUE(engine_->openSegment(id_a, name_a).ok());
    ASSERT_TRUE(engine_->openSegment(id_b, name_b).ok());

    a.stop();
    LogCapture logs;
    auto started = Clock::now();
    auto states = run({request(Request::WRITE, id_a, base_a, 0, 4096),
                       request(Request::WRITE, id_b, base_b, 4096, 4096)});
    auto took = Clock::now() - started;
    EXPECT_EQ(states[0].s, FAILED);
    EXPECT_EQ(states[1].s, COMPLETED);
    EXPECT_GE(took, std::chrono::milliseconds(kConnectTimeoutMs));
    EXPECT_LT(took, std::chrono::milliseconds(kConnectTimeoutMs + 3000));
    EXPECT_EQ(logs.countContaining("did not finish within "
                                   "transports/mpcomm/connect_timeout_ms=1500"),
              1);

    // The handshake with the stopped peer is still inside softmpcomm.
    started = Clock::now();
    engine_->unregisterLocalMemory(local_, kBufferSize);
    engine_->freeLocalMemory(local_);
    local_ = nullptr;
    engine_.reset();
    EXPECT_LT(Clock::now() - started,
              std::chrono::milliseconds(kConnectTimeoutMs + 3000));
    EXPECT_EQ(logs.countContaining("uninstall abandons 1 MPComm handshake(s)"),
              1);
    a.resume();
    unsetenv("SOFTMPCOMM_HANDSHAKE_TIMEOUT_MS");
}

// A listener that accepts and never answers, advertised by a descriptor
// this process serves itself.
TEST_F(MpcommRecoveryTest, AListenerThatNeverAnswersFailsWithinTheBound) {
    setenv("SOFTMPCOMM_HANDSHAKE_TIMEOUT_MS", "30000", 1);
    int silent = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(bind(silent, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)),
              0);
    ASSERT_EQ(listen(silent, 8), 0);
    socklen_t len = sizeof(addr);
    getsockname(silent, reinterpret_cast<sockaddr*>(&addr), &len);
    std::vector<int> accepted;
    std::thread acceptor([&] {
        // Bounded, so a test that fails early cannot hang on the join.
        pollfd pfd{silent, POLLIN, 0};
        if (poll(&pfd, 1, 20000) != 1) return;
        int fd = accept(silent, nullptr, nullptr);
        if (fd >= 0) accepted.push_back(fd);
    });

    auto fake = std::make_shared<SegmentManager>("", nullptr);
    ControlService service(fake);
    ASSERT_TRUE(service.start(0).ok());
    const std::string fake_name = "127.0.0.1:" + std::to_string(service.port());
    ASSERT_TRUE(fake->updateLocal([&](SegmentDesc& desc) {
                        desc.name = fake_name;
                        BufferDesc b;
                        b.addr = 0x10000;
                        b.length = 0x10000;
                        b.transports = {MPCOMM};
                        desc.getMemory().buffers.push_back(b);
                        desc.getMemory().transport_attrs[MPCOMM] =
                            "v1:127.0.0.1:" +
                            std::to_string(ntohs(addr.sin_port));
                        return Status::OK();
                    })
                    .ok());

    ASSERT_NO_FATAL_FAILURE(startInitiator(/*preconnect=*/false));
    SegmentID id = 0;
    ASSERT_TRUE(engine_->openSegment(id, fake_name).ok());
    auto started = Clock::now();
    auto states = run({request(Request::WRITE, id, 0x10000, 0, 4096)});
    auto took = Clock::now() - started;
    EXPECT_EQ(states[0].s, FAILED);
    EXPECT_GE(took, std::chrono::milliseconds(kConnectTimeoutMs));
    EXPECT_LT(took, std::chrono::milliseconds(kConnectTimeoutMs + 3000));
    started = Clock::now();
    engine_->unregisterLocalMemory(local_, kBufferSize);
    engine_->freeLocalMemory(local_);
    local_ = nullptr;
    engine_.reset();
    EXPECT_LT(Clock::now() - started,
              std::chrono::milliseconds(kConnectTimeoutMs + 3000));
    acceptor.join();
    for (int fd : accepted) close(fd);
    close(silent);
    unsetenv("SOFTMPCOMM_HANDSHAKE_TIMEOUT_MS");
}

// Kills the target with SIGKILL after a good round trip, restarts it under
// the same segment name with MPComm on basePort() + `restart_port_offset`,
// and expects the same initiator to move bytes again within the bound.
void MpcommRecoveryTest::expectRecoveryFromRestart(int restart_port_offset) {
    TargetProcess target;
    std::string name, restarted_name;
    uint64_t base = 0, new_base = 0;
    SegmentID id = 0;
    ASSERT_NO_FATAL_FAILURE(
        startOpenedPair(target, name, base, id, true, kCacheTtlMs));
    ASSERT_TRUE(roundTrip(id, base, 3));

    target.killNow();
    ASSERT_NO_FATAL_FAILURE(startTarget(target, basePort(),
                                        basePort() + restart_port_offset,
                                        restarted_name, new_base));
    ASSERT_EQ(restarted_name, name);
    auto took = recover(id, new_base, 4);
    EXPECT_LT(took, kRecoveryBound);
    EXPECT_TRUE(roundTrip(id, new_base, 5));
}

TEST_F(MpcommRecoveryTest, AKilledPeerRestartedOnTheSamePortsIsUsedAgain) {
    expectRecoveryFromRestart(1);
}

TEST_F(MpcommRecoveryTest, AKilledPeerRestartedOnAnotherMpcommPortIsUsedAgain) {
    expectRecoveryFromRestart(2);
}

TEST_F(MpcommRecoveryTest, MemoryRegisteredAgainIsServedWithFreshKeys) {
    TargetProcess target;
    std::string name;
    uint64_t base = 0;
    SegmentID id = 0;
    // A zero TTL reads the descriptor per submission: the new epoch is seen
    // by the very next transfer.
    ASSERT_NO_FATAL_FAILURE(startOpenedPair(target, name, base, id,
                                            /*preconnect=*/true,
                                            /*cache_ttl_ms=*/0));
    ASSERT_TRUE(roundTrip(id, base, 9));
    // The keys themselves stay inside the provider; a probe (a second
    // MPComm instance in this process, through the public adapter) holds
    // the keys of before each re-registration, so "fresh" is seen as: the
    // old keys are refused, the engine's next transfer works at once, and
    // keys queried again work.
    auto probe = createDefaultMpcommAdapter();
    ASSERT_TRUE(probe->init("recovery-probe", "", basePort() + 2).ok());
    std::vector<uint8_t> probe_mem(4096, 0x5a);
    ASSERT_TRUE(probe->registerMemory(probe_mem.data(), probe_mem.size()).ok());
    const int target_port = basePort() + 1;
    ASSERT_TRUE(probe->connect(name, "127.0.0.1", target_port).ok());
    auto probe_put = [&] {
        MpcommTransferHandle h =
            probe->putAsync(reinterpret_cast<uintptr_t>(probe_mem.data()), name,
                            base, probe_mem.size());
        if (h == kInvalidMpcommTransferHandle) return false;
        EXPECT_TRUE(waitUntil([&] { return probe->isTransferComplete(h); }));
        MpcommTransferOutcome out = probe->getTransferResult(h);
        probe->releaseTransfer(h);
        return out.ok;
    };
    auto epoch = [&] {
        SegmentDesc desc;
        EXPECT_TRUE(P2PSegmentFetcher().fetch(name, desc).ok());
        return desc.registration_epoch;
    };
    for (uint8_t seed : {10, 11}) {
        ASSERT_TRUE(
            probe->queryRemoteBuffer(name, "127.0.0.1", target_port).ok());
        EXPECT_TRUE(probe_put()) << "the keys just queried work";
        const uint64_t before = epoch();
        ASSERT_EQ(target.ask("rereg"), "ok");
        EXPECT_GT(epoch(), before) << "the descriptor shows the new keys";
        EXPECT_FALSE(probe_put()) << "the keys of before still work";
        EXPECT_TRUE(roundTrip(id, base, seed))
            << "the first transfer after re-registration failed";
    }
    probe->shutdown();
}

TEST_F(MpcommRecoveryTest, MemoryRegisteredAgainRecoversWithACachedDescriptor) {
    TargetProcess target;
    std::string name;
    uint64_t base = 0;
    SegmentID id = 0;
    ASSERT_NO_FATAL_FAILURE(startOpenedPair(target, name, base, id,
                                            /*preconnect=*/true,
                                            /*cache_ttl_ms=*/60000));
    ASSERT_TRUE(roundTrip(id, base, 12));
    ASSERT_EQ(target.ask("rereg"), "ok");
    // The cached descriptor still shows the old epoch: the first transfer
    // uses the old keys and fails, which makes the next one read afresh.
    auto took = recover(id, base, 13);
    EXPECT_LT(took, kRecoveryBound);
    EXPECT_TRUE(roundTrip(id, base, 14));
}

// install -> uninstall -> install of the real adapter in one process, each
// installation moving bytes to a live target.
TEST_F(MpcommRecoveryTest, InstallUninstallInstallWithTheRealProvider) {
    TargetProcess target;
    std::string name;
    uint64_t base = 0;
    ASSERT_NO_FATAL_FAILURE(
        startTarget(target, basePort(), basePort() + 1, name, base));

    auto segments = std::make_shared<SegmentManager>(
        "", std::make_shared<P2PSegmentFetcher>());
    auto control = std::make_shared<ControlService>(segments);
    ASSERT_TRUE(control->start(0).ok());
    std::string local_name = "127.0.0.1:" + std::to_string(control->port());
    ASSERT_TRUE(segments
                    ->updateLocal([&](SegmentDesc& desc) {
                        desc.name = local_name;
                        return Status::OK();
                    })
                    .ok());
    auto conf = std::make_shared<Config>();
    conf->set("transports/mpcomm/connect_timeout_ms", kConnectTimeoutMs);
    setenv("MPCOMM_TCP_PORT", std::to_string(basePort() + 3).c_str(), 1);
    std::vector<uint8_t> buffer(1u << 20);
    MpcommTransport transport;
    for (int round = 0; round < 3; ++round) {
        std::string as = local_name;
        Status st =
            transport.install(as, control, std::make_shared<Topology>(), conf);
        ASSERT_TRUE(st.ok()) << "round " << round << ": " << st;
        BufferDesc desc;
        desc.addr = reinterpret_cast<uint64_t>(buffer.data());
        desc.length = buffer.size();
        ASSERT_TRUE(transport.addMemoryBuffer(desc, MemoryOptions()).ok());
        SegmentID id = 0;
        ASSERT_TRUE(segments->openRemote(id, name).ok());
        for (size_t i = 0; i < buffer.size(); ++i) {
            buffer[i] = patternByte(i, 20 + round);
        }
        Request r;
        r.opcode = Request::WRITE;
        r.source = buffer.data();
        r.target_id = id;
        r.target_offset = base;
        r.length = buffer.size();
        Transport::SubBatchRef batch = nullptr;
        ASSERT_TRUE(transport.allocateSubBatch(batch, 2).ok());
        ASSERT_TRUE(transport.submitTransferTasks(batch, {r}).ok());
        r.opcode = Request::READ;
        std::vector<uint8_t> expected = buffer;
        TransferStatus st0;
        auto deadline = Clock::now() + kDeadline;
        do {
            ASSERT_TRUE(transport.getTransferStatus(batch, 0, st0).ok());
        } while (st0.s == PENDING && Clock::now() < deadline);
        ASSERT_EQ(st0.s, COMPLETED) << "round " << round;
        std::fill(buffer.begin(), buffer.end(), 0);
        ASSERT_TRUE(transport.submitTransferTasks(batch, {r}).ok());
        TransferStatus st1;
        do {
            ASSERT_TRUE(transport.getTransferStatus(batch, 1, st1).ok());
        } while (st1.s == PENDING && Clock::now() < deadline);
        ASSERT_EQ(st1.s, COMPLETED) << "round " << round;
        EXPECT_EQ(buffer, expected) << "round " << round;
        ASSERT_TRUE(transport.freeSubBatch(batch).ok());
        ASSERT_TRUE(segments->closeRemote(id).ok());
        ASSERT_TRUE(transport.removeMemoryBuffer(desc).ok());
        ASSERT_TRUE(transport.uninstall().ok());
    }
}

}  // namespace
}  // namespace mooncake::tent::testing

// Either the test binary, or (argv[1] == kTargetFlag) a target child that
// TargetProcess::start() exec'd: <rpc port> <mpcomm port> <report fd>
// <command fd>.
int main(int argc, char** argv) {
    using mooncake::tent::testing::kTargetFlag;
    using mooncake::tent::testing::TargetProcess;
    if (argc == 6 && std::string(argv[1]) == kTargetFlag) {
        TargetProcess::serve(std::atoi(argv[2]), std::atoi(argv[3]),
                             std::atoi(argv[4]), std::atoi(argv[5]));
    }
    ::testing::InitGoogleTest(&argc, argv);
    return RUN_ALL_TESTS();
}
