// Peers that stop, die or come back, and teardown while a peer or a
// listener says nothing. Peers are real processes (child_target.h) driven
// by real signals; the knobs are shortened through their environment
// variables, which the children inherit.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "child_target.h"
#include "mpcomm.h"
#include "test_util.h"

namespace {

using namespace mpcomm;
using mpcomm_test::ChildOptions;
using mpcomm_test::ChildTarget;
using mpcomm_test::finish;
using mpcomm_test::initOnFreePort;
using mpcomm_test::kChildHalf;
using mpcomm_test::msSince;
using mpcomm_test::pattern;
using mpcomm_test::readWithDeadline;
using mpcomm_test::ScopedEnv;
using mpcomm_test::threadCount;
using mpcomm_test::waitUntil;
using Clock = std::chrono::steady_clock;

constexpr size_t kMiB = 1u << 20;
// A put larger than any socket buffers a stopped reader leaves room for, so
// the sender thread really blocks.
constexpr size_t kStalledPut = kChildHalf - kMiB;
// What "returns promptly" means, against bounds set 15x to 100x larger.
constexpr int kPromptMs = 2000;
// How long a test waits on a socket for a step that should come at once.
constexpr int kStepMs = 10000;

class PeerFaults : public ::testing::Test {
 protected:
    void SetUp() override {
        source_ = pattern(kChildHalf, 77);
        sink_.assign(kChildHalf, 0);
    }

    std::unique_ptr<MPComm> makeInitiator(const std::string& host) {
        auto comm = std::make_unique<MPComm>();
        EXPECT_GT(initOnFreePort(*comm, host, "r0"), 0);
        EXPECT_EQ(comm->registerMemory(source_.data(), source_.size()),
                  MPCOMM_SUCCESS);
        EXPECT_EQ(comm->registerMemory(sink_.data(), sink_.size()),
                  MPCOMM_SUCCESS);
        return comm;
    }

    // connect() + queryRemoteBuffer(); remembers the child's buffer.
    int connectAndQuery(MPComm& comm, int port) {
        int rc = comm.connect("peer", "127.0.0.1", port);
        if (rc != MPCOMM_SUCCESS) return rc;
        RemoteBufferInfo info;
        rc = comm.queryRemoteBuffer("peer", "127.0.0.1", port, info);
        if (rc == MPCOMM_SUCCESS && info.entries.size() != 1) return -1000;
        if (rc == MPCOMM_SUCCESS) remote_ = info.entries[0].addr;
        return rc;
    }

    uintptr_t src() { return reinterpret_cast<uintptr_t>(source_.data()); }
    uintptr_t dst() { return reinterpret_cast<uintptr_t>(sink_.data()); }
    uintptr_t head() { return remote_; }
    uintptr_t tail(size_t offset = 0) { return remote_ + kChildHalf + offset; }

    // Reads the child's head and writes its tail, checking both byte-exact.
    void expectHealthy(MPComm& comm, ChildTarget& child, uint32_t seed) {
        std::fill(sink_.begin(), sink_.begin() + kMiB, 0);
        TransferResult read =
            finish(comm, comm.getAsync(dst(), "peer", head(), kMiB));
        EXPECT_EQ(read.error_code, MPCOMM_SUCCESS);
        EXPECT_EQ(read.bytes_transferred, kMiB);
        EXPECT_EQ(std::memcmp(sink_.data(), pattern(kMiB, seed).data(), kMiB),
                  0);
        TransferResult wrote =
            finish(comm, comm.putAsync(src(), "peer", tail(), kMiB));
        EXPECT_EQ(wrote.error_code, MPCOMM_SUCCESS);
        EXPECT_EQ(wrote.bytes_transferred, kMiB);
        EXPECT_TRUE(child.verify(77, kMiB));
    }

    // A post to a failed record completes at once, without a byte posted.
    void expectFailsFast(MPComm& comm) {
        TransferHandle late = comm.putAsync(src(), "peer", tail(), 64);
        EXPECT_TRUE(comm.isTransferComplete(late));
        TransferResult result = finish(comm, late);
        EXPECT_EQ(result.error_code, MPCOMM_ERR_CONNECTION_LOST);
        EXPECT_EQ(result.bytes_transferred, 0u);
    }

