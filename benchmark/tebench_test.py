#!/usr/bin/env python3
"""tebench end to end on this host (ctest: tent_tebench_test over tcp,
tent_tebench_mpcomm_test over mpcomm when built with USE_MPCOMM).

usage: tebench_test.py <path to tebench> [tcp|mpcomm]

Checks the flag errors (exit 1, message naming the value), a target and a
--check_consistency initiator (exit 0, the "First transfer" line, one row per
case with every column, and the same rows in --json_out with positive
figures), the target's SIGTERM shutdown (exit 0), and that killing the target
mid-run makes the initiator report failed transfers, record the failure in
--json_out and exit non-zero instead of hanging.
Plain asserts: any failure exits non-zero.
"""
import json
import os
import re
import selectors
import signal
import subprocess
import sys
import tempfile
import time

DEADLINE_S = 60.0
XPORT = sys.argv[2] if len(sys.argv) > 2 else "tcp"
OTHER = "mpcomm" if XPORT == "tcp" else "tcp"
# MC_TENT_CONF replaces the configuration wholesale, so the gates are listed.
CONF = ('{"rpc_server_hostname":"127.0.0.1","transports":{"%s":{"enable":true},'
        '"%s":{"enable":false}}}' % (XPORT, OTHER))
COMMON = ["--backend=tent", "--xport_type=" + XPORT,
          "--tent_transport_hint=" + XPORT, "--metadata_type=p2p"]
# Every process gets its own MPComm handshake port: below the ephemeral
# range, outside TENT's 15000-17000 and the two-process fixture's
# 18000-23999 (tests/two_process_fixture.h), distinct between concurrent
# runs.
_PORT_BASE = 24000 + (os.getpid() % 790) * 10
_launches = 0


def env():
    global _launches
    _launches += 1
    return dict(os.environ, MC_TENT_CONF=CONF,
                MPCOMM_TCP_PORT=str(_PORT_BASE + _launches % 10))
# BlkSize, Batch, Threads, then BW, Avg Inst GB/s, Avg Lat, Avg Tx, P99 Tx,
# P999 Tx and First Batch.
ROW = re.compile(r"^\s*(\d+)\s+(\d+)\s+(\d+)" + r"\s+([\d.]+)" * 7 + r"$")
HEADER = ["BlkSize (B)", "Batch", "Threads", "BW (GB/s)", "Avg Inst GB/s",
          "Avg Lat (us)", "Avg Tx (us)", "P99 Tx (us)", "P999 Tx (us)",
          "First Batch (us)"]
# Per-row JSON fields that a completed case must report as positive.
POSITIVE = ["block_size", "batch_size", "threads", "bw_gbps", "avg_inst_gbps",
            "avg_lat_us", "avg_tx_us", "p99_tx_us", "p999_tx_us",
            "first_batch_us", "completed_requests", "elapsed_s"]


def run(tebench, args):
    p = subprocess.run([tebench] + args, env=env(), capture_output=True,
                       text=True, timeout=DEADLINE_S)
    return p.returncode, p.stdout, p.stderr


def check_flag_errors(tebench):
    cases = [
        (["--backend=classic"], "--backend=classic is not supported"),
        (["--xport_type=foo"], "unknown --xport_type=foo"),
        (["--tent_transport_hint=bar"], "unknown --tent_transport_hint=bar"),
        (["--metadata_type=etcd"], "--metadata_type=etcd is not supported"),
        (["--seg_type=HBM"], "unknown --seg_type=HBM"),
        (["--op_type=copy"], "unknown --op_type=copy"),
        (["--notifi=true"], "--notifi is not supported"),
        (["--start_block_size=8192", "--max_block_size=4096"],
         "--max_block_size=4096 is smaller than --start_block_size=8192"),
        (["--duration=0"], "--duration=0 must be positive"),
        (["--warmup_duration=-0.5"],
         "--warmup_duration=-0.5 must be zero or positive"),
        (["--max_num_threads=2000"], "--max_num_threads=2000 exceeds 1024"),
        (["--poll_sleep_us=1000001"],
         "--poll_sleep_us=1000001 exceeds 1000000"),
    ]
    for args, message in cases:
        rc, _, err = run(tebench, args)
        assert rc == 1, (args, rc, err)
        assert message in err, (args, err)


class Lines:
    """Reads a process's stdout line by line with a deadline."""

    def __init__(self, proc):
        self.proc = proc
        self.sel = selectors.DefaultSelector()
        self.sel.register(proc.stdout, selectors.EVENT_READ)
        self.buf = b""
        self.lines = []

    def wait_for(self, pattern, deadline_s=DEADLINE_S):
        end = time.monotonic() + deadline_s
        while True:
            for line in self.lines:
                m = re.search(pattern, line)
                if m:
                    return m
            assert time.monotonic() < end, (
                "no line matching %r within %.0f s; got %r" %
                (pattern, deadline_s, self.lines))
            if not self.sel.select(timeout=max(0.0, end - time.monotonic())):
                continue
            chunk = os.read(self.proc.stdout.fileno(), 65536)
            assert chunk, "process exited (rc=%s) before %r; got %r" % (
                self.proc.wait(), pattern, self.lines)
            self.buf += chunk
            *complete, self.buf = self.buf.split(b"\n")
            self.lines += [c.decode(errors="replace") for c in complete]


