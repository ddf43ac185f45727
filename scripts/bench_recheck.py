#!/usr/bin/env python3
"""Measures again what a scripts/bench.sh run found under issue 9's
bandwidth goals, so that a miss can be told from the host's scatter: the
rows where mpcomm read under the limit against tcp, one case per pair of
processes, and the tcp steps that fell, as the sweeps bench.sh runs.

usage: bench_recheck.py [--results=bench/results.json] [--rounds=5]
                        [--limit=0.9] [--duration=1] [--warmup=0.5]
                        [--out=bench/recheck.json] [--list]
                        [--what=all|cases|steps]
                        [--tebench_arg=--flag=value ...]

bench.sh measures each block size as one tebench process per transport that
sweeps ten cases, and keeps each case's median of ROUNDS rounds. A row
under the limit there may be the case or the host's phase while it ran:
the same code met 0.9x of itself in only 61-78 of 90 rows between two
rounds (docs/performance.md). Here every such case runs alone, mpcomm and
tcp back to back with the order flipped each round, --rounds times, cases
interleaved so that a case's rounds lie minutes apart. A case holds when
the median of its rounds' mpcomm/tcp ratios reaches the limit. A tcp step
(block size A to the next, B) that fell under the limit is measured as
bench.sh measures it, one tcp sweep of every batch and thread count per
size, A and B back to back each round; it holds when B's best case
median over A's reaches the limit.

Runs what bench.sh built: tebench in $BUILD_ON (default build-mpcomm) over
the softmpcomm in $SOFT_PREFIX (default .prefix/softmpcomm), through
scripts/tebench_pair.sh. --list prints the cases and runs nothing. Given
an earlier recheck's --out file as --results, it measures again the cases
and steps that file left under the limit (write it to another --out).
Each --tebench_arg goes to every tebench initiator after bench.sh's flags,
for both transports alike (e.g. --tebench_arg=--poll_yields=0 to measure
the misses under another poll loop); the output records them, and the
host it measured on (name and cores). To measure this host's misses on
another host, scripts/pack_bench.sh packs this script, tebench and its
libraries into one folder that runs there.
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
from bench_report import (best_by_block, goal_cases,  # noqa: E402
                          merge_rounds)


def misses(rows, limit):
    """The (op, block, batch, threads) cases, in the goal's block range,
    whose mpcomm row reads under `limit` times the tcp row of the same
    case, with that ratio; sorted by op, block, batch, threads."""
    out = []
    for case, bw in sorted(goal_cases(rows).items()):
        mp, tcp = bw.get("mpcomm"), bw.get("tcp")
        if mp is not None and tcp and mp / tcp < limit:
            out.append((case, mp / tcp))
    return out


def still_missing(recheck):
    """The cases an earlier recheck (its --out file) found still under its
    limit, with the median ratio it measured, in the same order."""
    return [((c["op"], c["block_size"], c["batch_size"], c["threads"]),
             c["ratio_median"]) for c in recheck["cases"] if not c["holds"]]


def falling_steps(goals):
    """The tcp steps a run's goals (results.json's `goals`) found falling:
    (op, from block, to block, ratio), in the report's order."""
    return [(g["op"], s["from"], s["to"], s["ratio"])
            for g in goals["bandwidth"] if "steps_falling" in g
            for s in g["steps_falling"]]


def steps_still_falling(recheck):
    """The steps an earlier recheck left under its limit."""
    return [(s["op"], s["from"], s["to"], s["ratio"])
            for s in recheck.get("steps", []) if not s["holds"]]


