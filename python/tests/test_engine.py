#!/usr/bin/env python3
"""mooncake.engine end to end: two processes move bytes over TENT's TCP.

The parent re-runs this file with --serve as the target process, which
allocates and registers a buffer holding a known pattern, prints its segment
name and serves until its stdin closes. The parent then READs that pattern,
WRITEs its own, reads it back byte-exact, and checks the error paths.

A unittest suite: any failure exits non-zero. Run with
PYTHONPATH=<build>/python (ctest sets it).
"""
import ctypes
import json
import os
import subprocess
import sys
import tempfile
import time
import unittest

from mooncake import engine

BUFFER_SIZE = 1 << 20
PIECES = 4
DEADLINE_S = 30.0
TERMINAL = {
    engine.TransferStatusEnum.COMPLETED,
    engine.TransferStatusEnum.FAILED,
    engine.TransferStatusEnum.INVALID,
    engine.TransferStatusEnum.CANCELED,
    engine.TransferStatusEnum.TIMEOUT,
}


def pattern(seed, size):
    """Bytes that differ per seed and per position (period 251, prime)."""
    period = bytes((i * 31 + seed) % 251 for i in range(251))
    return (period * (size // 251 + 1))[:size]


def serve(config_path):
    """The target process (--serve); it reports failure by its exit status,
    which the parent's test asserts."""
    eng = engine.TransferEngine(config_path)
    if not eng.available():
        sys.exit("target engine did not start")
    addr = eng.allocate_managed_buffer(BUFFER_SIZE)
    ctypes.memmove(addr, pattern(7, BUFFER_SIZE), BUFFER_SIZE)
    eng.register_memory(addr, BUFFER_SIZE, engine.TransportType.TCP)
    print("SEGMENT %s %d %d" % (eng.get_segment_name(), addr, BUFFER_SIZE),
          flush=True)
    sys.stdin.read()  # the parent closes our stdin when it is done
    eng.unregister_memory(addr, BUFFER_SIZE)
    eng.free_managed_buffer(addr)


class EngineTest(unittest.TestCase):
    def read_line(self, proc, prefix, deadline_s):
        """First stdout line of proc starting with prefix, or fail at the
        deadline (never blocks past it: the pipe is read with select)."""
        import selectors
        sel = selectors.DefaultSelector()
        sel.register(proc.stdout, selectors.EVENT_READ)
        buf = b""
        end = time.monotonic() + deadline_s
        while time.monotonic() < end:
            if not sel.select(timeout=max(0.0, end - time.monotonic())):
                continue
            chunk = os.read(proc.stdout.fileno(), 4096)
            self.assertTrue(chunk,
                            "target exited before printing %r (rc=%s)" %
                            (prefix, proc.poll()))
            buf += chunk
            # Only complete lines: a chunk may end mid-line.
            for line in buf.split(b"\n")[:-1]:
                text = line.decode(errors="replace")
                if text.startswith(prefix):
                    return text
        self.fail("no %r line from the target within %.0f s" %
                  (prefix, deadline_s))

    def wait_batch(self, eng, batch, count):
        """Polls a batch until every task is terminal; fails at the
        deadline."""
        end = time.monotonic() + DEADLINE_S
        while True:
            status = eng.get_transfer_status_list(batch)
            self.assertEqual(len(status), count, status)
            if all(s.s in TERMINAL for s in status):
                return status
            self.assertLess(time.monotonic(), end,
                            "batch not done in time: %r" % status)
            time.sleep(0.001)  # polling back-off, not synchronisation

    def transfer(self, eng, requests):
        """Runs one batch to completion; every task must complete."""
        batch = eng.allocate_batch(len(requests))
        eng.submit(batch, requests)
        status = self.wait_batch(eng, batch, len(requests))
        for i, s in enumerate(status):
            self.assertEqual(s.s, engine.TransferStatusEnum.COMPLETED, (i, s))
        overall = eng.get_overall_status(batch)
        self.assertEqual(overall.s, engine.TransferStatusEnum.COMPLETED,
                         overall)
        eng.free_batch(batch)

    def test_types(self):
        self.assertEqual(engine.TransportType.MPCOMM.value, 12)
        self.assertEqual(engine.TransportType.TCP.value, 7)
        self.assertEqual(engine.TransportType.UB.value, 11)
        self.assertEqual(
            engine.transport_type_name(engine.TransportType.MPCOMM), "mpcomm")
        self.assertEqual(engine.parse_transport_type("mpcomm"),
                         engine.TransportType.MPCOMM)
        self.assertEqual(engine.parse_transport_type("bogus"),
                         engine.TransportType.UNSPEC)
        r = engine.Request()
        self.assertEqual(r.opcode, engine.Request.READ)
        self.assertEqual((r.source, r.target_id, r.target_offset, r.length),
                         (0, 0, 0, 0))
        self.assertEqual(r.transport_hint, engine.TransportType.UNSPEC)
        r.source = 0x1000
        self.assertEqual(r.source, 0x1000)

    def check_bad_input(self, eng, seg):
        with self.assertRaisesRegex(ValueError, "lenght",
                                    msg="a misspelt request field"):
            eng.submit(1, [{"opcode": engine.Request.READ, "lenght": 1}])
        with self.assertRaises(TypeError, msg="a non-request item"):
            eng.submit(1, [42])
        with self.assertRaisesRegex(RuntimeError, "127.0.0.1:1",
                                    msg="a segment nobody serves"):
            eng.open_segment("127.0.0.1:1")

    def check_out_of_range(self, eng, seg, local, target_base):
        """A READ past the target's registered buffer must fail, not
        complete."""
        batch = eng.allocate_batch(1)
        req = engine.Request(opcode=engine.Request.READ, source=local,
                             target_id=seg,
                             target_offset=target_base + BUFFER_SIZE,
                             length=4096)
        try:
            eng.submit(batch, [req])
        except RuntimeError:
            eng.free_batch(batch)
            return  # refused at submission: also a failure, as required
        status = self.wait_batch(eng, batch, 1)
        self.assertNotEqual(status[0].s, engine.TransferStatusEnum.COMPLETED,
                            status)
        eng.free_batch(batch)

    def test_two_processes(self):
        with tempfile.TemporaryDirectory() as tmp:
            config_path = os.path.join(tmp, "target.json")
            with open(config_path, "w") as f:
                json.dump({"rpc_server_hostname": "127.0.0.1",
                           "transports": {"tcp": {"enable": True}}}, f)
            child_env = dict(os.environ)
            child_env.pop("MC_TENT_CONF", None)  # the file is the config
            child = subprocess.Popen(
                [sys.executable, os.path.abspath(__file__), "--serve",
                 config_path],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=child_env)
            try:
                self.run_initiator(child)
            finally:
                child.stdin.close()
                try:
                    child.wait(timeout=DEADLINE_S)
                except subprocess.TimeoutExpired:
                    child.kill()
                    child.wait()
                    self.fail("target did not exit after stdin closed")
            self.assertEqual(child.returncode, 0, "target's exit status")

    def run_initiator(self, child):
        _, target_name, target_addr, target_len = self.read_line(
            child, "SEGMENT ", DEADLINE_S).split()
        target_addr, target_len = int(target_addr), int(target_len)
        self.assertTrue(target_name.startswith("127.0.0.1:"), target_name)

        os.environ["MC_TENT_CONF"] = '{"rpc_server_hostname":"127.0.0.1"}'
        eng = engine.TransferEngine()
        self.assertTrue(eng.available())
        self.assertTrue(eng.get_segment_name().startswith("127.0.0.1:"),
                        eng.get_segment_name())
        self.assertNotEqual(eng.get_segment_name(), target_name)
        self.assertIn("tcp", eng.get_supported_transports())

        local = eng.allocate_managed_buffer(BUFFER_SIZE)
        eng.register_memory(local, BUFFER_SIZE)
        seg = eng.open_segment(target_name)
        buffers = eng.get_segment_info(seg)
        self.assertTrue(any(b["base"] == target_addr and
                            b["length"] == target_len for b in buffers),
                        buffers)

        piece = BUFFER_SIZE // PIECES
        # READ the target's pattern (Request objects).
        ctypes.memset(local, 0, BUFFER_SIZE)
        self.transfer(eng, [
            engine.Request(opcode=engine.Request.READ,
                           source=local + i * piece, target_id=seg,
                           target_offset=target_addr + i * piece,
                           length=piece,
                           transport_hint=engine.TransportType.TCP)
            for i in range(PIECES)])
        self.assertEqual(ctypes.string_at(local, BUFFER_SIZE),
                         pattern(7, BUFFER_SIZE))

        # WRITE our pattern (dicts), scrub, READ it back.
        ctypes.memmove(local, pattern(42, BUFFER_SIZE), BUFFER_SIZE)
        self.transfer(eng, [
            {"opcode": engine.Request.WRITE, "source": local + i * piece,
             "target_id": seg, "target_offset": target_addr + i * piece,
             "length": piece} for i in range(PIECES)])
        ctypes.memset(local, 0, BUFFER_SIZE)
        self.transfer(eng, [
            {"opcode": engine.Request.READ, "source": local + i * piece,
             "target_id": seg, "target_offset": target_addr + i * piece,
             "length": piece} for i in range(PIECES)])
        self.assertEqual(ctypes.string_at(local, BUFFER_SIZE),
                         pattern(42, BUFFER_SIZE))

        self.check_out_of_range(eng, seg, local, target_addr)
        self.check_bad_input(eng, seg)

        eng.close_segment(seg)
        eng.unregister_memory(local, BUFFER_SIZE)
        eng.free_managed_buffer(local)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--serve":
        serve(sys.argv[2])
    else:
        unittest.main(verbosity=2)
