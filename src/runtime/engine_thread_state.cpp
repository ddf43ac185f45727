// EngineThreadState: the per-thread pointer and its owner (see the header
// for how the pointer is reached).
#include "runtime/engine_thread_state.h"

namespace mooncake::tent {

namespace {

// Constant-initialised and trivially destructible, so an access needs no
// guard; null until the thread's first get(), and again once its owner
// below is destroyed.
thread_local EngineThreadState* t_state = nullptr;

// Owns the state; reached only on a thread's first get().
struct Owner {
    EngineThreadState state;
    ~Owner() { t_state = nullptr; }
};

EngineThreadState& create() {
    thread_local Owner owner;
    t_state = &owner.state;
    return owner.state;
}

}  // namespace

EngineThreadState& EngineThreadState::get() {
    EngineThreadState* state = t_state;
    return state != nullptr ? *state : create();
}

EngineSlotCache& threadSlotCache() { return EngineThreadState::get().slots; }

RemoteDescMemo& RemoteDescMemo::ofThread() {
    return EngineThreadState::get().memo;
}

}  // namespace mooncake::tent
