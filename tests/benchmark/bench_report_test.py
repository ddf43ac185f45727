#!/usr/bin/env python3
"""Unit tests of benchmark/tools/bench_report.py: how tebench files of several
rounds are read, which round a row keeps, the self-agreement figures, and
the goal lines (named by what they compare). Run by ctest as
tent_bench_report_test."""
import json
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "benchmark", "tools"))
import bench_report  # noqa: E402


def row(xport, op, block, bw, batch=1, threads=1, lat=1.0):
    return {"transport": xport, "op": op, "block_size": block,
            "batch_size": batch, "threads": threads, "bw_gbps": bw,
            "avg_lat_us": lat}


class LoadTebench(unittest.TestCase):
    def write(self, raw, name, rows, ok=True, first=100.0):
        with open(os.path.join(raw, name), "w") as f:
            json.dump({"ok": ok, "run": {"transport": rows[0]["transport"],
                                         "op": rows[0]["op"]},
                       "first_transfer_us": first, "rows": rows}, f)

    def test_round_comes_from_the_file_name(self):
        with tempfile.TemporaryDirectory() as raw:
            block = 1 << 20
            self.write(raw, "tebench_tcp_read_b1-16_s1048576_r1.json",
                       [row("tcp", "read", block, 1.0)], first=10.0)
            self.write(raw, "tebench_tcp_read_b1-16_s1048576_r3.json",
                       [row("tcp", "read", block, 3.0)], first=30.0)
            self.write(raw, "tebench_tcp_read_b1-16.json",
                       [row("tcp", "read", 65536, 5.0)], first=50.0)
            rows, first = bench_report.load_tebench(raw)
            # A file without a round tag is round 1.
            rounds = sorted((r["block_size"], r["round"], r["bw_gbps"])
                            for r in rows)
            self.assertEqual(rounds, [(65536, 1, 5.0), (block, 1, 1.0),
                                      (block, 3, 3.0)])
            # One series, three runs: the median of 10, 30 and 50 us.
            self.assertEqual(first, {"tcp/read/batch 1-16": 30.0})

    def test_a_failed_run_stops_the_report(self):
        with tempfile.TemporaryDirectory() as raw:
            self.write(raw, "tebench_tcp_read_b1-16_s65536_r2.json",
                       [row("tcp", "read", 65536, 1.0)], ok=False)
            with self.assertRaises(SystemExit) as caught:
                bench_report.load_tebench(raw)
            self.assertIn("_r2.json records a failed run", str(caught.exception))


class MergeRounds(unittest.TestCase):
    def test_three_rounds_keep_the_median_round_whole(self):
        runs = [dict(row("mpcomm", "write", 4096, bw, lat=lat), round=n)
                for n, bw, lat in ((1, 9.0, 11.0), (2, 3.0, 33.0),
                                   (3, 6.0, 22.0))]
        merged = bench_report.merge_rounds(runs)
        self.assertEqual(len(merged), 1)
        self.assertEqual(merged[0]["bw_gbps"], 6.0)
        self.assertEqual(merged[0]["avg_lat_us"], 22.0)
        self.assertEqual(merged[0]["rounds"], 3)
        self.assertEqual(merged[0]["bw_gbps_rounds"], [9.0, 3.0, 6.0])
        self.assertNotIn("round", merged[0])

    def test_an_even_count_keeps_the_lower_middle_round(self):
        runs = [dict(row("tcp", "read", 4096, bw), round=n)
                for n, bw in ((1, 4.0), (2, 1.0), (3, 3.0), (4, 2.0))]
        merged = bench_report.merge_rounds(runs)
        self.assertEqual(merged[0]["bw_gbps"], 2.0)
        self.assertEqual(merged[0]["bw_gbps_rounds"], [4.0, 1.0, 3.0, 2.0])

    def test_cases_stay_apart(self):
        runs = [dict(row("tcp", "read", 4096, 1.0, batch=b, threads=t),
                     round=1) for b in (1, 2) for t in (1, 2)]
        runs.append(dict(row("mpcomm", "read", 4096, 1.0), round=1))
        runs.append(dict(row("tcp", "write", 4096, 1.0), round=1))
        self.assertEqual(len(bench_report.merge_rounds(runs)), 6)


