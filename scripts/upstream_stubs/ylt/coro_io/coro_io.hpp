// Stub for scripts/upstream_check.sh: TENT's rpc.h includes it, uses nothing.
#pragma once
