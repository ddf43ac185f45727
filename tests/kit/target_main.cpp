// main() of the suites that start targets with TargetProcess: either the
// GoogleTest binary, or (argv[1] == kTargetFlag) a target child that
// TargetProcess::start() exec'd, with <transport> <rpc port> <mpcomm port>
// <report fd> <command fd> <integer config keys, "k=v,..."> <seed>
// <metadata type> <metadata servers> <segment name> <ttl ms>; an empty
// text arrives as "-".
#include <gtest/gtest.h>
#include <poll.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "kit/faulty_mpcomm_adapter.h"
#include "kit/free_tcp_port.h"
#include "kit/store_engine_support.h"
#include "kit/target_process.h"
#include "kit/two_process_fixture.h"
#ifdef TENT_HAVE_MPCOMM
#include "tent/transport/mpcomm/mpcomm_transport.h"
#endif

namespace mooncake::tent::testing {
namespace {

// "<VmRSS kB> <VmHWM kB>" of this process.
std::string memoryLine() {
    std::ifstream status("/proc/self/status");
    std::string line, rss = "0", hwm = "0";
    while (std::getline(status, line)) {
        std::istringstream is(line);
        std::string key, value;
        is >> key >> value;
        if (key == "VmRSS:") rss = value;
        if (key == "VmHWM:") hwm = value;
    }
    return rss + " " + hwm;
}

// Data or EOF on `fd`: the parent has a new command, or is done.
bool readable(int fd) {
    pollfd pfd{fd, POLLIN, 0};
    return poll(&pfd, 1, 0) > 0;
}

// "verify <segment>" (see target_process.h): answers each notification
// with "ok" or "bad <index>" after checking the bytes it announces.
void verifyNotifications(TransferEngine& engine, const uint8_t* buf,
                         const std::string& initiator, int command_fd) {
    SegmentID peer = 0;
    if (!engine.openSegment(peer, initiator).ok()) return;
    std::vector<Notification> list;
    while (!readable(command_fd)) {
        engine.receiveNotification(list);
        if (list.empty()) std::this_thread::yield();
        for (const Notification& n : list) {
            size_t offset = 0, length = 0;
            int seed = 0;
            std::istringstream(n.msg) >> offset >> length >> seed;
            std::string answer = "ok";
            for (size_t i = offset; i < offset + length && i < kBufferSize;
                 ++i) {
                if (buf[i] != patternByte(i, static_cast<uint8_t>(seed))) {
                    answer = "bad " + std::to_string(i);
                    break;
                }
            }
            engine.sendNotification(peer, {n.name, answer});
        }
    }
}

#ifdef TENT_HAVE_MPCOMM
// The real provider's adapter, publishing `advertised` as its MPComm port
// when that is not 0 (a port nobody listens on: the endpoint refuses).
class BreakableMpcommAdapter : public FaultyMpcommAdapter {
 public:
    explicit BreakableMpcommAdapter(int advertised)
        : FaultyMpcommAdapter(createDefaultMpcommAdapter()),
          advertised_(advertised) {}
    int tcpPort() const override {
        return advertised_ != 0 ? advertised_ : FaultyMpcommAdapter::tcpPort();
    }

