#!/usr/bin/env bash
# Sanitizer pass: scripts/check.sh asan|tsan
#
#   asan  AddressSanitizer + UndefinedBehaviorSanitizer (and LeakSanitizer)
#   tsan  ThreadSanitizer, suppressions in tests/tsan.supp
#
# Builds softmpcomm with the same sanitizer, then the USE_MPCOMM=OFF and
# USE_MPCOMM=ON (against that softmpcomm) configurations, and runs every
# ctest suite of all three. The first report stops the process that made it
# with a non-zero exit (halt_on_error), so any report fails its suite and
# the pass.
#
# Env:
#   JOBS         parallel build jobs
#   CHECK_SCOPE  all (default): everything above;
#                ci: softmpcomm and the ON configuration only, which builds
#                and runs every C++ suite the OFF one has plus the MPComm
#                ones (what CI runs on two cores). Left out there: the
#                configure-time checks and the Python script tests, which
#                run no instrumented code of ours.
#   TENT_TEST_REQUIRE_STORES  passed on to the suites: 1 (scripts/run_tests.sh
#                exports it) fails a store case whose server is missing
#                instead of skipping it
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib_build.sh"
source "$ROOT/scripts/lib_sanitize.sh"

SAN="${1:-}"
CHECK_SCOPE="${CHECK_SCOPE:-all}"
case "$SAN" in
  asan)
    TENT_SANITIZE="address,undefined"
    SAN_FLAGS="-fsanitize=address,undefined -fno-omit-frame-pointer"
    ;;
  tsan)
    TENT_SANITIZE="thread"
    SAN_FLAGS="-fsanitize=thread -fno-omit-frame-pointer"
    ;;
  *)
    echo "usage: scripts/check.sh asan|tsan" >&2
    exit 2
    ;;
esac
case "$CHECK_SCOPE" in
  all | ci) ;;
  *)
    echo "check: CHECK_SCOPE must be all or ci, got $CHECK_SCOPE" >&2
    exit 2
    ;;
esac

# halt_on_error: the first report ends the process with a failing status
# (ASan/UBSan exit 1, TSan 66). Every report is also written to a file in
# REPORTS, and any file there fails the pass: a report in a child process
# whose exit status nobody checks (a target a test kills, say) counts too.
REPORTS="$(mktemp -d /tmp/check-$SAN.XXXXXX)"
export ASAN_OPTIONS="halt_on_error=1:detect_leaks=1:abort_on_error=0:log_path=$REPORTS/asan"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:log_path=$REPORTS/ubsan"
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$ROOT/tests/tsan.supp:log_path=$REPORTS/tsan"
report_check() {
  local rc=$? found
  found="$(find "$REPORTS" -type f | sort)"
  if [ -n "$found" ]; then
    for f in $found; do
      echo "==> sanitizer report $f" >&2
      cat "$f" >&2
    done
    echo "check: $SAN: $(echo "$found" | wc -l) sanitizer report(s)" >&2
    rc=1
  fi
  rm -rf "$REPORTS"
  exit "$rc"
}
trap report_check EXIT

# The caller's library path must not reach the sanitizer builds: the
# softmpcomm test binaries find libmpcomm.so.1 through a RUNPATH, which
# LD_LIBRARY_PATH overrides. scripts/run_tests.sh exports the plain
# softmpcomm prefix before calling this script, and with it the TSan pass
# once ran softmpcomm's suites against the uninstrumented library: every
# payload copy and atomic in it was invisible to TSan, which then reported
# races or spent minutes matching suppressions (docs/reliability.md).
unset LD_LIBRARY_PATH

OFF_DIR="$BUILD_SAN_PREFIX-$SAN-off"
SOFT_DIR="$BUILD_SAN_PREFIX-$SAN-soft"
ON_DIR="$BUILD_SAN_PREFIX-$SAN-on"
SAN_PREFIX="$ROOT/.prefix/softmpcomm-$SAN"