    std::vector<uint8_t> source_;
    std::vector<uint8_t> sink_;
    uintptr_t remote_ = 0;
};

TEST_F(PeerFaults, SilentPeerFailsInFlightTransfersWithRetryExceeded) {
    // Short, but not so short that a healthy put sitting whole in the socket
    // buffers of a slow (sanitized, loaded) target counts as stalled.
    constexpr int kProgressMs = 1500;
    ScopedEnv progress("SOFTMPCOMM_PROGRESS_TIMEOUT_MS",
                       std::to_string(kProgressMs).c_str());
    ScopedEnv qps("MPCOMM_QPS_PER_CONNECTION", "2");
    ChildTarget child;
    ChildOptions options;
    options.seed = 5;
    ASSERT_TRUE(child.start(options));
    auto initiator = makeInitiator("initiator");
    ASSERT_EQ(connectAndQuery(*initiator, child.port()), MPCOMM_SUCCESS);
    expectHealthy(*initiator, child, 5);

    ASSERT_TRUE(child.stop());
    auto start = Clock::now();
    // One slice each, dealt to the two QPs: the put's sender blocks in
    // send(), the get's request goes out and its reply never comes.
    TransferHandle put =
        initiator->putAsync(src(), "peer", tail(kMiB), kStalledPut);
    TransferHandle get = initiator->getAsync(dst(), "peer", head(), kMiB);
    TransferResult put_result = finish(*initiator, put);
    TransferResult get_result = finish(*initiator, get);
    int64_t elapsed = msSince(start);
    EXPECT_EQ(put_result.error_code, MPCOMM_ERR_RETRY_EXCEEDED);
    EXPECT_EQ(put_result.bytes_transferred, kStalledPut);
    EXPECT_EQ(get_result.error_code, MPCOMM_ERR_RETRY_EXCEEDED);
    EXPECT_EQ(get_result.bytes_transferred, kMiB);
    EXPECT_GE(elapsed, kProgressMs);
    EXPECT_LT(elapsed, kProgressMs + kPromptMs);
    expectFailsFast(*initiator);

    // Back from the stop, a new connect() replaces the dead record.
    ASSERT_TRUE(child.resume());
    ASSERT_EQ(connectAndQuery(*initiator, child.port()), MPCOMM_SUCCESS);
    expectHealthy(*initiator, child, 5);
    EXPECT_TRUE(child.quit());
}

TEST_F(PeerFaults, KilledPeerRestartedOnTheSameOrAnotherPortIsReachedAgain) {
    // Long enough that only the kill can end the in-flight transfers.
    ScopedEnv progress("SOFTMPCOMM_PROGRESS_TIMEOUT_MS", "30000");
    ChildTarget first;
    ChildOptions options;
    options.seed = 11;
    ASSERT_TRUE(first.start(options));
    const int port = first.port();
    auto initiator = makeInitiator("initiator");
    ASSERT_EQ(connectAndQuery(*initiator, port), MPCOMM_SUCCESS);
    expectHealthy(*initiator, first, 11);

    // Stopped first, so nothing posted now can complete before the kill.
    ASSERT_TRUE(first.stop());
    TransferHandle put = initiator->putAsync(src(), "peer", tail(), kMiB);
    TransferHandle get = initiator->getAsync(dst(), "peer", head(), kMiB);
    ASSERT_TRUE(first.kill());
    TransferResult put_result = finish(*initiator, put);
    TransferResult get_result = finish(*initiator, get);
    EXPECT_EQ(put_result.error_code, MPCOMM_ERR_CONNECTION_LOST);
    EXPECT_EQ(put_result.bytes_transferred, kMiB);
    EXPECT_EQ(get_result.error_code, MPCOMM_ERR_CONNECTION_LOST);
    EXPECT_EQ(get_result.bytes_transferred, kMiB);
    expectFailsFast(*initiator);

    // The same port binds again at once (SO_REUSEADDR).
    ChildTarget second;
    options.port = port;
    options.seed = 22;
    ASSERT_TRUE(second.start(options));
    ASSERT_EQ(connectAndQuery(*initiator, port), MPCOMM_SUCCESS);
    expectHealthy(*initiator, second, 22);
    ASSERT_TRUE(second.kill());

    // And on another port.
    ChildTarget third;
    options.seed = 33;
    for (int other = port + 1; other < port + 50; ++other) {
        options.port = other;
        if (third.start(options)) break;
    }
    ASSERT_GT(third.port(), 0);
    ASSERT_NE(third.port(), port);
    ASSERT_EQ(connectAndQuery(*initiator, third.port()), MPCOMM_SUCCESS);
    expectHealthy(*initiator, third, 33);
    EXPECT_TRUE(third.quit());
}

TEST_F(PeerFaults, ShutdownAndDestructionArePromptWhileThePeerIsStopped) {
    ScopedEnv progress("SOFTMPCOMM_PROGRESS_TIMEOUT_MS", "30000");
    ScopedEnv handshake("SOFTMPCOMM_HANDSHAKE_TIMEOUT_MS", "30000");
    ScopedEnv idle("SOFTMPCOMM_IDLE_TIMEOUT_MS", "30000");
    const int baseline = threadCount();
    ChildTarget child;
    ASSERT_TRUE(child.start(ChildOptions()));
    auto shut = makeInitiator("shut");
    auto destroyed = makeInitiator("destroyed");
    ASSERT_EQ(connectAndQuery(*shut, child.port()), MPCOMM_SUCCESS);
    ASSERT_EQ(connectAndQuery(*destroyed, child.port()), MPCOMM_SUCCESS);
    ASSERT_TRUE(child.stop());
    std::vector<TransferHandle> handles;
    for (MPComm* comm : {shut.get(), destroyed.get()}) {
        handles.push_back(
            comm->putAsync(src(), "peer", tail(kMiB), kStalledPut));
        handles.push_back(comm->getAsync(dst(), "peer", head(), kMiB));
    }

    auto start = Clock::now();
    shut->shutdown();
    EXPECT_LT(msSince(start), kPromptMs);
    for (size_t i = 0; i < 2; ++i) {
        EXPECT_TRUE(shut->isTransferComplete(handles[i]));
        EXPECT_EQ(finish(*shut, handles[i]).error_code,
                  MPCOMM_ERR_CONNECTION_LOST);
    }
    start = Clock::now();
    destroyed.reset();
    EXPECT_LT(msSince(start), kPromptMs);
    shut.reset();
    // Every thread either instance started is gone (waited for: a joined
    // thread leaves /proc/self/task a moment after its join returns).
    EXPECT_TRUE(waitUntil([&] { return threadCount() == baseline; }))
        << threadCount() << " threads, " << baseline << " before";
    EXPECT_TRUE(child.kill());
}

// A listener on an ephemeral port that never answers; -1 on failure.
int silentListener(int* port) {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&addr), len) != 0 ||
        ::listen(fd, 16) != 0 ||
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
        if (fd >= 0) ::close(fd);
        return -1;
    }
    *port = ntohs(addr.sin_port);
    return fd;
}

