// StoreServer: spawns and stops a real metadata store for a test.
#include "kit/store_server.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "kit/free_tcp_port.h"
#include "tent/runtime/metastore.h"

extern char** environ;

namespace mooncake::tent::testing {

namespace {

bool onPath(const std::string& binary) {
    const char* path = std::getenv("PATH");
    std::string dirs = path ? path : "/usr/bin:/bin";
    size_t start = 0;
    while (start <= dirs.size()) {
        size_t colon = dirs.find(':', start);
        if (colon == std::string::npos) colon = dirs.size();
        std::string candidate =
            dirs.substr(start, colon - start) + "/" + binary;
        if (::access(candidate.c_str(), X_OK) == 0) return true;
        start = colon + 1;
    }
    return false;
}

// Waits up to `bound_ms` for `pid` to exit; true when it did.
bool reap(pid_t pid, int bound_ms) {
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::milliseconds(bound_ms);
    while (true) {
        int status = 0;
        pid_t r = ::waitpid(pid, &status, WNOHANG);
        if (r == pid || (r < 0 && errno == ECHILD)) return true;
        if (std::chrono::steady_clock::now() >= deadline) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
}

}  // namespace

StoreServer::StoreServer(std::string type) : type_(std::move(type)) {}

StoreServer::~StoreServer() {
    stop();
    if (!dir_.empty()) {
        std::string cmd = "rm -rf '" + dir_ + "'";
        (void)!std::system(cmd.c_str());
    }
}

std::string StoreServer::binaryFor(const std::string& type) {
    if (type == "redis") return "redis-server";
    if (type == "etcd") return "etcd";
    if (type == "http") return "python3-aiohttp";
    return "";
}

bool StoreServer::installed(const std::string& type) {
    // The http server is ours (python/mooncake), run by the interpreter
    // that CMake found with aiohttp, if any.
    if (type == "http") return TENT_HTTP_SERVER_PYTHON[0] != '\0';
    const std::string binary = binaryFor(type);
    return binary.empty() || onPath(binary);
}

std::string StoreServer::missing(const std::string& type, bool& fail) {
    const char* value = std::getenv(kRequireStoresVar);
    const std::string required = value ? value : "";
    if (required != "" && required != "0" && required != "1") {
        fail = true;
        return std::string(kRequireStoresVar) + " must be 0 or 1, got \"" +
               required + "\"";
    }
    fail = required == "1";
    if (installed(type)) return "";
    const std::string binary = binaryFor(type);
    if (fail) {
        return binary + " is not installed (not on PATH) and " +
               kRequireStoresVar + "=1 requires the " + type +
               " cases to run (scripts/install_deps.sh installs it)";
    }
    return binary + " is not installed (not on PATH), so the " + type +
           " cases are skipped (scripts/install_deps.sh installs it; " +
           kRequireStoresVar + "=1 fails them instead)";
}

std::string StoreServer::address() const {
    if (type_ == "http") {
        return "http://127.0.0.1:" + std::to_string(port_) + "/metadata";
    }
    return "127.0.0.1:" + std::to_string(port_);
}

Status StoreServer::start() {
    // On tmpfs where there is room: etcd fsyncs every write, and on a disk
    // that other suites load a write can take seconds, past the bounds the
    // cases set. A store's durability is not what these tests are about.
    // etcd preallocates 64 MiB of log, more than a container's default
    // /dev/shm holds, hence the free-space floor.
    constexpr uint64_t kTmpfsFloorBytes = 1ull << 30;
    struct statvfs shm {};
    const bool roomy =
        ::access("/dev/shm", W_OK) == 0 && ::statvfs("/dev/shm", &shm) == 0 &&
        uint64_t(shm.f_bavail) * shm.f_frsize >= kTmpfsFloorBytes;
    std::string tmpl_text =
        roomy ? "/dev/shm/tent-store-XXXXXX" : "/tmp/tent-store-XXXXXX";
    char* tmpl = tmpl_text.data();
    if (::mkdtemp(tmpl) == nullptr) {
        return Status::InternalError("mkdtemp failed: " +
                                     std::string(std::strerror(errno)));
    }
    dir_ = tmpl;
    // A port free when picked can be taken (by another suite running
    // beside this one, or picked twice here) before the server binds it,
    // and the server then exits at start: it is started again on fresh
    // ports, a bounded number of times.
    Status s;
    for (int attempt = 0; attempt < kStartAttempts; ++attempt) {
        port_ = freeTcpPort();
        peer_port_ = freeTcpPort();
        if (port_ == 0 || peer_port_ == 0 || port_ == peer_port_) {
            s = Status::InternalError("no free loopback port for " + type_);
            continue;
        }
        s = spawn();
        if (s.ok() || pid_ > 0) return s;
    }
    return s;
}

Status StoreServer::restart(bool wipe) {
    stop();
    if (wipe) {
        std::string cmd = "rm -rf '" + dir_ + "/data'";
        (void)!std::system(cmd.c_str());
    }
    return spawn();
}

Status StoreServer::spawn() {
    const std::string data = dir_ + "/data";
    ::mkdir(data.c_str(), 0700);
    const std::string port = std::to_string(port_);
    std::vector<std::string> args;
    if (type_ == "redis") {
        args = {"redis-server",
                "--port",
                port,
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                data,
                "--daemonize",
                "no",
                "--protected-mode",
                "no"};
    } else if (type_ == "http") {
        // In memory: a restart always starts empty.
        args = {TENT_HTTP_SERVER_PYTHON,
                "-m",
                "mooncake.http_metadata_server",
                "--host",
                "127.0.0.1",
                "--port",
                port,
                "--log-level",
                "WARNING"};
    } else {
        const std::string client = "http://127.0.0.1:" + port;
        const std::string peer =
            "http://127.0.0.1:" + std::to_string(peer_port_);
        args = {"etcd",
                "--name=tent-test",
                "--data-dir=" + data + "/etcd",
                "--listen-client-urls=" + client,
                "--advertise-client-urls=" + client,
                "--listen-peer-urls=" + peer,
                "--initial-advertise-peer-urls=" + peer,
                "--initial-cluster=tent-test=" + peer};
    }
    std::vector<char*> argv;
    for (std::string& arg : args) argv.push_back(arg.data());
    argv.push_back(nullptr);
    // The http server runs from the source tree, writing no bytecode there.
    std::vector<std::string> env_text;
    for (char** e = environ; *e != nullptr; ++e) {
        if (std::strncmp(*e, "PYTHONPATH=", 11) != 0) env_text.push_back(*e);
    }
    env_text.push_back(std::string("PYTHONPATH=") + TENT_PYTHON_SOURCE_DIR);
    env_text.push_back("PYTHONDONTWRITEBYTECODE=1");
    std::vector<char*> envp;
    for (std::string& e : env_text) envp.push_back(e.data());
    envp.push_back(nullptr);
    const std::string log = dir_ + "/server.log";
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, log.c_str(),
                                     O_WRONLY | O_CREAT | O_APPEND, 0600);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    int rc = posix_spawnp(&pid_, argv[0], &actions, nullptr, argv.data(),
                          envp.data());
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) {
        pid_ = -1;
        return Status::InternalError("cannot start " + binaryFor(type_) + ": " +
                                     std::strerror(rc));
    }
    MetaStoreOptions options;
    options.timeout_ms = 500;
    std::shared_ptr<MetaStore> client;
    CHECK_STATUS(MetaStore::Create(type_, address(), options, client));
    const auto deadline = std::chrono::steady_clock::now() +
                          std::chrono::milliseconds(kStartBoundMs);
    Status last;
    while (std::chrono::steady_clock::now() < deadline) {
        last = client->ping();
        if (last.ok()) return Status::OK();
        int status = 0;
        if (::waitpid(pid_, &status, WNOHANG) == pid_) {
            pid_ = -1;
            return Status::InternalError(binaryFor(type_) +
                                         " exited at start; see " + log);
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return Status::InternalError(binaryFor(type_) + " did not answer within " +
                                 std::to_string(kStartBoundMs) +
                                 " ms: " + std::string(last.message()));
}

void StoreServer::stop() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGTERM);
    if (!reap(pid_, 10000)) {
        ::kill(pid_, SIGKILL);
        reap(pid_, 10000);
    }
    pid_ = -1;
}

}  // namespace mooncake::tent::testing
