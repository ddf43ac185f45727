// StoreEngineTest's fixture: a real store (kit/store_server.h), target
// processes (tent_store_target) spawned with pipes, and an initiator engine
// in the test process.
#pragma once

#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "kit/free_tcp_port.h"
#include "kit/request_builder.h"
#include "kit/store_engine_support.h"
#include "kit/store_server.h"
#include "tent/runtime/metastore.h"

extern char** environ;

namespace mooncake::tent::testing {

// The TTL every engine of these tests publishes with: etcd's smallest
// lease with its default settings.
constexpr int kTestTtlMs = 2000;
constexpr auto kLineBound = std::chrono::seconds(30);

// One tent_store_target process. Its stdin is the release pipe: closing it
// ends the process cleanly.
class StoreTarget {
 public:
    ~StoreTarget() { kill(SIGKILL); }

    // Spawns it and reads its first line; "" when it reported READY, else
    // what it said instead.
    std::string start(const std::vector<std::string>& args) {
        int out[2], in[2];
        if (pipe(out) != 0 || pipe(in) != 0) return "pipe failed";
        std::vector<std::string> all = {TENT_STORE_TARGET_PATH};
        all.insert(all.end(), args.begin(), args.end());
        std::vector<char*> argv;
        for (std::string& a : all) argv.push_back(a.data());
        argv.push_back(nullptr);
        // The target's own MPComm handshake port.
        std::vector<std::string> env_text;
        for (char** e = environ; *e; ++e) {
            if (std::strncmp(*e, "MPCOMM_TCP_PORT=", 16) != 0) {
                env_text.push_back(*e);
            }
        }
        env_text.push_back("MPCOMM_TCP_PORT=" + std::to_string(freeTcpPort()));
        std::vector<char*> envp;
        for (std::string& e : env_text) envp.push_back(e.data());
        envp.push_back(nullptr);
        posix_spawn_file_actions_t actions;
        posix_spawn_file_actions_init(&actions);
        posix_spawn_file_actions_adddup2(&actions, out[1], 1);
        posix_spawn_file_actions_adddup2(&actions, in[0], 0);
        posix_spawn_file_actions_addclose(&actions, out[0]);
        posix_spawn_file_actions_addclose(&actions, in[1]);
        int rc = posix_spawn(&pid_, argv[0], &actions, nullptr, argv.data(),
                             envp.data());
        posix_spawn_file_actions_destroy(&actions);
        close(out[1]);
        close(in[0]);
        stdin_ = in[1];
        if (rc != 0) {
            close(out[0]);
            close(in[1]);
            stdin_ = -1;
            pid_ = -1;
            return std::string("posix_spawn: ") + std::strerror(rc);
        }
        stdout_ = out[0];
        std::string line;
        if (!readLine(stdout_, line)) return "no line within the bound";
        if (line.rfind("READY ", 0) != 0) return line;
        std::istringstream(line.substr(6)) >> name_ >> base_;
        return "";
    }

    // Sends one command line and returns the line that answers it ("" when
    // none came within the bound).
    std::string command(const std::string& text) {
        std::string line = text + "\n";
        if (write(stdin_, line.data(), line.size()) !=
            static_cast<ssize_t>(line.size())) {
            return "";
        }
        line.clear();
        return readLine(stdout_, line) ? line : "";
    }

    // Signals and reaps it.
    void kill(int sig) {
        if (pid_ <= 0) return;
        ::kill(pid_, sig);
        int status = 0;
        ::waitpid(pid_, &status, 0);
        pid_ = -1;
        if (stdin_ >= 0) close(stdin_);
        if (stdout_ >= 0) close(stdout_);
        stdin_ = -1;
        stdout_ = -1;
    }

    const std::string& name() const { return name_; }
    uint64_t base() const { return base_; }
    pid_t pid() const { return pid_; }

