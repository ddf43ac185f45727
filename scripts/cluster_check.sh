#!/usr/bin/env bash
# A cluster on one host: NODES engine processes (benchmark/cluster_node.cpp)
# find each other by segment name through a real metadata store, and each
# writes to and reads back from every other one (NODES x (NODES-1) ordered
# pairs) byte-exact. Midway one node is killed (SIGKILL) and, after
# OUTAGE_S seconds, started again under the same name. Per run it prints the
# wall time, failed and recovered transfers, the store's key count, and each
# process's peak resident memory (VmHWM), open descriptors, sockets and
# threads, with min/median/max. Exits non-zero on any byte mismatch, any
# pair not recovered within the node's --pair_timeout_ms, a node that did
# not start or finish, a run past RUN_TIMEOUT_S, or (KILL_NODE >= 0) a
# killed node that was not reached again: its restarted process must move
# all its pairs byte-exact, and at least one other node must have failed
# on it and then passed (a "RECOVERED node-<i> -> node-<KILL_NODE>" line
# after its hold point), or a store that did not hold one key per node
# while they ran and none once they exited. 77 when a store's server is not
# installed, 1 then under TENT_TEST_REQUIRE_STORES=1.
#
#   scripts/cluster_check.sh
#
# Env (defaults in brackets):
#   NODES [32]  STORES ["redis etcd"]  TRANSPORTS ["tcp mpcomm"]
#   SLOT_BYTES [65536]  bytes per transfer
#   KILL_NODE [NODES/2]  the node killed midway; -1 kills none
#   OUTAGE_S [2]  how long the killed node stays down
#   STEADY_S [0]  after the pairs, the nodes keep writing to every peer
#     (STEADY_THREADS [4] threads each, segments held open, nothing
#     changing) for STEADY_S seconds, and the store's own read counts over
#     that window are printed with engines, peers and reads per engine per
#     peer (Redis INFO commandstats EVAL calls; etcd /metrics
#     etcd_mvcc_range_total: range reads, a txn's compare included). Use
#     with KILL_NODE=-1. The nodes
#     then keep the engine's own metadata/cache_ttl_ms (300 s with a live
#     store watch, else 10 s) and metadata/ttl_ms (10 s) instead of the
#     1 s and 3 s the kill runs use (a 3 s lease renewed late on a loaded
#     host lapses, and etcd reports the lapse to every watching engine).
#   RUN_TIMEOUT_S [900]  bound on one run (store x transport)
#   PAIR_TIMEOUT_MS [60000]  the nodes' --pair_timeout_ms: how long a pair
#     may keep failing (across the outage) before it counts as unrecovered
#   BIN_TCP [build/benchmark/tent_cluster_node]  used for tcp
#   BIN_MPCOMM [build-mpcomm/benchmark/tent_cluster_node]  used for mpcomm
#     (the USE_MPCOMM=ON build against softmpcomm: scripts/lib_build.sh's
#     build_softmpcomm and build_on)
#   SOFT_PREFIX [.prefix/softmpcomm]  put on LD_LIBRARY_PATH for mpcomm
#   KEEP_LOGS [0]  1 keeps the logs of a passing run (a failing run's are
#     always kept, and their folder printed)
#   TENT_TEST_REQUIRE_STORES [0]  1 fails (exit 1) instead of skipping when
#     a store's server is missing (scripts/run_tests.sh sets it)
# Needs redis-server, redis-cli, etcd, curl and python3 (for free ports).
# Not part of CI: 32 processes take minutes on two cores.
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
NODES="${NODES:-32}"
STORES="${STORES:-redis etcd}"
TRANSPORTS="${TRANSPORTS:-tcp mpcomm}"
SLOT_BYTES="${SLOT_BYTES:-65536}"
KILL_NODE="${KILL_NODE:-$((NODES / 2))}"
OUTAGE_S="${OUTAGE_S:-2}"
STEADY_S="${STEADY_S:-0}"
CACHE_TTL_FLAG=()
STEADY_THREADS="${STEADY_THREADS:-4}"
RUN_TIMEOUT_S="${RUN_TIMEOUT_S:-900}"
PAIR_TIMEOUT_MS="${PAIR_TIMEOUT_MS:-60000}"
BIN_TCP="${BIN_TCP:-$ROOT/build/benchmark/tent_cluster_node}"
BIN_MPCOMM="${BIN_MPCOMM:-$ROOT/build-mpcomm/benchmark/tent_cluster_node}"
SOFT_PREFIX="${SOFT_PREFIX:-$ROOT/.prefix/softmpcomm}"
KEEP_LOGS="${KEEP_LOGS:-0}"
REQUIRE_STORES="${TENT_TEST_REQUIRE_STORES:-0}"
STORE_START_S=20

