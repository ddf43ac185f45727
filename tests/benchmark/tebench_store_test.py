#!/usr/bin/env python3
"""tebench over a metadata store (ctest: tent_tebench_store_test over tcp,
tent_tebench_store_mpcomm_test over mpcomm when built with USE_MPCOMM).

usage: tebench_store_test.py <path to tebench> [tcp|mpcomm]

For each of redis and etcd: starts a real redis-server / etcd on a free
loopback port with its data in a temporary folder, a tebench target that
names itself with --local_segment_name, and a --check_consistency
initiator that finds it by that name (exit 0, the "First transfer" line,
one row per case); then stops both and the store. A store whose binary is
not installed is skipped with the reason (scripts/install_deps.sh installs
both), or fails under TENT_TEST_REQUIRE_STORES=1 (scripts/run_tests.sh).
"""
import http.client
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest

DEADLINE_S = 60.0
TEBENCH = sys.argv[1] if len(sys.argv) > 1 else ""
XPORT = sys.argv[2] if len(sys.argv) > 2 else "tcp"
OTHER = "mpcomm" if XPORT == "tcp" else "tcp"
CONF = ('{"rpc_server_hostname":"127.0.0.1","transports":{"%s":{"enable":true},'
        '"%s":{"enable":false}}}' % (XPORT, OTHER))
ROW = re.compile(r"^\s*(\d+)\s+(\d+)\s+(\d+)" + r"\s+([\d.]+)" * 7 + r"$")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def answers(store, port):
    try:
        if store == "redis":
            with socket.create_connection(("127.0.0.1", port), 0.5) as s:
                s.sendall(b"PING\r\n")
                return s.recv(16).startswith(b"+PONG")
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=0.5)
        conn.request("POST", "/v3/maintenance/status", body="{}")
        return conn.getresponse().status == 200
    except OSError:
        return False


class StoreTebenchTest(unittest.TestCase):
    def start_store(self, store, tmp):
        port, peer = free_port(), free_port()
        if store == "redis":
            args = ["redis-server", "--port", str(port), "--bind", "127.0.0.1",
                    "--save", "", "--appendonly", "no", "--dir", tmp]
        else:
            client = "http://127.0.0.1:%d" % port
            peer_url = "http://127.0.0.1:%d" % peer
            args = ["etcd", "--name=tebench", "--data-dir=" + tmp + "/etcd",
                    "--listen-client-urls=" + client,
                    "--advertise-client-urls=" + client,
                    "--listen-peer-urls=" + peer_url,
                    "--initial-advertise-peer-urls=" + peer_url,
                    "--initial-cluster=tebench=" + peer_url]
        log = open(os.path.join(tmp, "store.log"), "w")
        proc = subprocess.Popen(args, stdout=log, stderr=log)
        end = time.monotonic() + 20
        while not answers(store, port):
            self.assertIsNone(proc.poll(), store + " exited at start")
            self.assertLess(time.monotonic(), end, store + " never answered")
            time.sleep(0.02)
        return proc, "127.0.0.1:%d" % port

    def stop(self, proc):
        proc.send_signal(signal.SIGTERM)
        try:
            return proc.wait(timeout=DEADLINE_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            return proc.wait()

    def run_pair(self, store):
        binary = "redis-server" if store == "redis" else "etcd"
        required = os.environ.get("TENT_TEST_REQUIRE_STORES", "")
        if required not in ("", "0", "1"):
            self.fail("TENT_TEST_REQUIRE_STORES must be 0 or 1, got %r" %
                      required)
        if shutil.which(binary) is None:
            if required == "1":
                self.fail(binary + " is not installed (not on PATH), and "
                          "TENT_TEST_REQUIRE_STORES=1 requires the store "
                          "tests to run")
            self.skipTest(binary + " is not installed")
        with tempfile.TemporaryDirectory() as tmp:
            server, address = self.start_store(store, tmp)
            common = ["--backend=tent", "--xport_type=" + XPORT,
                      "--tent_transport_hint=" + XPORT,
                      "--metadata_type=" + store,
                      "--metadata_servers=" + address]
            name = "tebench-target-%d" % os.getpid()
            base = 24000 + (os.getpid() % 790) * 10
            target = subprocess.Popen(
                [TEBENCH] + common + ["--local_segment_name=" + name,
                                      "--total_buffer_size=16777216"],
                env=dict(os.environ, MC_TENT_CONF=CONF,
                         MPCOMM_TCP_PORT=str(base + 1)),
                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            try:
                line = target.stdout.readline()
                while line and not line.startswith("Target segment:"):
                    line = target.stdout.readline()
                self.assertEqual(line.strip(), "Target segment: " + name)
                p = subprocess.run(
                    [TEBENCH] + common + [
                        "--target_seg_name=" + name,
                        "--check_consistency=true", "--op_type=mix",
                        "--total_buffer_size=4194304",
                        "--start_block_size=4096", "--max_block_size=65536",
                        "--start_batch_size=2", "--max_batch_size=2",
                        "--start_num_threads=1", "--max_num_threads=1",
                        "--duration=0.3", "--warmup_duration=0.05"],
                    env=dict(os.environ, MC_TENT_CONF=CONF,
                             MPCOMM_TCP_PORT=str(base + 2)),
                    capture_output=True, text=True, timeout=DEADLINE_S)
                self.assertEqual(p.returncode, 0, p.stderr[-3000:])
                self.assertIn("First transfer", p.stdout)
                rows = [l for l in p.stdout.splitlines() if ROW.match(l)]
                self.assertEqual(len(rows), 5, p.stdout)
            finally:
                self.assertEqual(self.stop(target), 0)
                self.stop(server)

    def test_redis(self):
        self.run_pair("redis")

    def test_etcd(self):
        self.run_pair("etcd")


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1])
