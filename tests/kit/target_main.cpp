// main() of the suites that start targets with TargetProcess: either the
// GoogleTest binary, or (argv[1] == kTargetFlag) a target child that
// TargetProcess::start() exec'd, with <transport> <rpc port> <mpcomm port>
// <report fd> <command fd>.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <sstream>
#include <string>

#include "kit/target_process.h"
#include "kit/two_process_fixture.h"

namespace mooncake::tent::testing {
namespace {

// The target's life: serves one pattern buffer, answers commands, and at
// EOF on the command pipe cleans up and exits 0. See target_process.h.
[[noreturn]] void serveTarget(TransportType xport, int rpc_port,
                              int mpcomm_port, int report_fd, int command_fd) {
    setenv("MPCOMM_TCP_PORT", std::to_string(mpcomm_port).c_str(), 1);
    auto say = [report_fd](const std::string& text) {
        std::string line = text + "\n";
        (void)!write(report_fd, line.data(), line.size());
    };
    auto conf = onlyTransport(xport);
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
    if (argc == 7 && std::string(argv[1]) == t::kTargetFlag) {
        t::serveTarget(mooncake::tent::parseTransportType(argv[2]),
                       std::atoi(argv[3]), std::atoi(argv[4]),
                       std::atoi(argv[5]), std::atoi(argv[6]));
    }
    ::testing::InitGoogleTest(&argc, argv);
    return RUN_ALL_TESTS();
}
