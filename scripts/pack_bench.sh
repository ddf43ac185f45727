#!/usr/bin/env bash
# Packs what scripts/bench_recheck.py needs into one folder that runs on
# another x86-64 Linux host with no compiler and no Debian packages (an
# RDMA node, a larger machine to measure on):
#
#   scripts/pack_bench.sh [--no-build] [DEST]      (DEST: bench/pack)
#
# DEST is laid out as this repository is, so the scripts' defaults find
# everything in it:
#   scripts/         bench_recheck.py, bench_report.py, tebench_pair.sh
#   build-mpcomm/benchmark/tebench
#   .prefix/softmpcomm/lib/
#                    softmpcomm's libmpcomm, libtent and every other shared
#                    library tebench loads, except glibc's own (bench_recheck
#                    puts this folder first on LD_LIBRARY_PATH, which the
#                    loader searches before the build's RUNPATH)
#   bench/results.json
#                    this host's bench.sh results, when there are any
# On the other host, with python3 and bash:
#   python3 DEST/scripts/bench_recheck.py --rounds=5
# measures there the cases and tcp steps this host's run left under the
# goals; --results=FILE names another run's results.
# Builds softmpcomm and tebench first (as bench.sh does) unless --no-build,
# which packs what $BUILD_ON and $SOFT_PREFIX already hold.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib_build.sh"

BUILD=1
DEST="$ROOT/bench/pack"
for arg in "$@"; do
  case "$arg" in
    --no-build) BUILD=0 ;;
    -h|--help) sed -n '2,24p' "${BASH_SOURCE[0]}"; exit 0 ;;
    -*) echo "pack_bench: unknown argument '$arg' (expected --no-build or DEST)" >&2; exit 2 ;;
    *) DEST="$arg" ;;
  esac
done

if [ $BUILD -eq 1 ]; then
  "$ROOT/scripts/install_deps.sh"
  build_softmpcomm
  build_on tebench
fi
TEBENCH="$BUILD_ON/benchmark/tebench"
# ldd prints a library found through a relative LD_LIBRARY_PATH entry with
# that relative path; an absolute prefix keeps every path it prints whole.
[ -d "$SOFT_PREFIX" ] && SOFT_PREFIX="$(cd "$SOFT_PREFIX" && pwd)"
if [ ! -x "$TEBENCH" ]; then
  echo "pack_bench: $TEBENCH is missing; build it first (run without --no-build)" >&2
  exit 1
fi

# Every library the loader resolves for tebench here, softmpcomm's first
# (copied below, all but glibc's own, which must match the other host's
# loader).
deps="$(LD_LIBRARY_PATH="$SOFT_PREFIX/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" ldd "$TEBENCH")"
if grep -q 'not found' <<<"$deps"; then
  echo "pack_bench: tebench has unresolved libraries:" >&2
  grep 'not found' <<<"$deps" >&2
  exit 1
fi

LIB="$DEST/.prefix/softmpcomm/lib"
# DEST is deleted and made again, so it must be absent, empty or a pack.
if [ -e "$DEST" ] && [ -n "$(ls -A "$DEST" 2>/dev/null)" ] &&
  [ ! -f "$DEST/build-mpcomm/benchmark/tebench" ]; then
  echo "pack_bench: $DEST exists and is not a pack; name a new folder" >&2
  exit 1
fi
rm -rf "$DEST"
# bench/ also holds bench_recheck.py's default --out.
mkdir -p "$DEST/scripts" "$DEST/build-mpcomm/benchmark" "$DEST/bench" "$LIB"
cp "$TEBENCH" "$DEST/build-mpcomm/benchmark/"
for s in bench_recheck.py bench_report.py tebench_pair.sh; do
  cp "$ROOT/scripts/$s" "$DEST/scripts/"
done
[ -f "$ROOT/bench/results.json" ] && cp "$ROOT/bench/results.json" "$DEST/bench/"

count=0
while read -r name path; do
  case "$name" in
    libc.so.* | libm.so.* | libpthread.so.* | libdl.so.* | librt.so.* | ld-linux*) continue ;;
  esac
  cp -L "$path" "$LIB/$name"
  count=$((count + 1))
done < <(awk '$2 == "=>" && $3 ~ /\// {print $1, $3}' <<<"$deps")

echo "pack_bench: $DEST: tebench, $count libraries, $(du -sh "$DEST" | cut -f1) in all"
echo "pack_bench: on the other host: python3 $DEST/scripts/bench_recheck.py --rounds=5"
