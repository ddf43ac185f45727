// Stub for scripts/upstream_check.sh: TENT's rpc.h names Lazy<T> as a
// return type of declarations only, so a declaration suffices.
#pragma once
namespace async_simple::coro {
template <typename T = void>
class Lazy;
}  // namespace async_simple::coro