 private:
    int advertised_;
};
#endif

// kMpcommFaultEnv (see target_process.h): the adapter the target's MPComm
// transport is built over, or null when the variable is unset. The
// override lives as long as this process.
std::shared_ptr<MpcommAdapter> installMpcommFault() {
    const char* fault = std::getenv(kMpcommFaultEnv);
    if (fault == nullptr) return nullptr;
#ifdef TENT_HAVE_MPCOMM
    const std::string how = fault;
    const int advertised = how == "closed-port" ? freeTcpPort() : 0;
    if (how != "closed-port" && how != "killable") return nullptr;
    auto adapter = std::make_shared<BreakableMpcommAdapter>(advertised);
    setTransportFactoryOverride(MPCOMM, [adapter] {
        return std::make_unique<MpcommTransport>(adapter);
    });
    return adapter;
#else
    return nullptr;
#endif
}

// "k=v,k=v" into integer keys of `conf`.
void applyIntConf(const std::string& text, Config& conf) {
    std::istringstream is(text);
    std::string item;
    while (std::getline(is, item, ',')) {
        const size_t eq = item.find('=');
        conf.set(item.substr(0, eq), std::atoi(item.c_str() + eq + 1));
    }
}

// The engine configuration `options` asks for: p2p metadata, or a
// metadata store; then the extra transport, integer keys and RPC port.
std::shared_ptr<Config> targetConfig(const TargetOptions& options) {
    auto conf = options.metadata_type.empty()
                    ? onlyTransport(options.xport)
                    : storeEngineConfig(
                          options.metadata_type, options.metadata_servers,
                          options.segment_name, options.xport, options.ttl_ms);
    if (options.with_tcp) conf->set("transports/tcp/enable", true);
    applyIntConf(options.int_conf, *conf);
    conf->set("rpc_server_port", options.rpc_port);
    return conf;
}

// "rereg" or "rereg <seed>" (see target_process.h): the answer line.
std::string reregister(TransferEngine& engine, void* buf,
                       const std::string& command) {
    int seed = -1;
    if (command != "rereg") {
        std::istringstream is(command.substr(6));
        std::string rest;
        if (!(is >> seed) || seed < 0 || seed > 255 || (is >> rest)) {
            return "bad seed \"" + command.substr(6) +
                   "\": want an integer in [0, 255]";
        }
    }
    Status s = engine.unregisterLocalMemory(buf, kBufferSize);
    if (seed >= 0) fillPattern(buf, kBufferSize, static_cast<uint8_t>(seed));
    if (s.ok()) s = engine.registerLocalMemory(buf, kBufferSize);
    return s.ok() ? "ok" : s.ToString();
}

// "check <offset> <length> <seed>" (see target_process.h): the answer line.
std::string checkPattern(const uint8_t* buf, const std::string& command) {
    std::istringstream is(command.substr(6));
    size_t offset = 0, length = 0;
    int seed = -1;
    std::string rest;
    if (!(is >> offset >> length >> seed) || seed < 0 || seed > 255 ||
        (is >> rest) || offset > kBufferSize || length > kBufferSize - offset) {
        return "bad check \"" + command.substr(6) +
               "\": want <offset> <length> <seed in [0, 255]> inside the "
               "buffer";
    }
    for (size_t i = offset; i < offset + length; ++i) {
        if (buf[i] != patternByte(i, static_cast<uint8_t>(seed))) {
            return "bad " + std::to_string(i) + " holds " +
                   std::to_string(buf[i]);
        }
    }
    return "ok";
}

// "second" (see target_process.h): a second kBufferSize buffer, pattern
// seed 9, registered after the first; the answer line is its address.
std::string addSecondBuffer(TransferEngine& engine, void*& second) {
    if (second != nullptr) return "a second buffer is already registered";
    void* buf = nullptr;
    Status s = engine.allocateLocalMemory(&buf, kBufferSize);
    if (!s.ok()) return s.ToString();
    fillPattern(buf, kBufferSize, 9);
    s = engine.registerLocalMemory(buf, kBufferSize);
    if (!s.ok()) {
        engine.freeLocalMemory(buf);
        return s.ToString();
    }
    second = buf;
    return std::to_string(reinterpret_cast<uintptr_t>(buf));
}

// The target's life: serves one pattern buffer, answers commands, and at
// EOF on the command pipe cleans up and exits 0. See target_process.h.
[[noreturn]] void serveTarget(const TargetOptions& options, int report_fd,
                              int command_fd) {
    const TransportType xport = options.xport;
    setenv("MPCOMM_TCP_PORT", std::to_string(options.mpcomm_port).c_str(), 1);
    auto say = [report_fd](const std::string& text) {
        std::string line = text + "\n";
        (void)!write(report_fd, line.data(), line.size());
    };
    std::shared_ptr<MpcommAdapter> mpcomm = installMpcommFault();
    {
        TransferEngine engine(targetConfig(options));
        if (!engine.available() && !options.metadata_type.empty()) {
            // On a store the reason matters (a name held by another
            // process, an unreachable store); an unavailable engine
            // answers every call with it.
            SegmentID handle = 0;
            say("ERROR " +
                std::string(engine.openSegment(handle, "-").message()));
            _exit(1);
        }
        if (!engine.available() || !hasTransport(engine, xport)) {
            say("SKIP target engine has no " +
                std::string(transportTypeName(xport)) + " transport");
            _exit(0);
        }
        void* buf = nullptr;
        if (!engine.allocateLocalMemory(&buf, kBufferSize).ok()) {
            say("ERROR allocateLocalMemory failed");
            _exit(1);
        }
        fillPattern(buf, kBufferSize, options.seed);
        Status s = engine.registerLocalMemory(buf, kBufferSize);
        if (!s.ok()) {
            say("ERROR registerLocalMemory: " + s.ToString());
            _exit(1);
        }
        std::ostringstream report;
        report << engine.getSegmentName() << " "
               << reinterpret_cast<uintptr_t>(buf);
        say(report.str());
        // The parent's test bounds its own life; this bound only keeps an
        // orphaned child from outliving it by much.
        void* second = nullptr;  // "second"
        std::string command;
        while (readLine(
            command_fd, command,
            std::chrono::steady_clock::now() + std::chrono::hours(1))) {
            if (command == "rereg" || command.rfind("rereg ", 0) == 0) {
                say(reregister(engine, buf, command));
            } else if (command.rfind("check ", 0) == 0) {
                say(checkPattern(static_cast<uint8_t*>(buf), command));
            } else if (command == "unreg" || command == "reg") {
                Status r = command == "unreg"
                               ? engine.unregisterLocalMemory(buf, kBufferSize)
                               : engine.registerLocalMemory(buf, kBufferSize);
                say(r.ok() ? "ok" : r.ToString());
            } else if (command == "second") {
                say(addSecondBuffer(engine, second));
            } else if (command == "mpcomm-down") {
                // The provider's listener closes and its connections
                // drop; the engine and its other transports stay up.
                if (mpcomm) mpcomm->shutdown();
                say(mpcomm ? "ok" : std::string(kMpcommFaultEnv) + " unset");
            } else if (command == "rss") {
                say(memoryLine());
            } else if (command.rfind("verify ", 0) == 0) {
                verifyNotifications(engine, static_cast<uint8_t*>(buf),
                                    command.substr(7), command_fd);
            } else {
                say("unknown command " + command);
            }
        }
        engine.unregisterLocalMemory(buf, kBufferSize);
        engine.freeLocalMemory(buf);
        if (second != nullptr) {
            engine.unregisterLocalMemory(second, kBufferSize);
            engine.freeLocalMemory(second);
        }
    }
    _exit(0);
}

// argv[2..] of a target child (see the top of this file) as the options
// TargetProcess::start() was given.
TargetOptions parseTargetArgs(char** argv) {
    auto text = [](const char* arg) {
        return std::string(arg) == "-" ? std::string() : std::string(arg);
    };
    TargetOptions options;
    // "<xport>" or "<xport>+tcp" (TargetOptions::with_tcp).
    const std::string transports = argv[2];
    const size_t plus = transports.find(kWithTcpSuffix);
    options.xport = parseTransportType(transports.substr(0, plus));
    options.with_tcp = plus != std::string::npos;
    options.rpc_port = std::atoi(argv[3]);
    options.mpcomm_port = std::atoi(argv[4]);
    options.int_conf = text(argv[7]);
    options.seed = static_cast<uint8_t>(std::atoi(argv[8]));
    options.metadata_type = text(argv[9]);
    options.metadata_servers = text(argv[10]);
    options.segment_name = text(argv[11]);
    options.ttl_ms = std::atoi(argv[12]);
    return options;
}

}  // namespace
}  // namespace mooncake::tent::testing

int main(int argc, char** argv) {
    namespace t = mooncake::tent::testing;
    if (argc == 13 && std::string(argv[1]) == t::kTargetFlag) {
        t::serveTarget(t::parseTargetArgs(argv), std::atoi(argv[5]),
                       std::atoi(argv[6]));
    }
    ::testing::InitGoogleTest(&argc, argv);
    return RUN_ALL_TESTS();
}