TEST_F(PeerFaults, ShutdownWakesAConnectBlockedOnASilentListener) {
    ScopedEnv handshake("SOFTMPCOMM_HANDSHAKE_TIMEOUT_MS", "30000");
    const int baseline = threadCount();
    int port = 0;
    int listener = silentListener(&port);
    ASSERT_GE(listener, 0);
    auto comm = std::make_unique<MPComm>();
    ASSERT_GT(initOnFreePort(*comm, "initiator", "r0"), 0);
    std::promise<int> result;
    std::thread caller(
        [&] { result.set_value(comm->connect("silent", "127.0.0.1", port)); });

    // Accept and take its HELLO: the caller now waits for an answer.
    pollfd pfd{listener, POLLIN, 0};
    ASSERT_EQ(::poll(&pfd, 1, kStepMs), 1);
    int accepted = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    ASSERT_GE(accepted, 0);
    uint8_t hello[48];
    ASSERT_TRUE(readWithDeadline(accepted, hello, sizeof(hello), kStepMs));

    auto start = Clock::now();
    comm->shutdown();
    EXPECT_LT(msSince(start), kPromptMs);
    auto done = result.get_future();
    ASSERT_EQ(done.wait_for(std::chrono::milliseconds(kPromptMs)),
              std::future_status::ready);
    EXPECT_EQ(done.get(), MPCOMM_ERR_NOT_INITIALIZED);
    caller.join();
    comm.reset();
    EXPECT_TRUE(waitUntil([&] { return threadCount() == baseline; }))
        << threadCount() << " threads, " << baseline << " before";
    ::close(accepted);
    ::close(listener);
}

// Collects what a child writes to a pipe until it exits.
class StderrCapture {
 public:
    StderrCapture() {
        if (::pipe2(fds_, O_CLOEXEC) != 0) fds_[0] = fds_[1] = -1;
    }
    ~StderrCapture() {
        closeWriteEnd();
        if (reader_.joinable()) reader_.join();
        if (fds_[0] >= 0) ::close(fds_[0]);
    }
    int writeEnd() const { return fds_[1]; }
    // After the child started: from then on only the child holds the write
    // end, so the reader sees end of file when the child exits.
    void startReading() {
        closeWriteEnd();
        reader_ = std::thread([this] {
            char buffer[4096];
            ssize_t got;
            while ((got = ::read(fds_[0], buffer, sizeof(buffer))) > 0)
                text_.append(buffer, static_cast<size_t>(got));
        });
    }
    // Joins the reader; only call once the child is gone.
    std::string text() {
        if (reader_.joinable()) reader_.join();
        return text_;
    }

