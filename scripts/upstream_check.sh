#!/usr/bin/env bash
# Compiles the MPComm transport's units (syntax only) against a Mooncake
# checkout's TENT headers, the way they would build in Mooncake's own tree:
#
#   scripts/upstream_check.sh <mooncake checkout> [mpcomm include dir]
#                             [--build <dir>]...
#
# Include order: our include/tent/transport/mpcomm/ (the transport's own
# headers, shadowing any of the checkout's), then the checkout's
# mooncake-transfer-engine/tent/include with docs/upstream/runtime.patch
# applied to a private copy when that patch exists, then the stub headers in
# scripts/upstream_stubs/ for third-party includes the transport never uses.
# mpcomm_adapter.cpp is compiled twice: as the stub (no USE_MPCOMM) and as
# the provider-backed adapter (-DUSE_MPCOMM against mpcomm.h from the second
# argument, default softmpcomm/include).
#
# With --build (a build directory of this tree; may be given twice), it
# also builds and runs the checkout's own tests of the four units,
# unmodified, against our headers and that build's libtent:
# tent/tests/mpcomm_boundary_test.cpp against the first build named, and
# tent/tests/mpcomm_transport_test.cpp against the first USE_MPCOMM=ON
# build named (else the first), with LD_LIBRARY_PATH at that build's
# MPCOMM_ROOT/lib so that it moves bytes through the provider. Against a
# USE_MPCOMM=ON build a skipped test counts as a failure: the provider is
# there, so nothing may be skipped for want of it.
#
# It also compares the C API: every function and macro of the checkout's
# tent/transfer_engine.h must be declared alike by ours, and every struct
# both declare must have the same size and field offsets
# (scripts/c_abi_probe.py writes the probes; CC compiles them).
#
# Prints one line per unit with its error count, one per C struct, one for
# the C functions and one per test with its pass/fail/skip counts; exits 1 if any unit has errors or a test does not
# compile or fails, 2 on bad arguments.
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CXX="${CXX:-g++}"
USAGE="usage: $0 <mooncake checkout> [mpcomm include dir] [--build <dir>]..."

BUILDS=()
POSITIONAL=()
while [ $# -gt 0 ]; do
  case "$1" in
    --build)
      if [ $# -lt 2 ] || [ -z "$2" ]; then
        echo "upstream_check: --build needs a build directory" >&2
        exit 2
      fi
      BUILDS+=("$2")
      shift 2
      ;;
    --build=*)
      BUILDS+=("${1#--build=}")
      shift
      ;;
    -*)
      echo "upstream_check: unknown option '$1'" >&2
      echo "$USAGE" >&2
      exit 2
      ;;
    *)
      POSITIONAL+=("$1")
      shift
      ;;
  esac
done
if [ "${#POSITIONAL[@]}" -lt 1 ] || [ "${#POSITIONAL[@]}" -gt 2 ]; then
  echo "$USAGE" >&2
  exit 2
fi
CHECKOUT="${POSITIONAL[0]}"
MPCOMM_INC="${POSITIONAL[1]:-$ROOT/softmpcomm/include}"
for build in "${BUILDS[@]}"; do
  if [ ! -f "$build/CMakeCache.txt" ] || [ ! -f "$build/src/libtent.so" ]; then
    echo "upstream_check: --build $build is not a build of this tree (no CMakeCache.txt or src/libtent.so)" >&2
    exit 2
  fi
done
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

# --- the C API: upstream's functions, macros and struct layouts ---------
# A C program written against upstream's transfer_engine.h must compile
# against ours and see the same structs: one line per struct both declare
# (size and every field's offset, compiled once against each header), one
# for the functions and macros.
CC="${CC:-gcc}"
UP_HEADER="$TENT_ROOT/include/tent/transfer_engine.h"
OUR_HEADER="$ROOT/include/tent/transfer_engine.h"
c_abi_check() {
  local probe="$ROOT/scripts/c_abi_probe.py" counts
  if ! python3 "$probe" layout "$UP_HEADER" "$OUR_HEADER" "$WORK/layout.c" ||
     ! "$CC" -std=c11 -I "$TENT_ROOT/include" "$WORK/layout.c" -o "$WORK/layout_up" ||
     ! "$CC" -std=c11 -I "$ROOT/include" "$WORK/layout.c" -o "$WORK/layout_ours"; then
    echo "C API layout probe does not build"
    failed=1
    return
  fi
  local up ours
  up="$("$WORK/layout_up")"
  ours="$("$WORK/layout_ours")"
  while IFS= read -r line; do
    local name="${line#struct }"
    name="${name%% *}"
    local mine
    mine="$(grep "^struct $name " <<<"$ours" | head -1)"
    if [[ "$line" == *" missing in ours" || "$line" == *" fields differ:"* ]]; then
      printf '%-40s %s\n' "C struct $name" "MISMATCH: ${line#struct $name }"
      failed=1
    elif [ "$line" = "$mine" ]; then
      printf '%-40s same layout (%s)\n' "C struct $name" "${line#struct $name }"
    else
      printf '%-40s MISMATCH\n    upstream: %s\n    ours:     %s\n' \
        "C struct $name" "$line" "$mine"
      failed=1
    fi
  done <<<"$up"
  if ! counts="$(python3 "$probe" prototypes "$UP_HEADER" "$WORK/proto.c")"; then
    echo "C API prototype probe: no functions found in $UP_HEADER"
    failed=1
    return
  fi
  if "$CC" -std=c11 -fsyntax-only -I "$ROOT/include" "$WORK/proto.c" \
      > "$WORK/proto.log" 2>&1; then
    printf '%-40s %s functions declared alike, %s macros equal\n' \
      "C API" ${counts}
  else
    printf '%-40s %d errors\n' "C API" "$(grep -c ' error: ' "$WORK/proto.log")"
    grep ' error: ' "$WORK/proto.log" | head -20 | sed 's/^/    /'
    failed=1
  fi
}
c_abi_check

