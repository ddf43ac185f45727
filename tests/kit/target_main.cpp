// main() of the suites that start targets with TargetProcess: either the
// GoogleTest binary, or (argv[1] == kTargetFlag) a target child that
// TargetProcess::start() exec'd, with <transport> <rpc port> <mpcomm port>
// <report fd> <command fd> <integer config keys, "k=v,..." or "-">.
#include <gtest/gtest.h>
#include <poll.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "kit/target_process.h"
#include "kit/two_process_fixture.h"

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

// "k=v,k=v" into integer keys of `conf`; "-" is none.
void applyIntConf(const std::string& text, Config& conf) {
    if (text == "-") return;
    std::istringstream is(text);
    std::string item;
    while (std::getline(is, item, ',')) {
        const size_t eq = item.find('=');
        conf.set(item.substr(0, eq), std::atoi(item.c_str() + eq + 1));
    }
}

// The target's life: serves one pattern buffer, answers commands, and at
// EOF on the command pipe cleans up and exits 0. See target_process.h.
[[noreturn]] void serveTarget(const std::string& transports, int rpc_port,
                              int mpcomm_port, int report_fd, int command_fd,
                              const std::string& int_conf) {
    // "<xport>" or "<xport>+tcp" (TargetOptions::with_tcp).
    const size_t plus = transports.find(kWithTcpSuffix);
    const TransportType xport = parseTransportType(transports.substr(0, plus));
    setenv("MPCOMM_TCP_PORT", std::to_string(mpcomm_port).c_str(), 1);
    auto say = [report_fd](const std::string& text) {
        std::string line = text + "\n";
        (void)!write(report_fd, line.data(), line.size());
    };
    auto conf = onlyTransport(xport);
    if (plus != std::string::npos) conf->set("transports/tcp/enable", true);
    applyIntConf(int_conf, *conf);
    conf->set("rpc_server_port", rpc_port);
    {
        TransferEngine engine(conf);
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
        auto* bytes = static_cast<uint8_t*>(buf);
        for (size_t i = 0; i < kBufferSize; ++i) bytes[i] = patternByte(i, 7);
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
        std::string command;
        while (readLine(
            command_fd, command,
            std::chrono::steady_clock::now() + std::chrono::hours(1))) {
            if (command == "rereg") {
                s = engine.unregisterLocalMemory(buf, kBufferSize);
                if (s.ok()) s = engine.registerLocalMemory(buf, kBufferSize);
                say(s.ok() ? "ok" : s.ToString());
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
    }
    _exit(0);
}

}  // namespace
}  // namespace mooncake::tent::testing

int main(int argc, char** argv) {
    namespace t = mooncake::tent::testing;
    if (argc == 8 && std::string(argv[1]) == t::kTargetFlag) {
        t::serveTarget(argv[2], std::atoi(argv[3]), std::atoi(argv[4]),
                       std::atoi(argv[5]), std::atoi(argv[6]), argv[7]);
    }
    ::testing::InitGoogleTest(&argc, argv);
    return RUN_ALL_TESTS();
}
