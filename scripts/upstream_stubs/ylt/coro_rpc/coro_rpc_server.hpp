// Stub for scripts/upstream_check.sh: only the name TENT's rpc.h mentions.
#pragma once
namespace coro_rpc {
class coro_rpc_server;
}  // namespace coro_rpc
