// EngineThreadState: what the engine keeps per calling thread (private
// header): the batch slot it freed last and its descriptor memo.
//
// Why one object behind one pointer: libtent is a shared library, so a
// thread_local there is reached through __tls_get_addr (the general-
// dynamic model), and one with a destructor also through its guard: two
// or three calls per access, several accesses per request. This pointer
// is trivially destructible (no guard) and compiled with TLS descriptors
// (-mtls-dialect=gnu2, src/CMakeLists.txt): where the loader placed
// libtent's TLS in the static block, an access is a load off the thread
// pointer and a two-instruction call. The initial-exec model would be a
// plain load, but it makes the loader put all of libtent's TLS in the
// static block, which a dlopen()ed libtent (the Python modules') does not
// fit in: the import fails. The object itself is created on a thread's
// first call.
#pragma once

#include "runtime/engine_batch_table.h"
#include "runtime/remote_desc_memo.h"

namespace mooncake::tent {

struct EngineThreadState {
    EngineSlotCache slots;
    RemoteDescMemo memo;

    // The calling thread's state, created on its first call and destroyed
    // at its exit (the cached slot goes back to its table then).
    static EngineThreadState& get();
};

}  // namespace mooncake::tent
