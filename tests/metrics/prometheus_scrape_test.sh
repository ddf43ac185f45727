#!/usr/bin/env bash
# A real Prometheus scrapes a tebench initiator's metrics endpoint (TCP pair,
# TENT_METRICS_* variables) and its HTTP API must report exactly the bytes
# tebench says it moved; `promtool check metrics` must accept /metrics.
#
#   tests/metrics/prometheus_scrape_test.sh <path/to/tebench>
#
# Exits 77 (skip) when /usr/bin/prometheus is missing, unless
# TENT_TEST_REQUIRE_STORES=1, which makes that a failure.
# Env: PROMETHEUS_TEST_BOUND_S (default 20): the bound on each wait.
set -uo pipefail

TEBENCH="$1"
PROMETHEUS="${PROMETHEUS:-/usr/bin/prometheus}"
PROMTOOL="${PROMTOOL:-/usr/bin/promtool}"
BOUND_S="${PROMETHEUS_TEST_BOUND_S:-20}"
if ! [[ "$BOUND_S" =~ ^[1-9][0-9]{0,2}$ ]]; then
  echo "PROMETHEUS_TEST_BOUND_S must be an integer in [1, 999], got '$BOUND_S'" >&2
  exit 2
fi
if [ ! -x "$PROMETHEUS" ] || [ ! -x "$PROMTOOL" ]; then
  if [ "${TENT_TEST_REQUIRE_STORES:-0}" = 1 ]; then
    echo "FAIL: $PROMETHEUS or $PROMTOOL missing and TENT_TEST_REQUIRE_STORES=1" >&2
    exit 1
  fi
  echo "SKIP: $PROMETHEUS or $PROMTOOL missing"
  exit 77
fi

DIR="$(mktemp -d /tmp/tent_prom_test.XXXXXX)"
PIDS=()
seen=""
cleanup() {
  for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null; done
  rm -rf "$DIR"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*${seen:+ (Prometheus last reported $seen)}" >&2
  for f in "$DIR"/*.log; do echo "--- $f" >&2; tail -n 20 "$f" >&2; done
  exit 1
}
# waitFor <what> <command...>: runs the command every 0.1 s until it
# succeeds, at most BOUND_S seconds.
# The bound is wall time (SECONDS), not a count of tries: a try that
# starts python may itself take a while on a loaded host.
waitFor() {
  local what="$1"; shift
  local deadline=$((SECONDS + BOUND_S))
  while ((SECONDS < deadline)); do
    if "$@"; then return 0; fi
    sleep 0.1
  done
  fail "$what within ${BOUND_S} s"
}
freePort() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
httpGet() {
  python3 -c 'import sys,urllib.request; sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=2).read().decode())' "$1"
}

METRICS_PORT="$(freePort)"
PROM_PORT="$(freePort)"
cat >"$DIR/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: tent
    static_configs:
      - targets: ["127.0.0.1:$METRICS_PORT"]
EOF
"$PROMETHEUS" --config.file="$DIR/prometheus.yml" --storage.tsdb.path="$DIR/data" \
  --web.listen-address="127.0.0.1:$PROM_PORT" >"$DIR/prometheus.log" 2>&1 &
PIDS+=($!)

GATES='"tcp":{"enable":true},"mpcomm":{"enable":false},"shm":{"enable":false},"rdma":{"enable":false},"nvlink":{"enable":false},"mnnvl":{"enable":false},"gds":{"enable":false},"io_uring":{"enable":false}'
export MC_TENT_CONF="{\"rpc_server_hostname\":\"127.0.0.1\",\"transports\":{$GATES}}"
"$TEBENCH" --backend=tent --xport_type=tcp --metadata_type=p2p --rpc_server_port=0 \
  --total_buffer_size=16777216 >"$DIR/target.log" 2>&1 &
PIDS+=($!)
targetUp() { grep -q '^Target segment: ' "$DIR/target.log"; }
waitFor "the tebench target did not come up" targetUp
SEGMENT="$(sed -n 's/^Target segment: //p' "$DIR/target.log" | head -n1)"

# A consistency round writes and then reads the same blocks, so half of
# what tebench moves is written and half read.
TENT_METRICS_ENABLED=1 TENT_METRICS_HTTP_HOST=127.0.0.1 \
  TENT_METRICS_HTTP_PORT="$METRICS_PORT" TENT_METRICS_REPORT_INTERVAL=0 \
  "$TEBENCH" --backend=tent --xport_type=tcp --tent_transport_hint=tcp \
  --metadata_type=p2p --rpc_server_port=0 --target_seg_name="$SEGMENT" \
  --total_buffer_size=16777216 --op_type=write --check_consistency=true \
  --start_block_size=65536 --max_block_size=65536 --duration=2 \
  --linger_s=$((BOUND_S + 5)) >"$DIR/initiator.log" 2>&1 &
PIDS+=($!)
runDone() { grep -q '^Total bytes moved: ' "$DIR/initiator.log"; }
waitFor "the tebench initiator did not finish its run" runDone
grep -q "Metrics HTTP server listening on 127.0.0.1:$METRICS_PORT" "$DIR/initiator.log" ||
  fail "the initiator's log lacks 'Metrics HTTP server listening on 127.0.0.1:$METRICS_PORT'"
TOTAL="$(sed -n 's/^Total bytes moved: //p' "$DIR/initiator.log")"
[ "$TOTAL" -gt 0 ] && [ $((TOTAL % 2)) -eq 0 ] || fail "tebench moved '$TOTAL' bytes"
HALF=$((TOTAL / 2))

httpGet "http://127.0.0.1:$METRICS_PORT/metrics" >"$DIR/metrics.txt" || fail "GET /metrics"
# promtool's lint notes (the `us` unit in upstream's names, see
# docs/metrics.md) are not parse errors; the exit status counts those too,
# so the output is checked for anything else.
"$PROMTOOL" check metrics <"$DIR/metrics.txt" >"$DIR/promtool.log" 2>&1
if grep -v -E 'metric names should not contain abbreviated units$|^$' "$DIR/promtool.log" | grep -q .; then
  fail "promtool check metrics: $(cat "$DIR/promtool.log")"
fi

query() {
  httpGet "http://127.0.0.1:$PROM_PORT/api/v1/query?query=$1" 2>/dev/null |
    python3 -c 'import json,sys; r=json.load(sys.stdin)["data"]["result"]; print(r[0]["value"][1] if r else "none")'
}
seen=""
scraped() {
  local w r
  w="$(query 'tent_write_bytes_total%7Btransport%3D%22tcp%22%7D')"
  r="$(query 'tent_read_bytes_total%7Btransport%3D%22tcp%22%7D')"
  seen="write=$w read=$r"
  [ "$w" = "$HALF" ] && [ "$r" = "$HALF" ]
}
waitFor "Prometheus did not report write=read=$HALF bytes" scraped
echo "PASS: tebench moved $TOTAL bytes; Prometheus reports $seen"