 private:
    void closeWriteEnd() {
        if (fds_[1] >= 0) ::close(fds_[1]);
        fds_[1] = -1;
    }
    int fds_[2];
    std::thread reader_;
    std::string text_;
};

size_t countOf(const std::string& text, const std::string& needle) {
    size_t count = 0;
    for (size_t at = text.find(needle); at != std::string::npos;
         at = text.find(needle, at + 1))
        ++count;
    return count;
}

// Resolved only when the UndefinedBehaviorSanitizer runtime is linked in.
extern "C" void __ubsan_handle_dynamic_type_cache_miss(void*, void*, void*)
    __attribute__((weak));

TEST_F(PeerFaults, AcceptBacksOffWhenDescriptorsRunOut) {
    // UBSan checks the vptr of every new std::thread state by probing its
    // memory through a pipe() it opens on the spot; in a process out of
    // descriptors that fails and it reports a bogus "invalid vptr" (fatal
    // with -fno-sanitize-recover), which no suppression can match.
    if (&__ubsan_handle_dynamic_type_cache_miss != nullptr)
        GTEST_SKIP() << "UBSan's vptr check needs free descriptors";
    ScopedEnv idle("SOFTMPCOMM_IDLE_TIMEOUT_MS", "700");
    ScopedEnv handshake("SOFTMPCOMM_HANDSHAKE_TIMEOUT_MS", "20000");
    ScopedEnv debug("MPCOMM_LOG_LEVEL", "debug");  // read by the child only
    StderrCapture capture;
    ChildTarget child;
    ChildOptions options;
    options.seed = 44;
    options.spare_fds = 8;
    options.stderr_fd = capture.writeEnd();
    auto start = Clock::now();
    ASSERT_TRUE(child.start(options));
    capture.startReading();
    // On any failure, even an ASSERT's early return: end the child, show
    // what it logged.
    struct ShowLogOnFailure {
        ChildTarget& child;
        StderrCapture& capture;
        ~ShowLogOnFailure() {
            if (!::testing::Test::HasFailure()) return;
            child.kill();
            ADD_FAILURE() << "child's log:\n" << capture.text();
        }
    } show_log{child, capture};

    // More silent clients than the child has descriptors for: the kernel
    // queues the rest, and accept() fails with EMFILE until idle ones drop.
    std::vector<int> silent;
    for (int i = 0; i < 20; ++i) {
        int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_in addr{};
        addr.sin_family = AF_INET;
        addr.sin_port = htons(static_cast<uint16_t>(child.port()));
        addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        ASSERT_EQ(
            ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
        silent.push_back(fd);
    }
    // A well-behaved client queued behind them still gets through.
    auto initiator = makeInitiator("initiator");
    ASSERT_EQ(connectAndQuery(*initiator, child.port()), MPCOMM_SUCCESS);
    expectHealthy(*initiator, child, 44);
    // Each silent client was dropped: end of file, not a byte.
    for (int fd : silent) {
        pollfd pfd{fd, POLLIN, 0};
        char byte;
        EXPECT_EQ(::poll(&pfd, 1, kStepMs), 1);
        EXPECT_EQ(::recv(fd, &byte, 1, MSG_DONTWAIT), 0);
        ::close(fd);
    }
    initiator.reset();
    ASSERT_TRUE(child.quit());
    const int64_t lifetime = msSince(start);

    // It backed off (it did run out), once per kAcceptBackoffMs at most
    // (it did not spin on the queued connections).
    std::string log = capture.text();
    size_t backoffs = countOf(log, "accept backoff #");
    EXPECT_GE(backoffs, 1u);
    EXPECT_LE(backoffs, static_cast<size_t>(lifetime / 100 + 2));
}

}  // namespace

int main(int argc, char** argv) {
    if (argc > 1 && std::strcmp(argv[1], mpcomm_test::kChildFlag) == 0)
        return mpcomm_test::runChildTarget(argc, argv);
    // A command to a child that died must fail, not kill the suite.
    ::signal(SIGPIPE, SIG_IGN);
    ::testing::InitGoogleTest(&argc, argv);
    return RUN_ALL_TESTS();
}
