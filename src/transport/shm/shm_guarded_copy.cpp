// guardedCopy(): a memcpy that a SIGBUS returns from (see the header).
#include "transport/shm/shm_guarded_copy.h"

#include <setjmp.h>
#include <signal.h>

#include <atomic>
#include <cstring>
#include <mutex>

namespace mooncake::tent {

namespace {

// The recovery point of the copy a thread is running. The handler writes
// fault_addr, read after siglongjmp(): an atomic, so no register copy of it
// survives the jump (lock-free atomics are async-signal-safe).
struct Guard {
    sigjmp_buf env;
    uintptr_t dst_begin = 0, dst_end = 0;
    uintptr_t src_begin = 0, src_end = 0;
    std::atomic<uintptr_t> fault_addr{0};
};

// The default TLS model: libtent is dlopen()ed by Python, where an
// initial-exec block may not fit ("cannot allocate memory in static TLS
// block"). A dynamically loaded library's TLS is set up on a thread's first
// access, which may allocate; the copying thread has made that access
// before it can fault, and the handler reads t_guard only while some copy
// is guarded (g_guarded), so a SIGBUS of a thread that never copied does
// not touch it.
thread_local Guard* t_guard = nullptr;
std::atomic<int> g_guarded{0};

struct sigaction g_previous;
std::once_flag g_installed;

bool inside(uintptr_t addr, uintptr_t begin, uintptr_t end) {
    return addr >= begin && addr < end;
}

// A SIGBUS that is not a guarded copy's: do what would have happened
// without us.
void passOn(int sig, siginfo_t* info, void* context) {
    if (g_previous.sa_flags & SA_SIGINFO) {
        if (g_previous.sa_sigaction)
            g_previous.sa_sigaction(sig, info, context);
        return;
    }
    if (g_previous.sa_handler != SIG_DFL && g_previous.sa_handler != SIG_IGN) {
        g_previous.sa_handler(sig);
        return;
    }
    const bool sent = info->si_code <= 0;  // kill(), raise(), sigqueue()
    if (g_previous.sa_handler == SIG_IGN && sent) return;
    // The default action: a fault re-executes the faulting access once this
    // handler returns and is delivered again, now fatally; a sent signal is
    // raised again.
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(SIGBUS, &dfl, nullptr);
    if (sent) raise(SIGBUS);
}

void onSigbus(int sig, siginfo_t* info, void* context) {
    Guard* guard =
        g_guarded.load(std::memory_order_acquire) > 0 ? t_guard : nullptr;
    const auto addr = reinterpret_cast<uintptr_t>(info->si_addr);
    if (guard && info->si_code > 0 &&
        (inside(addr, guard->dst_begin, guard->dst_end) ||
         inside(addr, guard->src_begin, guard->src_end))) {
        guard->fault_addr.store(addr, std::memory_order_relaxed);
        t_guard = nullptr;
        // No mask to restore: SA_NODEFER kept SIGBUS unblocked.
        siglongjmp(guard->env, 1);
    }
    passOn(sig, info, context);
}

void install() {
    struct sigaction action {};
    action.sa_sigaction = onSigbus;
    sigemptyset(&action.sa_mask);
    // SA_NODEFER: the handler leaves by siglongjmp() without restoring a
    // signal mask (a sigprocmask() per copy otherwise), so SIGBUS must not
    // be blocked while it runs.
    action.sa_flags = SA_SIGINFO | SA_NODEFER | SA_ONSTACK;
    sigaction(SIGBUS, &action, &g_previous);
}

}  // namespace

bool guardedCopy(void* dst, const void* src, size_t length, CopyFault& fault) {
    std::call_once(g_installed, install);
    Guard guard;
    guard.dst_begin = reinterpret_cast<uintptr_t>(dst);
    guard.dst_end = guard.dst_begin + length;
    guard.src_begin = reinterpret_cast<uintptr_t>(src);
    guard.src_end = guard.src_begin + length;
    if (sigsetjmp(guard.env, 0) != 0) {
        // Back from onSigbus(), which cleared t_guard.
        g_guarded.fetch_sub(1, std::memory_order_release);
        fault.addr = guard.fault_addr.load(std::memory_order_relaxed);
        return false;
    }
    t_guard = &guard;
    g_guarded.fetch_add(1, std::memory_order_acq_rel);
    std::atomic_signal_fence(std::memory_order_seq_cst);
    std::memcpy(dst, src, length);
    std::atomic_signal_fence(std::memory_order_seq_cst);
    t_guard = nullptr;
    g_guarded.fetch_sub(1, std::memory_order_release);
    return true;
}

}  // namespace mooncake::tent
