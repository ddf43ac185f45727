#!/usr/bin/env python3
"""scripts/pack_bench.sh end to end (ctest: tent_pack_bench_test).

usage: pack_bench_test.py <path to tebench> <softmpcomm install prefix>

Packs the build's tebench with --no-build into a temporary folder, checks
that every shared library tebench loads from the pack is the pack's own
(glibc's aside), and runs a one-round bench_recheck.py of one case from
the pack with none of the build's paths in its environment: both
transports move bytes and the output records the host. The packed
tebench_pair.sh runs a pair on the port TEBENCH_PAIR_PORT names and
refuses one that is not a port. Also checks the
script's refusals: an unknown flag, a build without tebench, and a
destination that holds something other than an earlier pack.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
PACK = os.path.join(ROOT, "scripts", "pack_bench.sh")
TEBENCH, SOFT_PREFIX = sys.argv[1], sys.argv[2]
BUILD_ON = os.path.dirname(os.path.dirname(os.path.abspath(TEBENCH)))
GLIBC = ("libc.so", "libm.so", "libpthread.so", "libdl.so", "librt.so",
         "ld-linux")


def pack(dest, build_on=BUILD_ON, extra=()):
    env = dict(os.environ, BUILD_ON=build_on, SOFT_PREFIX=SOFT_PREFIX)
    return subprocess.run(["bash", PACK, "--no-build"] + list(extra) +
                          [dest], env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=120)


def bare_env():
    """This environment without the build's paths, as on another host.
    The pair's MPComm ports come from 32000-32767, which no other suite
    takes (tests/two_process_fixture.h, tests/mpcomm_recovery_test.cpp,
    benchmark/tebench_test.py and scripts/chaos.sh list theirs), so that
    ctest -j cannot hand the same port to two processes."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("BUILD_ON", "SOFT_PREFIX", "LD_LIBRARY_PATH")}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["TEBENCH_PAIR_PORT"] = str(32000 + (os.getpid() % 383) * 2)
    return env