# --- the checkout's own tests, against our headers and libtent ---------
cache_value() {  # cache_value <build> <variable>
  sed -n "s/^$2:[A-Z]*=//p" "$1/CMakeCache.txt" | head -1
}

# run_upstream_test <test source> <build>: compiles, runs, prints counts.
run_upstream_test() {
  local src="$TENT_ROOT/tests/$1" build="$2"
  local name="${1%.cpp}" bin="$WORK/${1%.cpp}" log="$WORK/${1%.cpp}.run.log"
  local label="upstream $1"
  if [ ! -f "$src" ]; then
    printf '%-40s missing in the checkout\n' "$label"
    failed=1
    return
  fi
  local use_mpcomm sanitize mpcomm_lib=""
  use_mpcomm=$(cache_value "$build" USE_MPCOMM)
  sanitize=$(cache_value "$build" TENT_SANITIZE)
  local flags=(-std=c++17 -g -O1 -pthread -I "$ROOT/include"
               $(pkg-config --cflags jsoncpp 2>/dev/null || echo -I/usr/include/jsoncpp))
  [ -n "$sanitize" ] && flags+=(-fsanitize="$sanitize" -fno-omit-frame-pointer)
  if [ "$use_mpcomm" = ON ]; then
    flags+=(-DTENT_HAVE_MPCOMM=1)
    mpcomm_lib="$(cache_value "$build" MPCOMM_ROOT)/lib"
  fi
  if ! "$CXX" "${flags[@]}" "$src" -o "$bin" \
      -L "$build/src" -Wl,-rpath,"$build/src" ${mpcomm_lib:+-Wl,-rpath-link,"$mpcomm_lib"} \
      -ltent -lgtest_main -lgtest -lglog -lgflags -ljsoncpp \
      > "$WORK/$name.build.log" 2>&1; then
    printf '%-40s does not compile (%d errors) against %s\n' "$label" \
      "$(grep -c ' error: ' "$WORK/$name.build.log")" "$build"
    grep ' error: ' "$WORK/$name.build.log" | head -20 | sed 's/^/    /'
    failed=1
    return
  fi
  local rc=0
  LD_LIBRARY_PATH="${mpcomm_lib:+$mpcomm_lib:}${LD_LIBRARY_PATH:-}" \
    timeout 300 "$bin" > "$log" 2>&1 || rc=$?
  local passed failed_n skipped
  passed=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) tests\?\..*/\1/p' "$log" | tail -1)
  failed_n=$(sed -n 's/^\[  FAILED  \] \([0-9]*\) tests\?, listed below.*/\1/p' "$log" | tail -1)
  skipped=$(sed -n 's/^\[  SKIPPED \] \([0-9]*\) tests\?, listed below.*/\1/p' "$log" | tail -1)
  printf '%-40s %s passed, %s failed, %s skipped (exit %d; %s)\n' "$label" \
    "${passed:-0}" "${failed_n:-0}" "${skipped:-0}" "$rc" "$build"
  if [ "$rc" -ne 0 ] || [ -z "$passed" ] || [ "${failed_n:-0}" -ne 0 ] ||
     { [ "$use_mpcomm" = ON ] && [ "${skipped:-0}" -ne 0 ]; }; then
    grep -E '^\[  (FAILED|SKIPPED) |Failure|Skipped|error' "$log" | head -20 | sed 's/^/    /'
    failed=1
  fi
}

if [ "${#BUILDS[@]}" -gt 0 ]; then
  on_build=""
  for build in "${BUILDS[@]}"; do
    if [ -z "$on_build" ] && [ "$(cache_value "$build" USE_MPCOMM)" = ON ]; then
      on_build="$build"
    fi
  done
  run_upstream_test mpcomm_boundary_test.cpp "${BUILDS[0]}"
  run_upstream_test mpcomm_transport_test.cpp "${on_build:-${BUILDS[0]}}"
fi

commit=$(git -C "$CHECKOUT" rev-parse HEAD 2>/dev/null || echo unknown)
echo "checkout: $CHECKOUT ($commit)"
exit "$failed"
