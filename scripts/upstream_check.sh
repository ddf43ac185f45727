#!/usr/bin/env bash
# Compiles the MPComm transport's units (syntax only) against a Mooncake
# checkout's TENT headers, the way they would build in Mooncake's own tree:
#
#   scripts/upstream_check.sh <mooncake checkout> [mpcomm include dir]
#
# Include order: our include/tent/transport/mpcomm/ (the transport's own
# headers, shadowing any of the checkout's), then the checkout's
# mooncake-transfer-engine/tent/include with docs/upstream/runtime.patch
# applied to a private copy when that patch exists, then the stub headers in
# scripts/upstream_stubs/ for third-party includes the transport never uses.
# mpcomm_adapter.cpp is compiled twice: as the stub (no USE_MPCOMM) and as
# the provider-backed adapter (-DUSE_MPCOMM against mpcomm.h from the second
# argument, default tests/softmpcomm/include).
#
# Prints one line per unit with its error count; exits 1 if any is non-zero,
# 2 on bad arguments.
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CHECKOUT="${1:-}"
MPCOMM_INC="${2:-$ROOT/tests/softmpcomm/include}"
CXX="${CXX:-g++}"

if [ -z "$CHECKOUT" ]; then
  echo "usage: $0 <mooncake checkout> [mpcomm include dir]" >&2
  exit 2
fi
TENT_ROOT="$CHECKOUT/mooncake-transfer-engine/tent"
if [ ! -f "$TENT_ROOT/include/tent/runtime/transport.h" ]; then
  echo "upstream_check: $CHECKOUT has no mooncake-transfer-engine/tent/include/tent/runtime/transport.h" >&2
  exit 2
fi
if [ ! -f "$MPCOMM_INC/mpcomm.h" ]; then
  echo "upstream_check: no mpcomm.h in $MPCOMM_INC" >&2
  exit 2
fi

WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

# The transport's headers alone, so that the checkout supplies the runtime.
mkdir -p "$WORK/overlay/tent/transport"
cp -r "$ROOT/include/tent/transport/mpcomm" "$WORK/overlay/tent/transport/"

mkdir -p "$WORK/tent"
# include/ is what the units compile against; src/ is copied too so that
# the runtime patch, which also touches upstream's runtime sources, applies
# whole (a patch that does not apply fails the check).
cp -r "$TENT_ROOT/include" "$TENT_ROOT/src" "$WORK/tent/"
PATCH="$ROOT/docs/upstream/runtime.patch"
if [ -f "$PATCH" ]; then
  if ! patch -s -p1 -d "$WORK/tent" < "$PATCH"; then
    echo "upstream_check: docs/upstream/runtime.patch does not apply to $CHECKOUT" >&2
    exit 1
  fi
  echo "applied docs/upstream/runtime.patch"
else
  echo "no runtime patch (docs/upstream/runtime.patch absent)"
fi

FLAGS=(-std=c++20 -fsyntax-only -w
       -I "$WORK/overlay" -I "$WORK/tent/include"
       -I "$ROOT/scripts/upstream_stubs")

failed=0
check() {
  local label="$1"; shift
  local log="$WORK/$label.log"
  "$CXX" "${FLAGS[@]}" "$@" > "$log" 2>&1
  local errors
  errors=$(grep -c ' error: ' "$log")
  printf '%-40s %d errors\n' "$label" "$errors"
  if [ "$errors" -ne 0 ] || ! "$CXX" "${FLAGS[@]}" "$@" >/dev/null 2>&1; then
    grep ' error: ' "$log" | head -20 | sed 's/^/    /'
    failed=1
  fi
}

SRC="$ROOT/src/transport/mpcomm"
for unit in "$SRC"/*.cpp; do
  check "$(basename "$unit")" "$unit"
done
check "mpcomm_adapter.cpp (USE_MPCOMM)" -DUSE_MPCOMM -I "$MPCOMM_INC" \
  "$SRC/mpcomm_adapter.cpp"

# The runtime sources the patch touches must compile no worse than before
# it (upstream's own files may already need headers these stubs lack).
if [ -f "$PATCH" ]; then
  for unit in $(grep -E '^\+\+\+ b/src/.*\.cpp' "$PATCH" | sed 's|^+++ b/||; s|\t.*||'); do
    count() {
      "$CXX" -std=c++20 -fsyntax-only -w -I "$1/include" \
        -I "$ROOT/scripts/upstream_stubs" "$1/$unit" 2>&1 | grep -c ' error: '
    }
    before=$(count "$TENT_ROOT")
    after=$(count "$WORK/tent")
    printf '%-40s %d errors (unpatched: %d)\n' "patched $(basename "$unit")" \
      "$after" "$before"
    [ "$after" -le "$before" ] || failed=1
  done
fi

commit=$(git -C "$CHECKOUT" rev-parse HEAD 2>/dev/null || echo unknown)
echo "checkout: $CHECKOUT ($commit)"
exit "$failed"
