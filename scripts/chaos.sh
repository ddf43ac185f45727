#!/usr/bin/env bash
# Chaos run: a tebench target over MPComm is killed (SIGKILL) and restarted
# under the same segment name at random intervals while tent_chaos_initiator
# runs consistency rounds (WRITE, READ back, compare) against it.
#
#   scripts/chaos.sh [--duration S] [--bound-ms MS] [--tebench PATH]
#                    [--initiator PATH]
#
# Defaults: 60 s; binaries from the USE_MPCOMM=ON build (built if missing).
# The bound is the time from a restarted target being up to the initiator's
# next good round: metadata/cache_ttl_ms + transports/mpcomm/connect_timeout_ms
# of the initiator (1000 + 1500) plus a scheduling margin, CHAOS_MARGIN_MS
# (default 1500), for a loaded 2-core machine. Every kill comes more than
# the bound after the target was last up, and none comes unless the run
# has the bound left after the restart, so each restart has its whole
# bound to recover in. Prints the failed rounds and each recovery; exits 1
# unless a good round came before the first kill and after every restart
# within the bound, and if no restart happened, a target never came up, or
# any byte was wrong.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DURATION=60
TEBENCH=""
INITIATOR=""
CACHE_TTL_MS=1000
CONNECT_TIMEOUT_MS=1500
MARGIN_MS="${CHAOS_MARGIN_MS:-1500}"
BOUND_MS=$((CACHE_TTL_MS + CONNECT_TIMEOUT_MS + MARGIN_MS))
while [ $# -gt 0 ]; do
  case "$1" in
    --duration) DURATION="$2"; shift 2 ;;
    --bound-ms) BOUND_MS="$2"; shift 2 ;;
    --tebench) TEBENCH="$2"; shift 2 ;;
    --initiator) INITIATOR="$2"; shift 2 ;;
    *) echo "chaos: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
if [ -z "$TEBENCH" ] || [ -z "$INITIATOR" ]; then
  source "$ROOT/scripts/lib_build.sh"
  [ -x "$SOFT_PREFIX/lib/libmpcomm.so" ] || build_softmpcomm
  build_on tebench tent_chaos_initiator
  TEBENCH="$BUILD_ON/benchmark/tebench"
  INITIATOR="$BUILD_ON/tests/tent_chaos_initiator"
fi

LOGDIR="$(mktemp -d /tmp/chaos.XXXXXX)"
EVENTS="$LOGDIR/events"
RESTARTS="$LOGDIR/restarts"
: >"$EVENTS"; : >"$RESTARTS"
# Fixed ports, so that a restart keeps the segment name and MPComm port:
# 17100-17999, between the RPC range (15000-17000) and the test suites'
# ranges (2000-14999, 18000-31999), below the kernel's ephemeral ports.
RPC_PORT=$((17100 + ($$ % 300) * 3))
TARGET_MPCOMM_PORT=$((RPC_PORT + 1))
INITIATOR_MPCOMM_PORT=$((RPC_PORT + 2))
CONF='{"rpc_server_hostname":"127.0.0.1","transports":{"mpcomm":{"enable":true},"tcp":{"enable":false}}}'
now_ms() { date +%s%3N; }

TARGET_PID=""
START_TOOK_MS=0
start_target() {
  local n="$1" launched
  launched=$(now_ms)
  MC_TENT_CONF="$CONF" MPCOMM_TCP_PORT=$TARGET_MPCOMM_PORT \
    "$TEBENCH" --backend=tent --xport_type=mpcomm --metadata_type=p2p \
    --rpc_server_port=$RPC_PORT --seg_type=DRAM \
    --total_buffer_size=$((16 << 20)) >"$LOGDIR/target.$n.log" 2>&1 &
  TARGET_PID=$!
  # Up when it prints its segment; bounded like everything else.
  for _ in $(seq 1 300); do
    if grep -q '^Target segment: ' "$LOGDIR/target.$n.log"; then
      UP_MS=$(now_ms)
      START_TOOK_MS=$((UP_MS - launched))
      echo "$UP_MS up" >>"$RESTARTS"
      return 0
    fi
    kill -0 "$TARGET_PID" 2>/dev/null || break
    sleep 0.05
  done
  echo "chaos: target $n did not come up; its log:" >&2
  cat "$LOGDIR/target.$n.log" >&2
  return 1
}
cleanup() {
  [ -n "$TARGET_PID" ] && kill -KILL "$TARGET_PID" 2>/dev/null
  [ -n "${INIT_PID:-}" ] && kill -KILL "$INIT_PID" 2>/dev/null
  wait 2>/dev/null
}
trap cleanup EXIT