class RoundAgreement(unittest.TestCase):
    def test_round_two_over_round_one_per_series(self):
        block = 1 << 20
        runs = []
        for batch, r1, r2 in ((1, 10.0, 9.5), (2, 10.0, 8.0), (4, 10.0, 12.0)):
            runs.append(dict(row("tcp", "read", block, r1, batch=batch),
                             round=1))
            runs.append(dict(row("tcp", "read", block, r2, batch=batch),
                             round=2))
        # Outside the goals' block range, and a case with one round only.
        runs.append(dict(row("tcp", "read", 65536, 1.0), round=1))
        runs.append(dict(row("tcp", "read", 65536, 0.1), round=2))
        runs.append(dict(row("tcp", "read", block, 5.0, batch=8), round=1))
        out = bench_report.round_agreement(bench_report.merge_rounds(runs))
        self.assertEqual(len(out), 1)
        self.assertEqual(out[0]["series"], "tcp read")
        self.assertEqual(out[0]["rows_at_least_0.9"], 2)
        summary = out[0]["round2_over_round1"]
        self.assertEqual(summary["rows"], 3)
        self.assertAlmostEqual(summary["min"], 0.8)
        self.assertAlmostEqual(summary["median"], 0.95)

    def test_one_round_has_nothing_to_agree_with(self):
        runs = [dict(row("tcp", "read", 1 << 20, 1.0), round=1)]
        self.assertEqual(
            bench_report.round_agreement(bench_report.merge_rounds(runs)), [])


class GoalLines(unittest.TestCase):
    def test_each_goal_is_named_by_what_it_compares(self):
        mib = 1 << 20
        rows = [row("mpcomm", "read", mib, 9.0), row("tcp", "read", mib, 10.0),
                row("mpcomm", "read", mib, 8.0, batch=2),
                row("tcp", "read", mib, 10.0, batch=2),
                row("mpcomm", "read", 2 * mib, 12.0),
                row("tcp", "read", 2 * mib, 8.0),
                # Below the goals' block range: counted nowhere.
                row("mpcomm", "read", 65536, 1.0),
                row("tcp", "read", 65536, 9.0)]
        goals = bench_report.bandwidth_goals(rows, {1: 4.0, 2: 5.0})
        lines = bench_report.goal_lines(goals, [], [], [])
        self.assertEqual(lines, [
            "Goals (256 KiB..64 MiB; per row, and each block size's best "
            "row):",
            "  mpcomm/tcp, same case      read  >= 0.9x: rows 2/3 "
            "(median 0.90x, min 0.80x); sizes 2/2 (median 1.20x, min 0.90x)",
            "  mpcomm/iperf3 2-stream     read  >= 0.8x: rows 3/3 "
            "(median 1.80x, min 1.60x); sizes 2/2 (median 2.10x, min 1.80x)",
            "  tcp: no step falls > 10 %  read  1 of 1 steps fall "
            "(1M->2M 0.80x)",
            "  tcp: no step falls > 10 %  write 0 of 0 steps fall (none)"])

    def test_overhead_ratios_are_named_by_their_cases(self):
        overhead = [
            {"name": "BM_TransportWrite", "buffers": 1, "peers": 1,
             "batch": 1, "ns_per_request": 100.0},
            {"name": "BM_TransportWrite", "buffers": 1024, "peers": 1,
             "batch": 1, "ns_per_request": 103.0},
            {"name": "BM_TransportWrite", "buffers": 1, "peers": 64,
             "batch": 1, "ns_per_request": 110.0},
            {"name": "BM_AdapterDirect", "buffers": 0, "peers": 1,
             "batch": 1, "ns_per_request": 10.0},
            {"name": "BM_EngineWrite", "buffers": 1, "peers": 1,
             "batch": 1, "ns_per_request": 180.0}]
        ovh = bench_report.overhead_goals(overhead)
        self.assertEqual(ovh, [{"batch": 1, "buffers_1024_over_1": 1.03,
                                "peers_64_over_1": 1.1,
                                "peers_64_over_1_one_target": None,
                                "transport_over_adapter": 10.0,
                                "engine_over_transport": 1.8}])
        lines = bench_report.goal_lines([], ovh, [], [])
        self.assertEqual(lines[1],
                         "  overhead batch 1   1024/1 buffers 1.03, 64/1 "
                         "peers 1.10 (one target    -), transport/adapter "
                         "10.00, engine/transport 1.80")


if __name__ == "__main__":
    unittest.main(verbosity=2)
