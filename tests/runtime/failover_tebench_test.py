#!/usr/bin/env python3
"""tebench's failover line (ctest: tent_failover_tebench_test, USE_MPCOMM).

usage: failover_tebench_test.py <path to tebench>

A tebench target and initiator with mpcomm and tcp, every request hinted to
mpcomm. When the target's MPComm endpoint refuses the handshake's data
connections (SOFTMPCOMM_MAX_CONNECTIONS=1: the control connection takes the
only place), every request is carried over tcp: the run passes its
consistency check, and after each case's row tebench prints
"Failovers in case block_size=B batch=N threads=T: K" with K at least the
case's completed requests, and the JSON row carries the same "failovers".
With the endpoint healthy, no such line and no "failovers" field. A target
that registered its buffer with mpcomm only is not failed over to tcp.
A unittest suite: any failure exits non-zero.
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
import unittest

DEADLINE_S = 60.0
TEBENCH = sys.argv[1] if len(sys.argv) > 1 else ""
# MC_TENT_CONF replaces tebench's configuration wholesale: both transports.
CONF = ('{"rpc_server_hostname":"127.0.0.1","transports":{'
        '"mpcomm":{"enable":true},"tcp":{"enable":true}}}')
# An empty --xport_type registers the buffers with every loaded transport,
# so tcp can serve what mpcomm cannot.
COMMON = ["--backend=tent", "--xport_type=", "--metadata_type=p2p"]
# MPComm handshake ports: below the ephemeral range (32768 up), outside
# TENT's 15000-17000, the two-process fixture's 18000-23999 and
# tebench_test.py's 24000-31899; distinct between concurrent runs.
_PORT_BASE = 12000 + (os.getpid() % 200) * 10
_launches = 0
ROW = re.compile(r"^\s*(\d+)\s+(\d+)\s+(\d+)" + r"\s+([\d.]+)" * 7 + r"$")
FAILOVERS = re.compile(
    r"^Failovers in case block_size=(\d+) batch=(\d+) threads=(\d+): (\d+)$")


def env(**extra):
    global _launches
    _launches += 1
    return dict(os.environ, MC_TENT_CONF=CONF,
                MPCOMM_TCP_PORT=str(_PORT_BASE + _launches % 10), **extra)


def wait_line(proc, pattern, deadline_s=DEADLINE_S):
    """The first stdout line of `proc` matching `pattern`, read with a
    deadline; None on timeout or EOF."""
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    end = time.monotonic() + deadline_s
    buf = b""
    while time.monotonic() < end:
        if not sel.select(timeout=max(0.0, end - time.monotonic())):
            continue
        chunk = os.read(proc.stdout.fileno(), 65536)
        if not chunk:
            return None
        buf += chunk
        *lines, buf = buf.split(b"\n")
        for line in lines:
            m = re.search(pattern, line.decode(errors="replace"))
            if m:
                return m
    return None


class FailoverTebenchTest(unittest.TestCase):
    def run_pair(self, target_env, target_args=()):
        """A target with `target_env` and `target_args` added and a
        --check_consistency initiator hinted to mpcomm: (rc, stdout, stderr,
        JSON report)."""
        target = subprocess.Popen(
            [TEBENCH] + COMMON + ["--total_buffer_size=16777216"] +
            list(target_args),
            env=env(**target_env), stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL)
        try:
            m = wait_line(target, r"^Target segment: (\S+)$")
            self.assertIsNotNone(m, "the target never reported its segment")
            with tempfile.TemporaryDirectory() as tmp:
                json_out = os.path.join(tmp, "rows.json")
                p = subprocess.run(
                    [TEBENCH] + COMMON + [
                        "--tent_transport_hint=mpcomm",
                        "--target_seg_name=" + m.group(1),
                        "--check_consistency=true", "--op_type=mix",
                        "--total_buffer_size=4194304",
                        "--start_block_size=4096", "--max_block_size=8192",
                        "--start_batch_size=2", "--max_batch_size=4",
                        "--duration=0.3", "--warmup_duration=0.05",
                        "--json_out=" + json_out],
                    env=env(), capture_output=True, text=True,
                    timeout=DEADLINE_S)
                report = {}
                if os.path.exists(json_out):
                    with open(json_out) as f:
                        report = json.load(f)
            return p.returncode, p.stdout, p.stderr, report
        finally:
            target.send_signal(signal.SIGTERM)
            self.assertEqual(target.wait(timeout=DEADLINE_S), 0)

    def cases(self, out):
        return [tuple(int(g) for g in m.groups()[:3])
                for m in map(ROW.match, out.splitlines()) if m]

    def test_refusing_endpoint_prints_failovers_per_case(self):
        rc, out, err, report = self.run_pair(
            {"SOFTMPCOMM_MAX_CONNECTIONS": "1"})
        self.assertEqual(rc, 0, (out, err[-3000:]))
        expected = [(b, n, 1) for b in (4096, 8192) for n in (2, 4)]
        self.assertEqual(self.cases(out), expected, out)
        lines = out.splitlines()
        rows = report["rows"]
        self.assertEqual(len(rows), len(expected), report)
        for case, row in zip(expected, rows):
            # The line follows its case's row at once.
            at = next(i for i, line in enumerate(lines)
                      if ROW.match(line) and
                      tuple(int(g) for g in ROW.match(line).groups()[:3])
                      == case)
            m = FAILOVERS.match(lines[at + 1])
            self.assertIsNotNone(m, (case, lines[at + 1]))
            self.assertEqual(tuple(int(g) for g in m.groups()[:3]), case)
            count = int(m.group(4))
            # Every request went to mpcomm first and was carried by tcp.
            self.assertGreaterEqual(count, row["completed_requests"], row)
            self.assertEqual(row["failovers"], count, row)
            self.assertNotIn("failed", row)
        self.assertEqual(len([l for l in lines if FAILOVERS.match(l)]),
                         len(expected), out)

    def test_healthy_endpoint_prints_nothing_extra(self):
        rc, out, err, report = self.run_pair({})
        self.assertEqual(rc, 0, (out, err[-3000:]))
        self.assertEqual(len(self.cases(out)), 4, out)
        self.assertNotIn("Failovers", out)
        for row in report["rows"]:
            self.assertNotIn("failovers", row)
            self.assertNotIn("failed", row)

    def test_no_failover_to_a_transport_the_buffer_lacks(self):
        # --xport_type=mpcomm registers the target's buffer with mpcomm
        # only: tcp could not serve it, so nothing is failed over and the
        # case fails with the "No more transports" line.
        rc, out, err, report = self.run_pair(
            {"SOFTMPCOMM_MAX_CONNECTIONS": "1"}, ["--xport_type=mpcomm"])
        self.assertNotEqual(rc, 0, out)
        self.assertIn("FAILED case block_size=4096 batch=2 threads=1", out)
        self.assertNotIn("Failovers", out)
        self.assertIn("No more transports available after mpcomm failed", err)
        self.assertNotIn("Transport failover:", err)
        self.assertNotIn("failovers", report["rows"][0])


if __name__ == "__main__":
    if not TEBENCH or not os.access(TEBENCH, os.X_OK):
        sys.exit("usage: failover_tebench_test.py <path to tebench>")
    unittest.main(argv=sys.argv[:1])
