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
# (default 1500), for a loaded 2-core machine. Prints the failed rounds and
# each recovery; exits 1 if a recovery exceeded the bound, a target never
# came up, or any byte was wrong.
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
start_target() {
  local n="$1"
  MC_TENT_CONF="$CONF" MPCOMM_TCP_PORT=$TARGET_MPCOMM_PORT \
    "$TEBENCH" --backend=tent --xport_type=mpcomm --metadata_type=p2p \
    --rpc_server_port=$RPC_PORT --seg_type=DRAM \
    --total_buffer_size=$((16 << 20)) >"$LOGDIR/target.$n.log" 2>&1 &
  TARGET_PID=$!
  # Up when it prints its segment; bounded like everything else.
  for _ in $(seq 1 300); do
    if grep -q '^Target segment: ' "$LOGDIR/target.$n.log"; then
      echo "$(now_ms) up" >>"$RESTARTS"
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
MPCOMM_TCP_PORT=$INITIATOR_MPCOMM_PORT "$INITIATOR" \
  --target_seg_name="$SEGMENT" --duration_s="$DURATION" \
  --events="$EVENTS" --cache_ttl_ms=$CACHE_TTL_MS \
  --connect_timeout_ms=$CONNECT_TIMEOUT_MS >"$LOGDIR/initiator.log" 2>&1 &
INIT_PID=$!

END=$(( $(now_ms) + DURATION * 1000 - 2000 ))
n=0
FAILED_START=0
while [ "$(now_ms)" -lt "$END" ] && kill -0 "$INIT_PID" 2>/dev/null; do
  # 2.5-6.5 s between restarts: room to recover within the bound.
  sleep "$(( (RANDOM % 5) + 2 )).$(( RANDOM % 10 ))"
  [ "$(now_ms)" -lt "$END" ] || break
  kill -KILL "$TARGET_PID"; wait "$TARGET_PID" 2>/dev/null
  echo "$(now_ms) killed" >>"$RESTARTS"
  n=$((n + 1))
  start_target "$n" || { FAILED_START=1; break; }
done
wait "$INIT_PID"
INIT_RC=$?
INIT_PID=""
tail -n1 "$LOGDIR/initiator.log"

python3 - "$EVENTS" "$RESTARTS" "$BOUND_MS" <<'PY'
import sys
events = [l.split() for l in open(sys.argv[1]) if l.strip()]
marks = [l.split() for l in open(sys.argv[2]) if l.strip()]
bound = int(sys.argv[3])
ups = [int(t) for t, what in marks if what == "up"][1:]  # restarts only
kills = [int(t) for t, what in marks if what == "killed"]
failed = sum(1 for _, v in events if v == "fail")
corrupt = sum(1 for _, v in events if v == "corrupt")
print(f"chaos: {len(events)} rounds, {failed} failed, {corrupt} with wrong bytes, {len(ups)} restarts")
bad = 0
for i, up in enumerate(ups):
    next_kill = kills[i + 1] if i + 1 < len(kills) else None
    ok = [int(t) for t, v in events if v == "ok" and int(t) >= up
          and (next_kill is None or int(t) < next_kill)]
    if ok:
        took = ok[0] - up
        verdict = "ok" if took <= bound else "OVER BOUND"
        bad += took > bound
        print(f"chaos: restart {i + 1}: recovered {took} ms after the target was up ({verdict}, bound {bound} ms)")
    else:
        window = (next_kill - up) if next_kill else None
        if window is not None and window > bound:
            bad += 1
            print(f"chaos: restart {i + 1}: no good round in {window} ms (bound {bound} ms)")
        else:
            print(f"chaos: restart {i + 1}: killed again before a round ended ({window} ms)")
sys.exit(1 if bad or corrupt else 0)
PY
RC=$?
[ $INIT_RC -ne 0 ] && RC=1
[ $FAILED_START -ne 0 ] && RC=1
echo "chaos: exit $RC (logs in $LOGDIR)"
exit $RC
