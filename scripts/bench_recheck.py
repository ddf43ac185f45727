#!/usr/bin/env python3
"""Measures again, one case per pair of processes, the rows of a
scripts/bench.sh run where mpcomm read under the goal against tcp, so that
a miss can be told from the host's scatter.

usage: bench_recheck.py [--results=bench/results.json] [--rounds=5]
                        [--limit=0.9] [--duration=1] [--warmup=0.5]
                        [--out=bench/recheck.json] [--list]

bench.sh measures each block size as one tebench process per transport that
sweeps ten cases, and keeps each case's median of ROUNDS rounds. A row
under the limit there may be the case or the host's phase while it ran:
the same code met 0.9x of itself in only 61-78 of 90 rows between two
rounds (docs/performance.md). Here every such case runs alone, mpcomm and
tcp back to back with the order flipped each round, --rounds times, cases
interleaved so that a case's rounds lie minutes apart. A case holds when
the median of its rounds' mpcomm/tcp ratios reaches the limit.

Runs what bench.sh built: tebench in $BUILD_ON (default build-mpcomm) over
the softmpcomm in $SOFT_PREFIX (default .prefix/softmpcomm), through
scripts/tebench_pair.sh. --list prints the cases and runs nothing. Given
an earlier recheck's --out file as --results, it measures again the cases
that file left under the limit (write it to another --out).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
from bench_report import GOAL_MAX_BLOCK, GOAL_MIN_BLOCK  # noqa: E402


def misses(rows, limit):
    """The (op, block, batch, threads) cases, in the goal's block range,
    whose mpcomm row reads under `limit` times the tcp row of the same
    case, with that ratio; sorted by op, block, batch, threads."""
    by_case = {}
    for r in rows:
        if not GOAL_MIN_BLOCK <= r["block_size"] <= GOAL_MAX_BLOCK:
            continue
        case = (r["op"], r["block_size"], r["batch_size"], r["threads"])
        by_case.setdefault(case, {})[r["transport"]] = r["bw_gbps"]
    out = []
    for case, bw in sorted(by_case.items()):
        mp, tcp = bw.get("mpcomm"), bw.get("tcp")
        if mp is not None and tcp and mp / tcp < limit:
            out.append((case, mp / tcp))
    return out


def still_missing(recheck):
    """The cases an earlier recheck (its --out file) found still under its
    limit, with the median ratio it measured, in the same order."""
    return [((c["op"], c["block_size"], c["batch_size"], c["threads"]),
             c["ratio_median"]) for c in recheck["cases"] if not c["holds"]]


def verdict(mpcomm, tcp, limit):
    """What a case's rounds say: the median of the per-round ratios (each
    round's pair ran back to back), the medians of each transport, and
    whether the ratio median reaches `limit`."""
    ratios = [m / t for m, t in zip(mpcomm, tcp) if t]
    median = statistics.median(ratios) if ratios else 0.0
    return {"mpcomm_gbps": mpcomm, "tcp_gbps": tcp, "ratios": ratios,
            "ratio_median": median,
            "mpcomm_median": statistics.median(mpcomm) if mpcomm else 0.0,
            "tcp_median": statistics.median(tcp) if tcp else 0.0,
            "holds": bool(ratios) and median >= limit}


def run_case(args, xport, case):
    op, block, batch, threads = case
    env = dict(os.environ)
    # Each thread needs room for a batch; tebench_pair.sh's default (64
    # MiB) is the floor, as in bench.sh's smaller sweeps.
    env["TOTAL_BUFFER_SIZE"] = str(max(block * batch * threads, 64 << 20))
    soft = os.environ.get("SOFT_PREFIX",
                          os.path.join(ROOT, ".prefix", "softmpcomm"))
    env["LD_LIBRARY_PATH"] = os.path.join(soft, "lib") + (
        ":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
    build = os.environ.get("BUILD_ON", os.path.join(ROOT, "build-mpcomm"))
    with tempfile.TemporaryDirectory(prefix="bench_recheck.") as tmp:
        out = os.path.join(tmp, "case.json")
        env["LOGDIR"] = tmp
        cmd = ["bash", os.path.join(ROOT, "scripts", "tebench_pair.sh"),
               os.path.join(build, "benchmark", "tebench"), xport,
               "--op_type=" + op, "--start_block_size=%d" % block,
               "--max_block_size=%d" % block,
               "--start_batch_size=%d" % batch,
               "--max_batch_size=%d" % batch,
               "--start_num_threads=%d" % threads,
               "--max_num_threads=%d" % threads,
               "--duration=%s" % args.duration,
               "--warmup_duration=%s" % args.warmup, "--json_out=" + out]
        done = subprocess.run(cmd, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
        try:
            with open(out) as f:
                report = json.load(f)
        except (OSError, ValueError):
            report = {}
        if done.returncode != 0 or not report.get("ok", False):
            sys.exit("bench_recheck: %s %s failed (exit %d): %s" %
                     (xport, describe(case), done.returncode,
                      report.get("error") or done.stdout[-2000:]))
        return report["rows"][0]["bw_gbps"]


def describe(case):
    op, block, batch, threads = case
    return "%s %d KiB batch %d threads %d" % (op, block >> 10, batch,
                                              threads)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--results",
                   default=os.path.join(ROOT, "bench", "results.json"))
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--limit", type=float, default=0.9)
    p.add_argument("--duration", default="1")
    p.add_argument("--warmup", default="0.5")
    p.add_argument("--out", default=os.path.join(ROOT, "bench",
                                                 "recheck.json"))
    p.add_argument("--list", action="store_true")
    args = p.parse_args()
    if args.rounds < 1:
        sys.exit("bench_recheck: --rounds must be at least 1, got %d" %
                 args.rounds)
    with open(args.results) as f:
        results = json.load(f)
    # A recheck's own output measures again what it left under the limit.
    if "cases" in results:
        cases = still_missing(results)
        what = "case(s) still"
    else:
        cases = misses(results["tebench"], args.limit)
        what = "row(s) of"
    print("bench_recheck: %d %s %s under %.2fx tcp" %
          (len(cases), what, args.results, args.limit))
    for case, ratio in cases:
        print("  %-34s %.2fx" % (describe(case), ratio))
    if args.list or not cases:
        return
    if os.path.abspath(args.out) == os.path.abspath(args.results):
        sys.exit("bench_recheck: --out=%s would overwrite the --results it "
                 "reads; name another file" % args.out)
    measured = {case: {"mpcomm": [], "tcp": []} for case, _ in cases}
    start = time.time()
    for rnd in range(args.rounds):
        for i, (case, _) in enumerate(cases):
            order = ["mpcomm", "tcp"] if (rnd + i) % 2 == 0 else [
                "tcp", "mpcomm"]
            for xport in order:
                measured[case][xport].append(run_case(args, xport, case))
        print("bench_recheck: round %d of %d done after %.0f s" %
              (rnd + 1, args.rounds, time.time() - start), flush=True)
    report = []
    held = 0
    print("\n%-34s %6s %8s %8s %8s  %s" % ("case", "bench", "mpcomm",
                                          "tcp", "ratio", "rounds"))
    for case, ratio in cases:
        v = verdict(measured[case]["mpcomm"], measured[case]["tcp"],
                    args.limit)
        held += v["holds"]
        print("%-34s %5.2fx %8.2f %8.2f %7.2fx  %s" % (
            describe(case), ratio, v["mpcomm_median"], v["tcp_median"],
            v["ratio_median"], " ".join("%.2f" % r for r in v["ratios"])))
        op, block, batch, threads = case
        report.append(dict(v, op=op, block_size=block, batch_size=batch,
                           threads=threads, bench_ratio=ratio))
    print("\nrecheck: %d of %d case(s) under %.2fx before reach it at "
          "the median of %d round(s), each case alone (%.0f s)" %
          (held, len(cases), args.limit, args.rounds, time.time() - start))
    with open(args.out, "w") as f:
        json.dump({"results": args.results, "rounds": args.rounds,
                   "limit": args.limit, "duration_s": float(args.duration),
                   "warmup_s": float(args.warmup), "held": held,
                   "cases": report}, f, indent=1)


if __name__ == "__main__":
    main()