die() { echo "cluster_check: $*" >&2; exit 2; }
# A missing server is a skip (exit 77, ctest's SKIP_RETURN_CODE), not a
# failure, unless TENT_TEST_REQUIRE_STORES=1 (CI) requires the stores.
skip() {
  if [ "$REQUIRE_STORES" = 1 ]; then
    echo "cluster_check: FAIL: $*, and TENT_TEST_REQUIRE_STORES=1 requires the stores" >&2
    exit 1
  fi
  echo "cluster_check: skipped: $*" >&2
  exit 77
}
is_uint() { [[ "$1" =~ ^[0-9]+$ ]]; }
is_uint "$NODES" && [ "$NODES" -ge 2 ] || die "NODES must be an integer >= 2, got '$NODES'"
is_uint "$STEADY_S" || die "STEADY_S must be an integer >= 0, got '$STEADY_S'"
is_uint "$STEADY_THREADS" && [ "$STEADY_THREADS" -ge 1 ] ||
  die "STEADY_THREADS must be an integer >= 1, got '$STEADY_THREADS'"
[ "$STEADY_S" -gt 0 ] && [ "$KILL_NODE" -ge 0 ] &&
  die "STEADY_S needs KILL_NODE=-1 (nothing may change while reads are counted)"
[ "$STEADY_S" -gt 0 ] && CACHE_TTL_FLAG=(--cache_ttl_ms=-1 --ttl_ms=-1)
[[ "$KILL_NODE" =~ ^-?[0-9]+$ ]] && [ "$KILL_NODE" -lt "$NODES" ] ||
  die "KILL_NODE must be -1 or in [0, $((NODES - 1))], got '$KILL_NODE'"
is_uint "$OUTAGE_S" || die "OUTAGE_S must be whole seconds, got '$OUTAGE_S'"
is_uint "$PAIR_TIMEOUT_MS" || die "PAIR_TIMEOUT_MS must be whole milliseconds, got '$PAIR_TIMEOUT_MS'"
is_uint "$RUN_TIMEOUT_S" || die "RUN_TIMEOUT_S must be whole seconds, got '$RUN_TIMEOUT_S'"
[ "$REQUIRE_STORES" = 0 ] || [ "$REQUIRE_STORES" = 1 ] ||
  die "TENT_TEST_REQUIRE_STORES must be 0 or 1, got '$REQUIRE_STORES'"
for store in $STORES; do
  case "$store" in
    redis) command -v redis-server >/dev/null && command -v redis-cli >/dev/null ||
             skip "redis-server/redis-cli not found (scripts/install_deps.sh installs them)" ;;
    etcd) command -v etcd >/dev/null && command -v curl >/dev/null ||
            skip "etcd/curl not found (scripts/install_deps.sh installs etcd-server)" ;;
    *) die "unknown store '$store' in STORES (redis, etcd)" ;;
  esac
done
for xport in $TRANSPORTS; do
  case "$xport" in
    tcp) [ -x "$BIN_TCP" ] || die "$BIN_TCP not built (cmake --build build --target tent_cluster_node)" ;;
    mpcomm) [ -x "$BIN_MPCOMM" ] || die "$BIN_MPCOMM not built (source scripts/lib_build.sh; build_softmpcomm; build_on tent_cluster_node)" ;;
    *) die "unknown transport '$xport' in TRANSPORTS (tcp, mpcomm)" ;;
  esac
done