# -O1 -g1: the sanitizers' own advice for speed, and line tables are all a
# report needs; the builds compile in about half the time of -O2 -g.
SAN_BUILD_ARGS=("${LAUNCHER_ARGS[@]}"
  "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG"
  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG")

# CHECK_SCOPE=ci in the ON configuration: every test but these.
CI_EXCLUDE='^(tent_mpcomm_configure_.*|tent_bench_report_test)$'

configure_tent() {  # <build dir> <cmake args...>
  local dir="$1"
  shift
  cmake -S "$ROOT" -B "$dir" -DTENT_SANITIZE="$TENT_SANITIZE" \
    -DBUILD_PYTHON=OFF -DBUILD_UNIT_TESTS=ON "${SAN_BUILD_ARGS[@]}" "$@" >/dev/null
}

if [ "$CHECK_SCOPE" = all ]; then
  step "$SAN: configure + build USE_MPCOMM=OFF in $OFF_DIR"
  configure_tent "$OFF_DIR" -DUSE_MPCOMM=OFF
  cmake --build "$OFF_DIR" -j"$JOBS"
  step "$SAN: ctest (USE_MPCOMM=OFF)"
  ctest --test-dir "$OFF_DIR" --output-on-failure -j"$JOBS"
fi

step "$SAN: build softmpcomm in $SOFT_DIR, install into $SAN_PREFIX"
cmake -S "$ROOT/softmpcomm" -B "$SOFT_DIR" \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS="$SAN_FLAGS" \
  -DCMAKE_C_FLAGS="$SAN_FLAGS" "${SAN_BUILD_ARGS[@]}" >/dev/null
cmake --build "$SOFT_DIR" -j"$JOBS"
cmake --install "$SOFT_DIR" --prefix "$SAN_PREFIX" >/dev/null
# expect_loads <binary> <directory>: the dynamic loader resolves
# libmpcomm.so.1 for <binary> from <directory>, the $SAN build.
expect_loads() {
  local found
  found="$(ldd "$1" | awk '$1 == "libmpcomm.so.1" { print $3 }')"
  if [ "$(dirname "$found")" != "$2" ]; then
    echo "check: $1 loads libmpcomm.so.1 from '${found:-nowhere}'," \
      "not from the $SAN build in $2" >&2
    exit 1
  fi
  echo "$(basename "$1"): libmpcomm.so.1 from $2"
}
# The test binaries of softmpcomm's build tree are in its tests/ folder.
SOFT_TESTS="$SOFT_DIR/tests"
expect_loads "$SOFT_TESTS/softmpcomm_loopback_test" "$SOFT_DIR"
step "$SAN: ctest (softmpcomm)"
# Its install test configures and builds a consumer project of its own:
# through CXXFLAGS/CFLAGS that one is instrumented too (ASan must be the
# first library loaded, so an uninstrumented consumer could not run).
CXXFLAGS="$SAN_FLAGS" CFLAGS="$SAN_FLAGS" \
  ctest --test-dir "$SOFT_DIR" --output-on-failure

step "$SAN: configure + build USE_MPCOMM=ON against $SAN_PREFIX in $ON_DIR"
configure_tent "$ON_DIR" -DUSE_MPCOMM=ON -DMPCOMM_ROOT="$SAN_PREFIX"
export LD_LIBRARY_PATH="$SAN_PREFIX/lib"
cmake --build "$ON_DIR" -j"$JOBS"
expect_loads "$ON_DIR/src/libtent.so" "$SAN_PREFIX/lib"
if [ "$CHECK_SCOPE" = all ]; then
  step "$SAN: ctest (USE_MPCOMM=ON, softmpcomm)"
  TENT_MPCOMM_TEST_REQUIRE_PROVIDER=1 \
    ctest --test-dir "$ON_DIR" --output-on-failure -j"$JOBS"
else
  step "$SAN: ctest (USE_MPCOMM=ON, softmpcomm; every C++ suite)"
  TENT_MPCOMM_TEST_REQUIRE_PROVIDER=1 \
    ctest --test-dir "$ON_DIR" --output-on-failure -j"$JOBS" -E "$CI_EXCLUDE"
fi
step "$SAN: no sanitizer reports"