def step_verdict(rows_from, rows_to, limit):
    """What a step's rounds say. Each side is the tebench rows of its
    sweeps at one block size, each row tagged with its `round`. A size's
    figure is bench.sh's best row per size: merge_rounds() keeps each
    case's median round, best_by_block() the best case. The step holds
    when the larger size's figure over the smaller's reaches `limit`. The
    rounds' own ratios (best row against best row) go with it."""
    def best(rows):
        return max(best_by_block(merge_rounds(rows)).values(), default=0.0)

    def best_per_round(rows):
        out = {}
        for r in rows:
            out[r["round"]] = max(out.get(r["round"], 0.0), r["bw_gbps"])
        return out
    low, high = best(rows_from), best(rows_to)
    ratio = high / low if low else 0.0
    low_rounds, high_rounds = best_per_round(rows_from), best_per_round(
        rows_to)
    return {"best_from_gbps": low, "best_to_gbps": high, "ratio": ratio,
            "ratios": [high_rounds[k] / low_rounds[k]
                       for k in sorted(low_rounds)
                       if k in high_rounds and low_rounds[k]],
            "holds": low > 0 and ratio >= limit}


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


def run_tebench(args, xport, op, block, batches, threads, what):
    """One tebench pair at one block size over the given (first, last)
    batch sizes and thread counts; its rows."""
    env = dict(os.environ)
    # Each thread needs room for a batch; tebench_pair.sh's default (64
    # MiB) is the floor, as in bench.sh's smaller sweeps.
    env["TOTAL_BUFFER_SIZE"] = str(
        max(block * batches[1] * threads[1], 64 << 20))
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
               "--start_batch_size=%d" % batches[0],
               "--max_batch_size=%d" % batches[1],
               "--start_num_threads=%d" % threads[0],
               "--max_num_threads=%d" % threads[1],
               "--duration=%s" % args.duration,
               "--warmup_duration=%s" % args.warmup, "--json_out=" + out
               ] + args.tebench_arg
        done = subprocess.run(cmd, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
        try:
            with open(out) as f:
                report = json.load(f)
        except (OSError, ValueError):
            report = {}
        if done.returncode != 0 or not report.get("ok", False):
            sys.exit("bench_recheck: %s %s failed (exit %d): %s" %
                     (xport, what, done.returncode,
                      report.get("error") or done.stdout[-2000:]))
        return report["rows"]


def run_case(args, xport, case):
    op, block, batch, threads = case
    rows = run_tebench(args, xport, op, block, (batch, batch),
                       (threads, threads), describe(case))
    return rows[0]["bw_gbps"]


def run_sweep(args, op, block, rnd):
    """bench.sh's tcp sweep of one block size: its rows, tagged with the
    round `rnd` as bench_report.merge_rounds() expects."""
    rows = run_tebench(args, "tcp", op, block, (1, 16), (1, 2),
                       "%s %d KiB sweep" % (op, block >> 10))
    return [dict(r, round=rnd) for r in rows]


def describe(case):
    op, block, batch, threads = case
    return "%s %d KiB batch %d threads %d" % (op, block >> 10, batch,
                                              threads)


def measure_cases(args, cases, start):
    measured = {case: {"mpcomm": [], "tcp": []} for case, _ in cases}
    for rnd in range(args.rounds):
        for i, (case, _) in enumerate(cases):
            order = ["mpcomm", "tcp"] if (rnd + i) % 2 == 0 else [
                "tcp", "mpcomm"]
            for xport in order:
                measured[case][xport].append(run_case(args, xport, case))
        print("bench_recheck: cases, round %d of %d done after %.0f s" %
              (rnd + 1, args.rounds, time.time() - start), flush=True)
    report = []
    print("\n%-34s %6s %8s %8s %8s  %s" % ("case", "bench", "mpcomm",
                                          "tcp", "ratio", "rounds"))
    for case, ratio in cases:
        v = verdict(measured[case]["mpcomm"], measured[case]["tcp"],
                    args.limit)
        print("%-34s %5.2fx %8.2f %8.2f %7.2fx  %s" % (
            describe(case), ratio, v["mpcomm_median"], v["tcp_median"],
            v["ratio_median"], " ".join("%.2f" % r for r in v["ratios"])))
        op, block, batch, threads = case
        report.append(dict(v, op=op, block_size=block, batch_size=batch,
                           threads=threads, bench_ratio=ratio))
    return report


def measure_steps(args, steps, start):
    sweeps = {step: ([], []) for step in steps}
    for rnd in range(args.rounds):
        for i, step in enumerate(steps):
            op, low, high, _ = step
            first = (rnd + i) % 2 == 0
            for block in (low, high) if first else (high, low):
                sweeps[step][0 if block == low else 1].extend(
                    run_sweep(args, op, block, rnd + 1))
        print("bench_recheck: steps, round %d of %d done after %.0f s" %
              (rnd + 1, args.rounds, time.time() - start), flush=True)
    report = []
    print("\n%-34s %6s %8s %8s %8s  %s" % ("tcp step (best case)", "bench",
                                          "from", "to", "ratio", "rounds"))
    for step in steps:
        op, low, high, ratio = step
        v = step_verdict(sweeps[step][0], sweeps[step][1], args.limit)
        print("%-34s %5.2fx %8.2f %8.2f %7.2fx  %s" % (
            "%s %d -> %d KiB" % (op, low >> 10, high >> 10), ratio,
            v["best_from_gbps"], v["best_to_gbps"], v["ratio"],
            " ".join("%.2f" % r for r in v["ratios"])))
        report.append(dict(v, op=op, **{"from": low, "to": high},
                           bench_ratio=ratio))
    return report


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
    p.add_argument("--what", choices=("all", "cases", "steps"),
                   default="all")
    p.add_argument("--tebench_arg", action="append", default=[])
    args = p.parse_args()
    if args.rounds < 1:
        sys.exit("bench_recheck: --rounds must be at least 1, got %d" %
                 args.rounds)
    for extra in args.tebench_arg:
        if not extra.startswith("--"):
            sys.exit("bench_recheck: --tebench_arg=%s is not a tebench "
                     "flag (--name=value)" % extra)
    try:
        with open(args.results) as f:
            results = json.load(f)
    except (OSError, ValueError) as e:
        sys.exit("bench_recheck: cannot read --results=%s: %s" %
                 (args.results, e))
    if not isinstance(results, dict) or not (
            "cases" in results or
            ("tebench" in results and "goals" in results)):
        sys.exit("bench_recheck: --results=%s is neither bench.sh's "
                 "results.json nor a recheck's output" % args.results)
    # A recheck's own output measures again what it left under the limit.
    if "cases" in results:
        cases, steps = still_missing(results), steps_still_falling(results)
        what = "still under"
    else:
        cases = misses(results["tebench"], args.limit)
        steps = falling_steps(results["goals"])
        what = "under"
    if args.what == "steps":
        cases = []
    if args.what == "cases":
        steps = []
    host = {"name": platform.node(), "cpus": os.cpu_count()}
    print("bench_recheck: %s: %d case(s) and %d tcp step(s) %s %.2fx; "
          "measuring on %s (%d cores)" %
          (args.results, len(cases), len(steps), what, args.limit,
           host["name"], host["cpus"]))
    for case, ratio in cases:
        print("  %-34s %.2fx" % (describe(case), ratio))
    for op, low, high, ratio in steps:
        print("  tcp %s %d -> %d KiB%s %.2fx" % (
            op, low >> 10, high >> 10, " " * 14, ratio))
    if args.list or not (cases or steps):
        return
    if os.path.abspath(args.out) == os.path.abspath(args.results):
        sys.exit("bench_recheck: --out=%s would overwrite the --results it "
                 "reads; name another file" % args.out)
    start = time.time()
    case_report = measure_cases(args, cases, start) if cases else []
    step_report = measure_steps(args, steps, start) if steps else []
    held = sum(c["holds"] for c in case_report)
    steps_held = sum(s["holds"] for s in step_report)
    print("\nrecheck: %d of %d case(s) and %d of %d tcp step(s) under "
          "%.2fx before reach it at the median of %d round(s) (%.0f s)" %
          (held, len(cases), steps_held, len(steps), args.limit,
           args.rounds, time.time() - start))
    with open(args.out, "w") as f:
        json.dump({"results": args.results, "host": host,
                   "rounds": args.rounds,
                   "limit": args.limit, "duration_s": float(args.duration),
                   "warmup_s": float(args.warmup),
                   "tebench_args": args.tebench_arg, "held": held,
                   "steps_held": steps_held, "cases": case_report,
                   "steps": step_report}, f, indent=1)


if __name__ == "__main__":
    main()