WORK="$(mktemp -d /tmp/cluster_check.XXXXXX)"
STORE_PID=""
NODE_PIDS=()
# Stragglers are killed on any exit: nodes first, then the store.
cleanup() {
  local pid
  for pid in "${NODE_PIDS[@]}"; do kill -9 "$pid" 2>/dev/null; done
  [ -n "$STORE_PID" ] && kill -9 "$STORE_PID" 2>/dev/null
  wait 2>/dev/null
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# free_ports N: N distinct loopback ports free right now (held together
# while chosen, so no two are equal).
free_ports() {
  python3 - "$1" <<'EOF'
import socket, sys
socks = []
for _ in range(int(sys.argv[1])):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    socks.append(s)
print(" ".join(str(s.getsockname()[1]) for s in socks))
EOF
}

# wait_for SECONDS CMD...: polls CMD every 0.2 s until it succeeds.
wait_for() {
  local deadline=$((SECONDS + $1))
  shift
  until "$@" >/dev/null 2>&1; do
    [ "$SECONDS" -lt "$deadline" ] || return 1
    sleep 0.2
  done
}

etcd_healthy() { curl -sf "http://$1/health" | grep -q '"health":"true"'; }

# start_store TYPE DIR: sets STORE_PID and STORE_ADDR.
start_store() {
  local type="$1" dir="$2" ports
  read -r -a ports <<<"$(free_ports 2)"
  STORE_ADDR="127.0.0.1:${ports[0]}"
  mkdir -p "$dir"
  if [ "$type" = redis ]; then
    redis-server --port "${ports[0]}" --bind 127.0.0.1 --save '' \
      --appendonly no --dir "$dir" --protected-mode no >"$dir/server.log" 2>&1 &
    STORE_PID=$!
    wait_for "$STORE_START_S" redis-cli -p "${ports[0]}" ping
  else
    local peer="http://127.0.0.1:${ports[1]}"
    etcd --name=cluster --data-dir="$dir/data" \
      --listen-client-urls="http://$STORE_ADDR" \
      --advertise-client-urls="http://$STORE_ADDR" \
      --listen-peer-urls="$peer" --initial-advertise-peer-urls="$peer" \
      --initial-cluster="cluster=$peer" >"$dir/server.log" 2>&1 &
    STORE_PID=$!
    wait_for "$STORE_START_S" etcd_healthy "$STORE_ADDR"
  fi
}

# store_keys TYPE: how many segment keys the store holds.
store_keys() {
  if [ "$1" = redis ]; then
    redis-cli -p "${STORE_ADDR#*:}" --scan --pattern 'mooncake/tent/segments/*' | wc -l
  else
    local key end
    key=$(printf 'mooncake/tent/segments/' | base64 -w0)
    end=$(printf 'mooncake/tent/segments0' | base64 -w0)
    curl -sf -X POST "http://$STORE_ADDR/v3/kv/range" \
      -d "{\"key\":\"$key\",\"range_end\":\"$end\",\"count_only\":true}" |
      python3 -c 'import json,sys; print(json.load(sys.stdin).get("count", 0))'
  fi
}

# store_reads TYPE: the store's count of key reads so far (Redis: EVAL
# calls: the client's bounded get is an EVAL, and nothing else the engines
# send is one while nothing changes; the GET it runs inside is counted by
# Redis as well, so GET calls are not added; etcd: range requests).
store_reads() {
  if [ "$1" = redis ]; then
    redis-cli -p "${STORE_ADDR#*:}" info commandstats |
      awk -F'[:=,]' '/^cmdstat_(eval|evalsha):/ {n += $3} END {print n + 0}'
  else
    curl -sf "http://$STORE_ADDR/metrics" |
      awk '/^etcd_mvcc_range_total / {print int($2)}'
  fi
}

# start_node I LOG: launches node I in the background; sets LAST_PID.
start_node() {
  local i="$1" log="$2" port
  port="$(free_ports 1)"
  MPCOMM_TCP_PORT="$port" "$BIN" --metadata_type="$STORE" \
    --metadata_servers="$STORE_ADDR" --index="$i" --nodes="$NODES" \
    --transport="$XPORT" --slot_bytes="$SLOT_BYTES" \
    --control_dir="$RUN/control" --hold_at_pair="$HOLD" \
    --pair_timeout_ms="$PAIR_TIMEOUT_MS" --steady_s="$STEADY_S" \
    --steady_threads="$STEADY_THREADS" "${CACHE_TTL_FLAG[@]}" \
    >"$log.out" 2>"$log.err" &
  LAST_PID=$!
}

alive_count() {
  local n=0 pid
  for pid in "${NODE_PIDS[@]}"; do kill -0 "$pid" 2>/dev/null && n=$((n + 1)); done
  echo "$n"
}

# stats NAME VALUES...: "NAME min/median/max".
stats() {
  local name="$1"
  shift
  printf '%s\n' "$@" | sort -n | awk -v n="$name" \
    '{v[NR]=$1} END {printf "  %-10s min %s  median %s  max %s\n", n, v[1], v[int((NR+1)/2)], v[NR]}'
}

field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<"$2"; }