start_target 0 || exit 1
SEGMENT="127.0.0.1:$RPC_PORT"
INIT_START_MS=$(now_ms)
MPCOMM_TCP_PORT=$INITIATOR_MPCOMM_PORT "$INITIATOR" \
  --target_seg_name="$SEGMENT" --duration_s="$DURATION" \
  --events="$EVENTS" --cache_ttl_ms=$CACHE_TTL_MS \
  --connect_timeout_ms=$CONNECT_TIMEOUT_MS >"$LOGDIR/initiator.log" 2>&1 &
INIT_PID=$!

# The initiator stops after INIT_END; a kill needs time for the restart
# (twice the last start took, at least 1 s) and then the whole bound
# before that.
INIT_END=$((INIT_START_MS + DURATION * 1000))
n=0
FAILED_START=0
while kill -0 "$INIT_PID" 2>/dev/null; do
  # The bound plus 0.5-2 s after the target came up: a restart that has
  # not recovered by its next kill is over the bound, never excused.
  next_kill=$((UP_MS + BOUND_MS + 500 + (RANDOM % 1500)))
  restart_ms=$((2 * START_TOOK_MS > 1000 ? 2 * START_TOOK_MS : 1000))
  [ $((next_kill + restart_ms + BOUND_MS)) -lt "$INIT_END" ] || break
  wait_ms=$((next_kill - $(now_ms)))
  if [ "$wait_ms" -gt 0 ]; then
    sleep "$((wait_ms / 1000)).$(printf '%03d' $((wait_ms % 1000)))"
  fi
  kill -0 "$INIT_PID" 2>/dev/null || break
  kill -KILL "$TARGET_PID"; wait "$TARGET_PID" 2>/dev/null
  echo "$(now_ms) killed" >>"$RESTARTS"
  n=$((n + 1))
  start_target "$n" || { FAILED_START=1; break; }
done
wait "$INIT_PID"
INIT_RC=$?
INIT_PID=""
tail -n1 "$LOGDIR/initiator.log"

python3 - "$EVENTS" "$RESTARTS" "$BOUND_MS" "$INIT_START_MS" <<'PY'
import sys
events = [l.split() for l in open(sys.argv[1]) if l.strip()]
marks = [l.split() for l in open(sys.argv[2]) if l.strip()]
bound = int(sys.argv[3])
init_start = int(sys.argv[4])
ups = [int(t) for t, what in marks if what == "up"][1:]  # restarts only
kills = [int(t) for t, what in marks if what == "killed"]
oks = [int(t) for t, v in events if v == "ok"]
failed = sum(1 for _, v in events if v == "fail")
corrupt = sum(1 for _, v in events if v == "corrupt")
print(f"chaos: {len(events)} rounds, {failed} failed, {corrupt} with wrong bytes, {len(ups)} restarts")
bad = 0
if not ups:
    bad += 1
    print("chaos: no restart happened: the run is too short for the bound")
first_kill = kills[0] if kills else None
before = [t for t in oks if first_kill is None or t < first_kill]
if before:
    print(f"chaos: first good round {before[0] - init_start} ms after the initiator started")
else:
    bad += 1
    print("chaos: no good round before the first kill")
for i, up in enumerate(ups):
    next_kill = kills[i + 1] if i + 1 < len(kills) else None
    ok = [t for t in oks if t >= up and (next_kill is None or t < next_kill)]
    if ok:
        took = ok[0] - up
        verdict = "ok" if took <= bound else "OVER BOUND"
        bad += took > bound
        print(f"chaos: restart {i + 1}: recovered {took} ms after the target was up ({verdict}, bound {bound} ms)")
    else:
        bad += 1
        window = f"{next_kill - up} ms" if next_kill else "the rest of the run"
        print(f"chaos: restart {i + 1}: no good round in {window} (bound {bound} ms)")
sys.exit(1 if bad or corrupt else 0)
PY
RC=$?
[ $INIT_RC -ne 0 ] && RC=1
[ $FAILED_START -ne 0 ] && RC=1
echo "chaos: exit $RC (logs in $LOGDIR)"
exit $RC