def start_target(tebench):
    proc = subprocess.Popen(
        [tebench] + COMMON + ["--total_buffer_size=16777216"], env=env(),
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    name = Lines(proc).wait_for(r"^Target segment: (\S+)$").group(1)
    assert name.startswith("127.0.0.1:"), name
    return proc, name


def stop_target(proc):
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=DEADLINE_S) == 0, proc.returncode


def check_json_rows(path, table_rows):
    with open(path) as f:
        report = json.load(f)
    assert report["ok"] is True, report
    assert report["first_transfer_us"] > 0, report
    assert report["run"]["op"] == "mix", report["run"]
    assert report["run"]["transport"] == XPORT, report["run"]
    assert report["run"]["warmup_duration_s"] == 0.05, report["run"]
    assert report["run"]["poll_yields"] == 3, report["run"]
    assert report["run"]["poll_sleep_us"] == 7, report["run"]
    rows = report["rows"]
    assert [(r["block_size"], r["batch_size"], r["threads"]) for r in rows] \
        == table_rows, (rows, table_rows)
    for r in rows:
        assert r["op"] == "mix" and r["transport"] == XPORT, r
        for field in POSITIVE:
            assert isinstance(r[field], (int, float)) and r[field] > 0, (
                field, r)
        assert r["p99_tx_us"] <= r["p999_tx_us"], r
        assert "failed" not in r, r


def check_consistency_run(tebench):
    target, name = start_target(tebench)
    with tempfile.TemporaryDirectory() as tmp:
        json_out = os.path.join(tmp, "rows.json")
        try:
            rc, out, err = run(tebench, COMMON + [
                "--target_seg_name=" + name, "--check_consistency=true",
                "--op_type=mix", "--total_buffer_size=4194304",
                "--start_block_size=4096", "--max_block_size=131072",
                "--start_batch_size=2", "--max_batch_size=4",
                "--start_num_threads=1", "--max_num_threads=2",
                "--duration=0.5", "--warmup_duration=0.05",
                "--poll_yields=3", "--poll_sleep_us=7",
                "--json_out=" + json_out])
            assert rc == 0, (rc, out, err)
            # The first case (4096 B, batch 2, 1 thread) opens the table.
            m = re.search(r"^First transfer: ([\d.]+) us \(first batch of "
                          r"2 x 4096 bytes, 1 thread", out, re.M)
            assert m and float(m.group(1)) > 0, out
            assert all(h in out for h in HEADER), out
            assert out.index("First transfer:") < out.index("BlkSize (B)"), out
            matches = [m for m in map(ROW.match, out.splitlines()) if m]
            rows = [tuple(int(g) for g in m.groups()[:3]) for m in matches]
            expected = [(b, n, t)
                        for b in (4096, 8192, 16384, 32768, 65536, 131072)
                        for n in (2, 4) for t in (1, 2)]
            assert rows == expected, (rows, out)
            for m in matches:
                assert all(float(g) > 0 for g in m.groups()[3:]), m.group(0)
            check_json_rows(json_out, expected)
        finally:
            stop_target(target)


def check_capacity_error(tebench):
    target, name = start_target(tebench)
    try:
        rc, _, err = run(tebench, COMMON + [
            "--target_seg_name=" + name, "--total_buffer_size=65536",
            "--start_block_size=65536", "--max_block_size=65536",
            "--start_batch_size=2", "--max_batch_size=2"])
        assert rc == 1, (rc, err)
        assert "--max_block_size=65536 x --max_batch_size=2 needs 131072" in err, err
    finally:
        stop_target(target)


def check_target_killed(tebench):
    target, name = start_target(tebench)
    tmp = tempfile.TemporaryDirectory()
    json_out = os.path.join(tmp.name, "rows.json")
    initiator = subprocess.Popen(
        [tebench] + COMMON + [
            "--target_seg_name=" + name, "--op_type=write",
            "--total_buffer_size=4194304", "--start_block_size=65536",
            "--max_block_size=65536", "--start_batch_size=4",
            "--max_batch_size=4", "--duration=600", "--transfer_timeout_s=5",
            "--json_out=" + json_out],
        env=env(), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        lines = Lines(initiator)
        lines.wait_for(r"BW \(GB/s\)")  # the case is running
        target.kill()
        target.wait()
        m = lines.wait_for(r"^FAILED case block_size=65536 batch=4 threads=1: "
                           r"(\d+) of (\d+) transfers failed; first error: ")
        assert int(m.group(1)) >= 1, m.group(0)
        assert initiator.wait(timeout=DEADLINE_S) == 1, initiator.returncode
        with open(json_out) as f:
            report = json.load(f)
        assert report["ok"] is False and report["error"], report
        assert report["rows"][-1]["failed"] is True, report
    finally:
        tmp.cleanup()
        if initiator.poll() is None:
            initiator.kill()
            initiator.wait()
        if target.poll() is None:
            target.kill()
            target.wait()


def main():
    assert len(sys.argv) in (2, 3) and XPORT in ("tcp", "mpcomm"), __doc__
    tebench = sys.argv[1]
    check_flag_errors(tebench)
    check_consistency_run(tebench)
    check_capacity_error(tebench)
    check_target_killed(tebench)
    print("tebench_test over %s: OK" % XPORT)


if __name__ == "__main__":
    main()