# check_reached_again RUN K KILLED_PID RESTART_LOG: the killed node K came
# back and was reached: its restarted process (not KILLED_PID) moved all its
# pairs byte-exact, and at least one other node failed on K after its hold
# point and then passed (RECOVERED ... -> node-K), which no run without a
# recovery prints. Sets REACHED to that count; non-zero with a FAIL line.
check_reached_again() {
  local run="$1" k="$2" killed="$3" restart_log="$4" line pid ok mism i
  REACHED=0
  line="$(grep '^CLUSTER_NODE ' "$restart_log.out" 2>/dev/null | tail -1)"
  pid=$(field pid "$line") ok=$(field pairs_ok "$line") mism=$(field mismatches "$line")
  if [ -z "$line" ] || [ "$pid" = "$killed" ] || [ "$ok" != $((NODES - 1)) ] || [ "$mism" != 0 ]; then
    echo "FAIL: restarted node-$k did not move its $((NODES - 1)) pairs byte-exact" \
      "(pid ${pid:-none}, killed pid $killed, pairs_ok ${ok:-none}, mismatches ${mism:-none})"
    return 1
  fi
  for ((i = 0; i < NODES; i++)); do
    [ "$i" = "$k" ] && continue
    # Only lines after the node's HOLD: those pairs ran after the kill.
    REACHED=$((REACHED + $(sed -n '/^HOLD$/,$p' "$run/node-$i.out" |
      grep -c "^RECOVERED node-$i -> node-$k ")))
  done
  if [ "$REACHED" = 0 ]; then
    echo "FAIL: no node failed on the killed node-$k and then reached it again" \
      "(no RECOVERED line towards it after the hold point): the recovery was not exercised"
    return 1
  fi
}

