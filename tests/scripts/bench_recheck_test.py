#!/usr/bin/env python3
"""Unit tests of scripts/bench_recheck.py's choice of cases and tcp steps
and of its verdicts.
Run by ctest as tent_bench_recheck_test."""
import argparse
import json
import os
import sys
import unittest
from unittest import mock

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "scripts"))
import bench_recheck  # noqa: E402


def row(xport, op, block, bw, batch=1, threads=1):
    return {"transport": xport, "op": op, "block_size": block,
            "batch_size": batch, "threads": threads, "bw_gbps": bw}


class Misses(unittest.TestCase):
    def test_only_cases_under_the_limit_in_the_goal_range(self):
        mib = 1 << 20
        rows = [
            # Under the limit: 8.0 / 10.0.
            row("mpcomm", "write", 2 * mib, 8.0, batch=8),
            row("tcp", "write", 2 * mib, 10.0, batch=8),
            # Exactly at it: not a miss.
            row("mpcomm", "read", 2 * mib, 9.0, batch=8),
            row("tcp", "read", 2 * mib, 10.0, batch=8),
            # Below the goal's 256 KiB: not the goal's row.
            row("mpcomm", "read", 64 << 10, 1.0),
            row("tcp", "read", 64 << 10, 10.0),
            # Same block, another batch and thread count: its own case.
            row("mpcomm", "write", 2 * mib, 5.0, batch=4, threads=2),
            row("tcp", "write", 2 * mib, 10.0, batch=4, threads=2),
            # A case without its tcp row is nothing to compare.
            row("mpcomm", "write", 64 * mib, 1.0),
        ]
        got = bench_recheck.misses(rows, 0.9)
        self.assertEqual([c for c, _ in got],
                         [("write", 2 * mib, 4, 2), ("write", 2 * mib, 8, 1)])
        self.assertAlmostEqual(got[0][1], 0.5)
        self.assertAlmostEqual(got[1][1], 0.8)


class StillMissing(unittest.TestCase):
    def test_an_earlier_recheck_gives_the_cases_it_left_under(self):
        recheck = {"cases": [
            {"op": "read", "block_size": 1 << 20, "batch_size": 4,
             "threads": 1, "ratio_median": 1.3, "holds": True},
            {"op": "write", "block_size": 256 << 10, "batch_size": 8,
             "threads": 1, "ratio_median": 0.71, "holds": False},
            {"op": "write", "block_size": 2 << 20, "batch_size": 4,
             "threads": 2, "ratio_median": 0.77, "holds": False},
        ]}
        self.assertEqual(bench_recheck.still_missing(recheck),
                         [(("write", 256 << 10, 8, 1), 0.71),
                          (("write", 2 << 20, 4, 2), 0.77)])


def sweeps(block, rounds):
    """tcp write rows at `block`, one sweep per round of {batch: GB/s}
    (one thread): what bench_recheck.run_sweep() returns, round-tagged."""
    return [dict(row("tcp", "write", block, bw, batch=batch), round=n)
            for n, sweep in enumerate(rounds, 1)
            for batch, bw in sweep.items()]