 private:
    static bool readLine(int fd, std::string& line) {
        const auto deadline = std::chrono::steady_clock::now() + kLineBound;
        char c;
        while (std::chrono::steady_clock::now() < deadline) {
            pollfd pfd{fd, POLLIN, 0};
            if (poll(&pfd, 1, 100) <= 0) continue;
            if (read(fd, &c, 1) <= 0) return false;
            if (c == '\n') return true;
            line.push_back(c);
        }
        return false;
    }

    pid_t pid_ = -1;
    int stdin_ = -1;
    int stdout_ = -1;
    std::string name_;
    uint64_t base_ = 0;
};

// One transfer, waited for within 30 s; its final state.
inline TransferStatusEnum transferOnce(TransferEngine& engine,
                                       Request::OpCode op, void* local,
                                       SegmentID target, uint64_t remote,
                                       size_t length) {
    BatchID batch = engine.allocateBatch(1);
    if (batch == 0) return FAILED;
    TransferStatusEnum state = FAILED;
    if (engine
            .submitTransfer(batch,
                            {makeRequest(op, local, target, remote, length)})
            .ok()) {
        const auto deadline =
            std::chrono::steady_clock::now() + std::chrono::seconds(30);
        TransferStatus status;
        while (engine.getTransferStatus(batch, 0, status).ok() &&
               (status.s == PENDING || status.s == INITIAL) &&
               std::chrono::steady_clock::now() < deadline) {
            std::this_thread::yield();
        }
        state = status.s;
    }
    engine.freeBatch(batch);
    return state;
}

using StoreCase = std::tuple<std::string, std::string>;  // store, transport

class StoreEngineTest : public ::testing::TestWithParam<StoreCase> {
 protected:
    void SetUp() override {
        type_ = std::get<0>(GetParam());
        xport_ = parseTransportType(std::get<1>(GetParam()).c_str());
        if (!StoreServer::installed(type_)) {
            GTEST_SKIP() << StoreServer::binaryFor(type_)
                         << " is not installed (scripts/install_deps.sh "
                            "installs it)";
        }
        server_ = std::make_unique<StoreServer>(type_);
        Status s = server_->start();
        ASSERT_TRUE(s.ok()) << s.ToString();
        MetaStoreOptions options;
        options.timeout_ms = 1000;
        ASSERT_TRUE(
            MetaStore::Create(type_, server_->address(), options, client_)
                .ok());
    }

    std::string uniqueName(const std::string& what) const {
        return what + "-" + std::to_string(getpid());
    }

    // A target named `name` serving pattern `seed`; fails the test unless
    // it reports READY.
    void startTarget(StoreTarget& target, const std::string& name, int seed) {
        std::string error = target.start(
            {type_, server_->address(), name, transportTypeName(xport_),
             std::to_string(kTestTtlMs), std::to_string(seed)});
        ASSERT_EQ(error, "") << "target " << name;
        ASSERT_EQ(target.name(), name);
    }

    std::unique_ptr<TransferEngine> startInitiator(int cache_ttl_ms = 10000) {
        setenv("MPCOMM_TCP_PORT", std::to_string(freeTcpPort()).c_str(), 1);
        auto conf = storeEngineConfig(type_, server_->address(), "", xport_,
                                      kTestTtlMs);
        conf->set("metadata/cache_ttl_ms", cache_ttl_ms);
        auto engine = std::make_unique<TransferEngine>(conf);
        EXPECT_TRUE(engine->available());
        return engine;
    }

    bool keyPresent(const std::string& name) {
        std::string value;
        bool found = false;
        Status s = client_->get("mooncake/tent/segments/" + name, value, found);
        EXPECT_TRUE(s.ok()) << s.ToString();
        return found;
    }

    std::string type_;
    TransportType xport_ = TCP;
    std::unique_ptr<StoreServer> server_;
    std::shared_ptr<MetaStore> client_;
};

}  // namespace mooncake::tent::testing