# run_one STORE XPORT: one cluster run; returns non-zero when it failed.
run_one() {
  STORE="$1" XPORT="$2"
  RUN="$WORK/$STORE-$XPORT"
  mkdir -p "$RUN/control"
  BIN="$BIN_TCP"
  if [ "$XPORT" = mpcomm ]; then
    BIN="$BIN_MPCOMM"
    export LD_LIBRARY_PATH="$SOFT_PREFIX/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  fi
  echo
  echo "== $NODES nodes, store $STORE, transport $XPORT"
  if ! start_store "$STORE" "$RUN/store"; then
    echo "FAIL: $STORE did not answer within ${STORE_START_S}s (log: $RUN/store/server.log)"
    return 1
  fi
  local start=$SECONDS deadline=$((SECONDS + RUN_TIMEOUT_S)) i failed=0
  HOLD=0
  [ "$KILL_NODE" -ge 0 ] && HOLD=$(((NODES - 1) / 2))
  local -a logs=()
  NODE_PIDS=()
  for ((i = 0; i < NODES; i++)); do
    start_node "$i" "$RUN/node-$i"
    NODE_PIDS+=("$LAST_PID")
    logs+=("$RUN/node-$i")
  done
  local keys="?" killed_pid=""
  if [ "$KILL_NODE" -ge 0 ]; then
    # Midway: every node holds after HOLD pairs; the victim dies there and
    # the others go on into their second half, where about half of them
    # meet it dead, then restarted.
    until [ "$(cat "$RUN"/node-*.out 2>/dev/null | grep -c '^HOLD$')" -ge "$NODES" ]; do
      if [ "$SECONDS" -ge "$deadline" ] || [ "$(alive_count)" -lt "$NODES" ]; then
        echo "FAIL: not every node reached pair $HOLD (logs: $RUN)"
        for ((i = 0; i < NODES; i++)); do
          kill -0 "${NODE_PIDS[$i]}" 2>/dev/null ||
            echo "  node-$i exited: $(tail -n1 "$RUN/node-$i.err" 2>/dev/null)"
        done
        return 1
      fi
      sleep 0.2
    done
    keys="$(store_keys "$STORE")"
    killed_pid="${NODE_PIDS[$KILL_NODE]}"
    kill -9 "${NODE_PIDS[$KILL_NODE]}"
    wait "${NODE_PIDS[$KILL_NODE]}" 2>/dev/null
    touch "$RUN/control/go"
    echo "killed node-$KILL_NODE (SIGKILL) at pair $HOLD/$((NODES - 1)), $((SECONDS - start))s in; restarting it after ${OUTAGE_S}s"
    sleep "$OUTAGE_S"  # the outage itself, not a synchronisation
    start_node "$KILL_NODE" "$RUN/node-$KILL_NODE.restart"
    NODE_PIDS[$KILL_NODE]="$LAST_PID"
    logs[$KILL_NODE]="$RUN/node-$KILL_NODE.restart"
  fi
  if [ "$STEADY_S" -gt 0 ]; then
    until [ "$(cat "$RUN"/node-*.out 2>/dev/null | grep -c '^STEADY$')" -ge "$NODES" ]; do
      if [ "$SECONDS" -ge "$deadline" ] || [ "$(alive_count)" -lt "$NODES" ]; then
        echo "FAIL: not every node began the steady phase (logs: $RUN)"
        return 1
      fi
      sleep 0.2
    done
    local reads0 reads1 reads peers=$((NODES - 1))
    reads0="$(store_reads "$STORE")"
    sleep "$STEADY_S"  # the measured window itself, not a synchronisation
    reads1="$(store_reads "$STORE")"
    touch "$RUN/control/steady_end"
    reads=$((reads1 - reads0))
    echo "steady ${STEADY_S}s: store reads $reads, engines $NODES, peers per engine $peers," \
      "threads per engine $STEADY_THREADS; reads per engine per peer" \
      "$(awk -v r="$reads" -v e="$NODES" -v p="$peers" 'BEGIN {printf "%.2f", r / (e * p)}')," \
      "per second $(awk -v r="$reads" -v s="$STEADY_S" 'BEGIN {printf "%.1f", r / s}')"
  fi
  # Release the nodes once each has printed its summary (or died).
  local waiting=1
  while [ "$waiting" = 1 ]; do
    waiting=0
    for ((i = 0; i < NODES; i++)); do
      if kill -0 "${NODE_PIDS[$i]}" 2>/dev/null &&
        ! grep -q '^CLUSTER_NODE ' "${logs[$i]}.out"; then
        waiting=1
        break
      fi
    done
    [ "$waiting" = 0 ] && break
    if [ "$SECONDS" -ge "$deadline" ]; then
      echo "FAIL: node-$i still moving pairs after RUN_TIMEOUT_S=${RUN_TIMEOUT_S}s"
      failed=1
      break
    fi
    sleep 0.2
  done
  [ "$keys" = "?" ] && keys="$(store_keys "$STORE")"
  local pairs_done=$((SECONDS - start))
  touch "$RUN/control/release"
  while [ "$(alive_count)" -gt 0 ]; do
    if [ "$SECONDS" -ge "$deadline" ]; then
      echo "FAIL: $(alive_count) nodes still running after RUN_TIMEOUT_S=${RUN_TIMEOUT_S}s; killed"
      cleanup
      failed=1
      break
    fi
    sleep 0.2
  done
  local wall=$((SECONDS - start))
  local -a rcs=()
  for ((i = 0; i < NODES; i++)); do
    wait "${NODE_PIDS[$i]}" 2>/dev/null
    rcs+=("$?")
  done
  NODE_PIDS=()
  # Each node deletes its own key when it exits (the killed one's was
  # taken over by its restart), so none is left, long before any TTL.
  local keys_left
  keys_left="$(store_keys "$STORE")"
  kill "$STORE_PID" 2>/dev/null
  wait "$STORE_PID" 2>/dev/null
  STORE_PID=""

  printf '%-8s %7s %4s %4s %6s %5s %5s %5s %5s %9s %4s %7s %7s\n' node pid rc ok \
    failed lost recov unrec mism vmhwm_kb fds sockets threads
  local -a hwm=() fds=() socks=() threads=()
  local tot_ok=0 tot_failed=0 tot_lost=0 tot_recov=0 tot_unrec=0 tot_mism=0
  for ((i = 0; i < NODES; i++)); do
    local line
    line="$(grep '^CLUSTER_NODE ' "${logs[$i]}.out" 2>/dev/null | tail -1)"
    if [ -z "$line" ]; then
      echo "node-$i: no summary, rc ${rcs[$i]} (log: ${logs[$i]}.err)"
      failed=1
      continue
    fi
    local ok f lost rec unrec mism
    ok=$(field pairs_ok "$line") f=$(field failed_transfers "$line")
    lost=$(field lost_writes "$line") rec=$(field recovered "$line")
    unrec=$(field unrecovered "$line") mism=$(field mismatches "$line")
    hwm+=("$(field vmhwm_kb "$line")") fds+=("$(field fds "$line")")
    socks+=("$(field sockets "$line")") threads+=("$(field threads "$line")")
    printf '%-8s %7s %4s %4s %6s %5s %5s %5s %5s %9s %4s %7s %7s\n' "node-$i" \
      "$(field pid "$line")" "${rcs[$i]}" "$ok" "$f" "$lost" "$rec" "$unrec" \
      "$mism" "${hwm[-1]}" "${fds[-1]}" "${socks[-1]}" "${threads[-1]}"
    tot_ok=$((tot_ok + ok)) tot_failed=$((tot_failed + f))
    tot_lost=$((tot_lost + lost)) tot_recov=$((tot_recov + rec))
    tot_unrec=$((tot_unrec + unrec)) tot_mism=$((tot_mism + mism))
    [ "${rcs[$i]}" = 0 ] || failed=1
  done
  [ "${#hwm[@]}" -gt 0 ] && {
    stats vmhwm_kb "${hwm[@]}"
    stats fds "${fds[@]}"
    stats sockets "${socks[@]}"
    stats threads "${threads[@]}"
  }
  local pairs=$((NODES * (NODES - 1)))
  [ "$tot_ok" = "$pairs" ] && [ "$tot_mism" = 0 ] && [ "$tot_unrec" = 0 ] || failed=1
  if [ "$keys" != "$NODES" ]; then
    echo "FAIL: the store held $keys segment keys while the nodes ran, not one per node ($NODES)"
    failed=1
  fi
  if [ "$keys_left" != 0 ]; then
    echo "FAIL: the store still holds $keys_left segment keys after every node exited (each deletes its own at exit)"
    failed=1
  fi
  local reached="-"
  if [ "$KILL_NODE" -ge 0 ]; then
    check_reached_again "$RUN" "$KILL_NODE" "$killed_pid" "${logs[$KILL_NODE]}" || failed=1
    reached="$REACHED"
  fi
  local verdict=PASS
  [ "$failed" = 0 ] || verdict=FAIL
  echo "RESULT store=$STORE transport=$XPORT nodes=$NODES wall_s=$wall pairs_done_s=$pairs_done pairs_ok=$tot_ok/$pairs" \
    "failed_transfers=$tot_failed lost_writes=$tot_lost recovered_pairs=$tot_recov" \
    "unrecovered=$tot_unrec mismatches=$tot_mism recovered_to_killed=$reached store_keys=$keys keys_after_exit=$keys_left $verdict"
  [ "$failed" = 0 ]
}

status=0
for store in $STORES; do
  for xport in $TRANSPORTS; do
    run_one "$store" "$xport" || status=1
    # A failed run may leave nodes or its store behind.
    cleanup
    NODE_PIDS=()
    STORE_PID=""
  done
done
if [ "$status" = 0 ] && [ "$KEEP_LOGS" != 1 ]; then
  rm -rf "$WORK"
else
  echo "logs: $WORK"
fi
exit "$status"
