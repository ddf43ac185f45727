#!/usr/bin/env bash
# Runs a tebench target and initiator on this host over one transport.
#
#   scripts/tebench_pair.sh <path/to/tebench> <mpcomm|tcp|shm> [initiator flags...]
#
# Every other transport is switched off through MC_TENT_CONF (which replaces
# the configuration wholesale, so the gates are listed explicitly). Both
# processes get distinct MPCOMM_TCP_PORTs outside 15000-17000, where the TENT
# RPC server takes its ports. Exits with the initiator's status; for mpcomm
# it also fails when the logs lack the guide's confirmation lines.
# Env: TARGET_BIN (the target's tebench, default the initiator's: another
# tree's build pairs two builds), TOTAL_BUFFER_SIZE (default 64 MiB), TARGET_SEG_TYPE (the target's
# --seg_type, default DRAM; the initiator's is a flag), LOGDIR (default: a temp dir),
# TEBENCH_PAIR_PORT (the target's MPCOMM_TCP_PORT, the initiator's is the
# next; default 18000 + 2 x (pid % 6000), for callers that own a range).
set -uo pipefail

TEBENCH="$1"
XPORT="$2"
shift 2
TOTAL_BUFFER_SIZE="${TOTAL_BUFFER_SIZE:-67108864}"
LOGDIR="${LOGDIR:-$(mktemp -d /tmp/tebench.XXXXXX)}"
mkdir -p "$LOGDIR"

case "$XPORT" in
  mpcomm) GATES='"mpcomm":{"enable":true},"tcp":{"enable":false},"shm":{"enable":false}' ;;
  tcp) GATES='"tcp":{"enable":true},"mpcomm":{"enable":false},"shm":{"enable":false}' ;;
  shm) GATES='"shm":{"enable":true},"tcp":{"enable":false},"mpcomm":{"enable":false}' ;;
  *) echo "tebench_pair: unknown transport '$XPORT' (expected mpcomm, tcp or shm)" >&2; exit 2 ;;
esac
XPORTS="\"transports\":{$GATES,\"rdma\":{\"enable\":false},\"nvlink\":{\"enable\":false},\"mnnvl\":{\"enable\":false},\"gds\":{\"enable\":false},\"io_uring\":{\"enable\":false}}"
CONF="{\"rpc_server_hostname\":\"127.0.0.1\",$XPORTS}"

# Handshake ports: per run, below the ephemeral range, outside 15000-17000.
TARGET_MPCOMM_PORT="${TEBENCH_PAIR_PORT:-$((18000 + ($$ % 6000) * 2))}"
if ! [[ "$TARGET_MPCOMM_PORT" =~ ^[1-9][0-9]{0,4}$ ]] || [ "$TARGET_MPCOMM_PORT" -gt 65534 ]; then
  echo "tebench_pair: TEBENCH_PAIR_PORT must be a port in [1, 65534], got '$TARGET_MPCOMM_PORT'" >&2
  exit 2
fi
INITIATOR_MPCOMM_PORT=$((TARGET_MPCOMM_PORT + 1))

MC_TENT_CONF="$CONF" MPCOMM_TCP_PORT=$TARGET_MPCOMM_PORT \
  "${TARGET_BIN:-$TEBENCH}" --backend=tent --xport_type="$XPORT" --metadata_type=p2p \
  --rpc_server_port=0 --seg_type="${TARGET_SEG_TYPE:-DRAM}" \
  --total_buffer_size="$TOTAL_BUFFER_SIZE" >"$LOGDIR/target.log" 2>&1 &
TARGET_PID=$!
cleanup() { kill -TERM "$TARGET_PID" 2>/dev/null; wait "$TARGET_PID" 2>/dev/null; }
trap cleanup EXIT

SEGMENT=""
for _ in $(seq 1 600); do
  SEGMENT="$(sed -n 's/^Target segment: //p' "$LOGDIR/target.log" | head -n1)"
  [ -n "$SEGMENT" ] && break
  if ! kill -0 "$TARGET_PID" 2>/dev/null; then break; fi
  sleep 0.1
done
if [ -z "$SEGMENT" ]; then
  echo "tebench_pair: the $XPORT target did not come up; its log:" >&2
  cat "$LOGDIR/target.log" >&2
  exit 1
fi
echo "tebench_pair: $XPORT target $SEGMENT (pid $TARGET_PID, MPCOMM_TCP_PORT=$TARGET_MPCOMM_PORT)"

MC_TENT_CONF="$CONF" MPCOMM_TCP_PORT=$INITIATOR_MPCOMM_PORT \
  "$TEBENCH" --backend=tent --xport_type="$XPORT" --tent_transport_hint="$XPORT" \
  --metadata_type=p2p --rpc_server_port=0 --target_seg_name="$SEGMENT" \
  --seg_type=DRAM --total_buffer_size="$TOTAL_BUFFER_SIZE" "$@" \
  >"$LOGDIR/initiator.log" 2>&1
RC=$?
# The rows (and any error) on stdout; the full logs stay in $LOGDIR.
grep -v -E '^([IWEF][0-9]{4,8} |\[mpcomm\] )' "$LOGDIR/initiator.log" || true
grep -h -E 'MpcommTransport: (Installed successfully|Connected to segment)' \
  "$LOGDIR/target.log" "$LOGDIR/initiator.log" | sed 's/^[^]]*] /  log: /'

if [ "$XPORT" = mpcomm ] && [ $RC -eq 0 ]; then
  for f in target initiator; do
    if ! grep -q 'MpcommTransport: Installed successfully' "$LOGDIR/$f.log"; then
      echo "tebench_pair: $f log lacks 'MpcommTransport: Installed successfully'" >&2
      RC=1
    fi
  done
  if ! grep -q "MpcommTransport: Connected to segment $SEGMENT" "$LOGDIR/initiator.log"; then
    echo "tebench_pair: initiator log lacks 'MpcommTransport: Connected to segment $SEGMENT'" >&2
    RC=1
  fi
fi
echo "tebench_pair: $XPORT initiator exited $RC (logs in $LOGDIR)"
exit $RC
