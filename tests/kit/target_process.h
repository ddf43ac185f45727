// TargetProcess: a target engine in a child process, driven by the test
// process: started with a bounded wait for its report, asked commands over
// a pipe, stopped and continued (SIGSTOP/SIGCONT), killed (SIGKILL),
// restarted on the same ports, and reaped within a bound.
//
// The child execs this test binary again rather than running the target in
// the forked copy: the parent may have threads (an engine, abandoned MPComm
// handshakes), and a forked copy of a threaded process may only call
// async-signal-safe functions (TSan refuses to start threads in it). A
// suite that uses it links kit/target_main.cpp as its main(), which sends
// the new image to serveTarget().
//
// The target serves one kBufferSize buffer filled with pattern
// TargetOptions::seed (7 unless set) and reports "<segment> <address>" when
// it is ready, "SKIP <why>" when its engine has no such transport, "ERROR
// <why>" when setting up failed (on a metadata store, also when the engine
// is not available: the store may have refused its name).
// Commands, one line each, one answer line each: "rereg" unregisters the
// buffer and registers it again at the same address ("ok" or the error);
// "rereg <seed>" does the same but refills the buffer with pattern <seed>
// between the two (a seed outside [0, 255] is refused, naming it); "unreg"
// and "reg" unregister / register the buffer ("ok" or the error); "second"
// allocates and registers a second kBufferSize buffer with pattern seed 9
// (its address in decimal, or the error; once); "rss"
// answers "<VmRSS kB> <VmHWM kB>"; "check <offset> <length> <seed>" reads
// the buffer's own bytes there and answers "ok" when they hold pattern
// <seed>, else "bad <index> holds <byte>" (what a WRITE left at the
// target, seen without any transport). "verify <segment>" (sent with tell(), no
// answer) opens <segment> and, until the next command or EOF, checks each
// notification "<offset> <length> <seed>" against the pattern in its
// buffer and answers it with a notification "ok" or "bad <index>".
// EOF on the command pipe: it unregisters, frees and exits 0.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <string>

#include "tent/transfer_engine.h"

namespace mooncake::tent::testing {

// argv[1] of an exec'd target child (see kit/target_main.cpp).
constexpr char kTargetFlag[] = "--tent-test-target";
// Set in the parent before start(), the child inherits it: "closed-port"
// makes the target publish an MPComm port nobody listens on (its endpoint
// refuses every connection); "killable" lets the command "mpcomm-down"
// shut its MPComm provider down (listener closed, connections dropped)
// while the engine and tcp keep serving ("ok", or why not).
constexpr char kMpcommFaultEnv[] = "TENT_TEST_TARGET_MPCOMM_FAULT";
// Appended to the transport argument when TargetOptions::with_tcp.
constexpr char kWithTcpSuffix[] = "+tcp";

// What the child is started with; restart() starts it again with the same.
struct TargetOptions {
    TransportType xport = MPCOMM;
    int rpc_port = 0;       // 0: any free port (a restart gets a new name)
    int mpcomm_port = 0;    // MPCOMM_TCP_PORT of the child
    bool with_tcp = false;  // tcp enabled beside `xport`
    // Integer config keys of the child's engine, "key=value,key=value".
    std::string int_conf;
    uint8_t seed = 7;  // pattern seed of the served buffer
    // A metadata store instead of p2p metadata: the child's engine is
    // built with storeEngineConfig() (kit/store_engine_support.h) from
    // these. An empty metadata_type keeps p2p and ignores the rest.
    std::string metadata_type;     // "redis" or "etcd"
    std::string metadata_servers;  // e.g. StoreServer::address()
    std::string segment_name;      // local_segment_name; "": host:port
    int ttl_ms = 0;                // metadata/ttl_ms; 0: the engine's default
};

// Reads one '\n'-terminated line from fd into `line`, waiting at most until
// `deadline`; false on timeout or EOF.
bool readLine(int fd, std::string& line,
              std::chrono::steady_clock::time_point deadline);

class TargetProcess {
 public:
    enum class Started { kReady, kSkipped, kFailed };

    TargetProcess() = default;
    TargetProcess(const TargetProcess&) = delete;
    TargetProcess& operator=(const TargetProcess&) = delete;
    ~TargetProcess();

    // Forks and execs the child, waits at most `bound` for its report.
    // kReady: name() and base() are set; otherwise `why` says what the
    // child reported or what did not happen (and the child is gone).
    Started start(const TargetOptions& options, std::string& why,
                  std::chrono::milliseconds bound = kReportBound);
    // kill() and start() with the options of the last start().
    Started restart(std::string& why);

    const std::string& name() const { return name_; }
    uint64_t base() const { return base_; }
    bool running() const { return pid_ > 0; }
    // The child's pid while it runs (errors of other engines name it).
    pid_t pid() const { return pid_; }

    // Sends `command` and waits (bounded) for the answer line; "no answer"
    // or "write failed" when there is none.
    std::string ask(const std::string& command);
    // Sends `command` and waits for no answer; false when the write failed.
    bool tell(const std::string& command);

    // SIGSTOP / SIGCONT, and waits (bounded) until the child is stopped /
    // continued: kill() returns before the signal takes effect. False when
    // the state change was not seen within the bound.
    bool stop();
    bool resume();

    // SIGKILL and a bounded reap; nothing when no child runs.
    void kill();

    // Closes the command pipe, so the child cleans up and exits, and reaps
    // it within `bound`. True when it exited with status 0; otherwise
    // `why` says how it ended (a child still running is killed).
    bool finish(std::string& why,
                std::chrono::milliseconds bound = kReportBound);

    static constexpr std::chrono::milliseconds kReportBound{30000};

 private:
    // waitpid() for `options` polled until it reports the child or `bound`
    // passed; the status, or -1 on timeout.
    int waitChild(int options, std::chrono::milliseconds bound);
    bool signalAndWait(int sig, int options);
    void closeFds();

    TargetOptions options_;
    pid_t pid_ = -1;
    int command_fd_ = -1;
    int report_fd_ = -1;
    std::string name_;
    uint64_t base_ = 0;
};

}  // namespace mooncake::tent::testing