class PackBench(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="pack_bench_test.")
        cls.dest = os.path.join(cls.tmp, "pack")
        cls.done = pack(cls.dest)
        cls.lib = os.path.join(cls.dest, ".prefix", "softmpcomm", "lib")
        cls.tebench = os.path.join(cls.dest, "build-mpcomm", "benchmark",
                                   "tebench")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_packs_tebench_scripts_and_libraries(self):
        self.assertEqual(self.done.returncode, 0, self.done.stdout)
        self.assertIn("pack_bench: %s: tebench, " % self.dest,
                      self.done.stdout)
        for rel in ("scripts/bench_recheck.py", "scripts/bench_report.py",
                    "scripts/tebench_pair.sh",
                    "build-mpcomm/benchmark/tebench",
                    ".prefix/softmpcomm/lib/libtent.so",
                    ".prefix/softmpcomm/lib/libmpcomm.so.1"):
            self.assertTrue(os.path.isfile(os.path.join(self.dest, rel)),
                            rel)
        packed = os.listdir(self.lib)
        self.assertFalse([n for n in packed if n.startswith(GLIBC)], packed)

    def test_every_library_but_glibc_loads_from_the_pack(self):
        env = dict(bare_env(), LD_LIBRARY_PATH=self.lib)
        out = subprocess.run(
            ["ldd", self.tebench],
            env=env, stdout=subprocess.PIPE, text=True, check=True).stdout
        self.assertNotIn("not found", out)
        resolved = [line.split() for line in out.splitlines()
                    if "=>" in line and "/" in line]
        self.assertTrue(resolved, out)
        for name, _, path, *_ in resolved:
            if name.startswith(GLIBC):
                self.assertFalse(path.startswith(self.lib), path)
            else:
                self.assertEqual(os.path.dirname(path), self.lib,
                                 "%s from %s" % (name, path))

    def test_a_recheck_runs_from_the_pack(self):
        mib = 1 << 20
        rows = [{"transport": x, "op": "write", "block_size": mib,
                 "batch_size": 2, "threads": 1, "bw_gbps": bw}
                for x, bw in (("mpcomm", 1.0), ("tcp", 10.0))]
        results = os.path.join(self.tmp, "results.json")
        with open(results, "w") as f:
            json.dump({"tebench": rows, "goals": {"bandwidth": []}}, f)
        out = os.path.join(self.tmp, "recheck.json")
        done = subprocess.run(
            [sys.executable,
             os.path.join(self.dest, "scripts", "bench_recheck.py"),
             "--results=" + results, "--rounds=1", "--duration=0.2",
             "--warmup=0.1", "--out=" + out],
            cwd=self.tmp, env=bare_env(), stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True, timeout=240)
        self.assertEqual(done.returncode, 0, done.stdout)
        self.assertIn("1 case(s) and 0 tcp step(s) under 0.90x; measuring "
                      "on %s (%d cores)" % (os.uname().nodename,
                                            os.cpu_count()), done.stdout)
        with open(out) as f:
            report = json.load(f)
        self.assertEqual(report["host"]["cpus"], os.cpu_count())
        case = report["cases"][0]
        self.assertEqual((case["op"], case["block_size"], case["batch_size"],
                          case["threads"]), ("write", mib, 2, 1))
        self.assertEqual(len(case["mpcomm_gbps"]), 1)
        self.assertEqual(len(case["tcp_gbps"]), 1)
        self.assertGreater(case["mpcomm_gbps"][0], 0)
        self.assertGreater(case["tcp_gbps"][0], 0)

    def test_the_packed_pair_takes_the_port_it_is_given(self):
        env = dict(bare_env(),
                   LD_LIBRARY_PATH=self.lib, TOTAL_BUFFER_SIZE=str(1 << 22))
        port = int(env["TEBENCH_PAIR_PORT"])
        done = subprocess.run(
            ["bash", os.path.join(self.dest, "scripts", "tebench_pair.sh"),
             self.tebench,
             "mpcomm", "--op_type=write", "--start_block_size=65536",
             "--max_block_size=65536", "--max_batch_size=1",
             "--max_num_threads=1", "--duration=0.1",
             "--warmup_duration=0"],
            cwd=self.tmp, env=env, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True, timeout=120)
        self.assertEqual(done.returncode, 0, done.stdout)
        self.assertIn("(pid ", done.stdout)
        self.assertIn("MPCOMM_TCP_PORT=%d)" % port, done.stdout)
        self.assertIn("MpcommTransport: Installed successfully", done.stdout)
        for bad in ("abc", "0", "65535"):
            env["TEBENCH_PAIR_PORT"] = bad
            done = subprocess.run(
                ["bash", os.path.join(self.dest, "scripts",
                                      "tebench_pair.sh"), "unused", "mpcomm"],
                env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                text=True, timeout=30)
            self.assertEqual(done.returncode, 2, bad)
            self.assertIn("tebench_pair: TEBENCH_PAIR_PORT must be a port in "
                          "[1, 65534], got '%s'" % bad, done.stdout)

    def test_refuses_an_unknown_flag(self):
        done = pack(os.path.join(self.tmp, "never"), extra=["--bogus"])
        self.assertEqual(done.returncode, 2)
        self.assertIn("pack_bench: unknown argument '--bogus'", done.stdout)
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "never")))

    def test_refuses_a_build_without_tebench(self):
        empty = os.path.join(self.tmp, "empty_build")
        os.makedirs(empty, exist_ok=True)
        done = pack(os.path.join(self.tmp, "never"), build_on=empty)
        self.assertEqual(done.returncode, 1)
        self.assertIn("pack_bench: %s/benchmark/tebench is missing" % empty,
                      done.stdout)
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "never")))

    def test_replaces_an_earlier_pack_but_no_other_folder(self):
        again = pack(self.dest)
        self.assertEqual(again.returncode, 0, again.stdout)
        other = os.path.join(self.tmp, "other")
        os.makedirs(other, exist_ok=True)
        keep = os.path.join(other, "keep.txt")
        with open(keep, "w") as f:
            f.write("mine")
        done = pack(other)
        self.assertEqual(done.returncode, 1)
        self.assertIn("pack_bench: %s exists and is not a pack; name a new "
                      "folder" % other, done.stdout)
        with open(keep) as f:
            self.assertEqual(f.read(), "mine")


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1])