class Steps(unittest.TestCase):
    def test_falling_steps_come_from_the_goals_of_both_ops(self):
        mib = 1 << 20
        goals = {"bandwidth": [
            {"goal": "mpcomm / tcp, same case", "op": "read"},
            {"goal": "tcp: no step falls > 10 %", "op": "read",
             "steps_falling": []},
            {"goal": "tcp: no step falls > 10 %", "op": "write",
             "steps_falling": [
                 {"from": 16 * mib, "to": 32 * mib, "ratio": 0.88},
                 {"from": 32 * mib, "to": 64 * mib, "ratio": 0.5}]},
        ]}
        self.assertEqual(bench_recheck.falling_steps(goals),
                         [("write", 16 * mib, 32 * mib, 0.88),
                          ("write", 32 * mib, 64 * mib, 0.5)])

    def test_an_earlier_recheck_gives_the_steps_still_falling(self):
        recheck = {"cases": [], "steps": [
            {"op": "read", "from": 1, "to": 2, "ratio": 1.01,
             "holds": True},
            {"op": "write", "from": 2, "to": 4, "ratio": 0.8,
             "holds": False}]}
        self.assertEqual(bench_recheck.steps_still_falling(recheck),
                         [("write", 2, 4, 0.8)])
        # A recheck written before steps were measured has none.
        self.assertEqual(bench_recheck.steps_still_falling({"cases": []}),
                         [])

    def test_best_case_median_of_each_size_decides(self):
        # Batch 1's medians: 10 at the low size, 9 at the high one; batch
        # 2's: 8 and 9.5. Best of medians: 10 -> 9.5, 0.95x: holds,
        # although round 1's best rows alone read 12 -> 9.5 (0.79x).
        low = sweeps(1 << 20, [{1: 12.0, 2: 8.0}, {1: 10.0, 2: 7.0},
                               {1: 9.0, 2: 9.0}])
        high = sweeps(2 << 20, [{1: 9.0, 2: 9.5}, {1: 9.0, 2: 9.5},
                                {1: 10.0, 2: 9.0}])
        v = bench_recheck.step_verdict(low, high, 0.9)
        self.assertEqual(v["best_from_gbps"], 10.0)
        self.assertEqual(v["best_to_gbps"], 9.5)
        self.assertAlmostEqual(v["ratio"], 0.95)
        self.assertEqual([round(r, 3) for r in v["ratios"]],
                         [0.792, 0.95, 1.111])
        self.assertTrue(v["holds"])

    def test_a_step_that_falls_does_not_hold(self):
        v = bench_recheck.step_verdict(sweeps(1 << 20, [{1: 10.0}]),
                                       sweeps(2 << 20, [{1: 8.0}]), 0.9)
        self.assertAlmostEqual(v["ratio"], 0.8)
        self.assertFalse(v["holds"])
        self.assertFalse(bench_recheck.step_verdict([], [], 0.9)["holds"])


class Verdict(unittest.TestCase):
    def test_median_of_the_paired_ratios_decides(self):
        # Ratios 0.5, 1.0, 0.95: the median 0.95 holds, although the
        # medians of each transport (8.0 / 10.0) alone would not.
        v = bench_recheck.verdict([5.0, 8.0, 9.5], [10.0, 8.0, 10.0], 0.9)
        self.assertEqual(v["ratios"], [0.5, 1.0, 0.95])
        self.assertAlmostEqual(v["ratio_median"], 0.95)
        self.assertEqual(v["mpcomm_median"], 8.0)
        self.assertEqual(v["tcp_median"], 10.0)
        self.assertTrue(v["holds"])

    def test_under_the_limit_does_not_hold(self):
        v = bench_recheck.verdict([8.0, 8.5], [10.0, 10.0], 0.9)
        self.assertAlmostEqual(v["ratio_median"], 0.825)
        self.assertFalse(v["holds"])

    def test_nothing_measured_does_not_hold(self):
        v = bench_recheck.verdict([], [], 0.9)
        self.assertEqual(v["ratios"], [])
        self.assertFalse(v["holds"])


class TebenchCommand(unittest.TestCase):
    def test_extra_arguments_follow_the_sweep_flags(self):
        seen = []

        def fake_run(cmd, **kwargs):
            seen.append(cmd)
            out = [a for a in cmd if a.startswith("--json_out=")][0]
            with open(out.split("=", 1)[1], "w") as f:
                json.dump({"ok": True, "rows": [{"bw_gbps": 3.5}]}, f)
            return mock.Mock(returncode=0, stdout="")

        args = argparse.Namespace(
            duration="1", warmup="0.5",
            tebench_arg=["--poll_yields=0", "--poll_sleep_us=0"])
        with mock.patch.object(bench_recheck.subprocess, "run", fake_run):
            bw = bench_recheck.run_case(args, "mpcomm",
                                        ("write", 262144, 8, 1))
        self.assertEqual(bw, 3.5)
        cmd = seen[0]
        self.assertEqual(cmd[-2:], ["--poll_yields=0", "--poll_sleep_us=0"])
        self.assertIn("--max_batch_size=8", cmd)
        self.assertTrue(cmd[-3].startswith("--json_out="))

    def test_an_argument_that_is_not_a_flag_is_refused(self):
        argv = ["bench_recheck.py", "--tebench_arg=poll_yields=0"]
        with mock.patch.object(sys, "argv", argv):
            with self.assertRaises(SystemExit) as stop:
                bench_recheck.main()
        self.assertEqual(
            str(stop.exception),
            "bench_recheck: --tebench_arg=poll_yields=0 is not a tebench "
            "flag (--name=value)")


if __name__ == "__main__":
    unittest.main()
