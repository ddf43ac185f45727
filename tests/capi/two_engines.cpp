// Two engines in two processes through the installed C++ API: the C++
// counterpart of two_engines.c, built with nothing but -I<prefix>/include
// -L<prefix>/lib -ltent_shared. The parent (initiator) writes a pattern
// into the forked child's (target's) buffer with a notification, the child
// checks the bytes the moment the notification arrives, then the parent
// reads them back. Exit status 0 on success; a failed check prints the
// expression, its line and the Status. Every wait is bounded: polls stop at
// a deadline and alarm() ends a process that hangs.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "tent/transfer_engine.h"

using namespace mooncake::tent;

namespace {

constexpr size_t kLen = 1u << 20;
constexpr int kWaitSeconds = 60;
const char* role = "parent";

#define CHECK(cond)                                                            \
    do {                                                                       \
        if (!(cond)) {                                                         \
            std::fprintf(stderr, "%s:%d: %s failed\n", role, __LINE__, #cond); \
            std::exit(1);                                                      \
        }                                                                      \
    } while (0)
#define CHECK_OK(expr)                                                     \
    do {                                                                   \
        Status s_ = (expr);                                                \
        if (!s_.ok()) {                                                    \
            std::fprintf(stderr, "%s:%d: %s: %s\n", role, __LINE__, #expr, \
                         s_.ToString().c_str());                           \
            std::exit(1);                                                  \
        }                                                                  \
    } while (0)

unsigned char pattern(size_t i) { return (unsigned char)(i * 13 % 251); }

std::chrono::steady_clock::time_point deadline() {
    return std::chrono::steady_clock::now() +
           std::chrono::seconds(kWaitSeconds);
}

void writeAll(int fd, const void* data, size_t len) {
    CHECK(write(fd, data, len) == (ssize_t)len);
}

void readAll(int fd, void* data, size_t len) {
    size_t got = 0;
    while (got < len) {
        ssize_t n = read(fd, (char*)data + got, len - got);
        CHECK(n > 0);
        got += (size_t)n;
    }
}

// Polls task `task` until it is final; the final status.
TransferStatus waitTask(TransferEngine& e, BatchID batch, size_t task) {
    auto until = deadline();
    TransferStatus st;
    do {
        CHECK_OK(e.getTransferStatus(batch, task, st));
        if (st.s != PENDING && st.s != INITIAL) return st;
    } while (std::chrono::steady_clock::now() < until);
    CHECK(!"task left PENDING within the bound");
    return st;
}

struct Hello {
    char name[256];
    uint64_t addr;
};

int runTarget(int to_parent, int from_parent) {
    role = "target";
    TransferEngine e;
    CHECK(e.available());
    void* buf = nullptr;
    CHECK_OK(e.allocateLocalMemory(&buf, kLen, "cpu:0"));
    std::memset(buf, 0, kLen);
    CHECK_OK(e.registerLocalMemory(buf, kLen));

    Hello h{};
    std::string name = e.getSegmentName();
    CHECK(!name.empty() && name.size() < sizeof(h.name));
    std::memcpy(h.name, name.data(), name.size());
    h.addr = (uint64_t)(uintptr_t)buf;
    writeAll(to_parent, &h, sizeof(h));

    // The notification comes only after the data of its submission.
    auto until = deadline();
    bool seen = false;
    while (!seen && std::chrono::steady_clock::now() < until) {
        std::vector<Notification> notes;
        CHECK_OK(e.receiveNotification(notes));
        for (const auto& n : notes)
            if (n.name == "cxx-block" && n.msg == "written") seen = true;
    }
    CHECK(seen);
    const unsigned char* bytes = (const unsigned char*)buf;
    size_t bad = kLen;
    for (size_t i = 0; i < kLen && bad == kLen; ++i)
        if (bytes[i] != pattern(i)) bad = i;
    if (bad != kLen)
        std::fprintf(stderr, "target: byte %zu is %u, expected %u\n", bad,
                     bytes[bad], pattern(bad));
    char verdict = bad == kLen ? 'y' : 'n';
    writeAll(to_parent, &verdict, 1);

    char go = 0;
    readAll(from_parent, &go, 1);  // the initiator is done with us
    CHECK(go == 'q');
    CHECK_OK(e.unregisterLocalMemory(buf, kLen));
    CHECK_OK(e.freeLocalMemory(buf));
    return verdict == 'y' ? 0 : 1;
}

int runInitiator(int from_target, int to_target) {
    Hello h{};
    readAll(from_target, &h, sizeof(h));
    h.name[sizeof(h.name) - 1] = '\0';

    TransferEngine e;
    CHECK(e.available());
    SegmentID seg = 0;
    CHECK_OK(e.openSegment(seg, h.name));
    CHECK(seg != LOCAL_SEGMENT_ID);
    SegmentInfo info;
    CHECK_OK(e.getSegmentInfo(seg, info));
    CHECK(info.type == SegmentInfo::Memory && info.buffers.size() == 1);
    CHECK(info.buffers[0].base == h.addr && info.buffers[0].length == kLen);

    // [0, kLen) the source, [kLen, 2 kLen) the read-back.
    void* mem = nullptr;
    CHECK_OK(e.allocateLocalMemory(&mem, 2 * kLen, "cpu:0"));
    CHECK_OK(e.registerLocalMemory(mem, 2 * kLen));
    auto* local = (unsigned char*)mem;
    for (size_t i = 0; i < kLen; ++i) local[i] = pattern(i);
    std::memset(local + kLen, 0, kLen);

    BatchID batch = e.allocateBatch(4);
    CHECK(batch != 0);
    Request w;
    w.opcode = Request::WRITE;
    w.source = local;
    w.target_id = seg;
    w.target_offset = h.addr;
    w.length = kLen;
    CHECK_OK(
        e.submitTransfer(batch, {w}, Notification{"cxx-block", "written"}));
    TransferStatus st = waitTask(e, batch, 0);
    CHECK(st.s == COMPLETED && st.transferred_bytes == kLen);
    char verdict = 0;
    readAll(from_target, &verdict, 1);
    CHECK(verdict == 'y');

    Request r = w;
    r.opcode = Request::READ;
    r.source = local + kLen;
    CHECK_OK(e.submitTransfer(batch, {r}));
    st = waitTask(e, batch, 1);
    CHECK(st.s == COMPLETED && st.transferred_bytes == kLen);
    CHECK(std::memcmp(local, local + kLen, kLen) == 0);
    TransferStatus overall;
    CHECK_OK(e.getTransferStatus(batch, overall));
    CHECK(overall.s == COMPLETED && overall.transferred_bytes == 2 * kLen);

    CHECK_OK(e.freeBatch(batch));
    CHECK_OK(e.closeSegment(seg));
    char go = 'q';
    writeAll(to_target, &go, 1);
    CHECK_OK(e.unregisterLocalMemory(mem, 2 * kLen));
    CHECK_OK(e.freeLocalMemory(mem));
    return 0;
}

}  // namespace

int main() {
    int up[2], down[2];
    if (pipe(up) != 0 || pipe(down) != 0) return 1;
    // Fork before any engine exists: a child of a threaded parent may only
    // call async-signal-safe functions.
    pid_t child = fork();
    if (child < 0) return 1;
    alarm(2 * kWaitSeconds);
    if (child == 0) {
        close(up[0]);
        close(down[1]);
        _exit(runTarget(up[1], down[0]));
    }
    close(up[1]);
    close(down[0]);
    int rc = runInitiator(up[0], down[1]);
    int status = 0;
    if (waitpid(child, &status, 0) != child) return 1;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        std::fprintf(stderr, "parent: target exited with status %d\n", status);
        return 1;
    }
    if (rc == 0)
        std::printf("two_engines_cxx: OK (%zu bytes written, read, checked)\n",
                    kLen);
    return rc;
}
