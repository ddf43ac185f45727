#!/usr/bin/env python3
"""Merges the raw outputs of scripts/bench.sh into one table, results.json
and a PNG plot of GB/s against block size.

usage: bench_report.py --raw=DIR --out=DIR --mode=quick|full
                       --duration=S [--warmup=S] --seconds=N

Reads, from --raw: tebench_<xport>_<op>_b<first>-<last>[_s<block>[_r<n>]].json
(tebench --json_out; full mode runs each block size apart, in rounds, and a
row is the round with the median bandwidth), memcpy.txt
(tent_memcpy_bw), iperf3_P<n>.json (iperf3 -J), ucx_<test>_<size>.txt (ucx_perftest) or
ucx_skipped.txt, overhead.json and provider_overhead.json (Google
Benchmark). Writes --out/results.json, --out/table.txt,
--out/gbps_vs_block.png (through gnuplot) and the data it plots.
"""
import argparse
import glob
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import time

SERIES = [("mpcomm", "read"), ("mpcomm", "write"), ("tcp", "read"),
          ("tcp", "write")]


def load_tebench(raw):
    """The rows of every tebench run, and per series and batch range the
    first transfer's latency: the run's own, or the median over the runs
    of one block size each."""
    rows, firsts = [], {}
    for path in sorted(glob.glob(os.path.join(raw, "tebench_*.json"))):
        with open(path) as f:
            report = json.load(f)
        if not report.get("ok", False):
            sys.exit("bench_report: %s records a failed run: %s" %
                     (path, report.get("error")))
        run = report["run"]
        name = re.search(r"_b(\d+-\d+)(_s\d+)?(_r(\d+))?\.json$", path)
        key = "%s/%s/batch %s" % (run["transport"], run["op"],
                                  name.group(1) if name else "?")
        firsts.setdefault(key, []).append(report["first_transfer_us"])
        tag = int(name.group(4)) if name and name.group(4) else 1
        rows += [dict(r, round=tag) for r in report["rows"]]
    first = {k: statistics.median(v) for k, v in firsts.items()}
    return rows, first


def case_key(r):
    return (r["transport"], r["op"], r["block_size"], r["batch_size"],
            r["threads"])


def merge_rounds(rows):
    """One row per case: where full mode measured a case in several rounds,
    the round with the median bandwidth (the lower of the two middle ones
    for an even count), so every column of a row comes from one real
    measurement; `bw_gbps_rounds` keeps each round's figure."""
    cases = {}
    for r in rows:
        cases.setdefault(case_key(r), []).append(r)
    merged = []
    for key in sorted(cases):
        runs = sorted(cases[key], key=lambda r: r["round"])
        pick = statistics.median_low([r["bw_gbps"] for r in runs])
        row = dict(next(r for r in runs if r["bw_gbps"] == pick))
        row.pop("round")
        row["rounds"] = len(runs)
        row["bw_gbps_rounds"] = [r["bw_gbps"] for r in runs]
        merged.append(row)
    return merged


def round_agreement(rows):
    """How far a transport agrees with itself: per series, each case's
    round 2 over its round 1 (256 KiB..64 MiB), from merge_rounds()'s
    rows. A per-row goal of 0.9x between two transports cannot be read
    closer than one transport meets it against itself in the same run."""
    out = []
    for xport, op in SERIES:
        values = [r["bw_gbps_rounds"][1] / r["bw_gbps_rounds"][0]
                  for r in rows
                  if (r["transport"], r["op"]) == (xport, op) and
                  GOAL_MIN_BLOCK <= r["block_size"] <= GOAL_MAX_BLOCK and
                  len(r["bw_gbps_rounds"]) > 1 and r["bw_gbps_rounds"][0]]
        if values:
            out.append({"series": "%s %s" % (xport, op),
                        "round2_over_round1": summarize(values),
                        "rows_at_least_0.9": sum(v >= 0.9 for v in values)})
    return out


def load_memcpy(raw):
    out = {}
    with open(os.path.join(raw, "memcpy.txt")) as f:
        for line in f:
            parts = line.split()
            if len(parts) == 3 and parts[0] == "memcpy":
                out[int(parts[1])] = float(parts[2])
    return out


def load_iperf3(raw):
    out = {}
    for streams in (1, 2):
        with open(os.path.join(raw, "iperf3_P%d.json" % streams)) as f:
            report = json.load(f)
        out[streams] = report["end"]["sum_received"]["bits_per_second"] / 8e9
    return out


def load_ucx(raw):
    """{(test, size): GB/s} from ucx_perftest's 'Final:' line, or a note."""
    skipped = os.path.join(raw, "ucx_skipped.txt")
    if os.path.exists(skipped):
        with open(skipped) as f:
            return {}, f.read().strip()
    out = {}
    for path in glob.glob(os.path.join(raw, "ucx_ucp_*.txt")):
        m = re.match(r"ucx_(ucp_\w+?)_(\d+)\.txt$", os.path.basename(path))
        with open(path) as f:
            final = [l for l in f if l.startswith("Final:")]
        if m and final:
            # Final: iters, overhead p50/avg/overall (us), bandwidth
            # avg/overall (MB/s = 2^20 B/s), message rate avg/overall.
            mbps = float(final[-1].split()[6])
            out[(m.group(1), int(m.group(2)))] = mbps * (1 << 20) / 1e9
    return out, "" if out else "ucx_perftest printed no result"


def load_overhead(raw):
    with open(os.path.join(raw, "overhead.json")) as f:
        report = json.load(f)
    # With repetitions, each case's median; a run of one repetition has
    # no aggregates, and then its iteration is the figure.
    medians = [b for b in report["benchmarks"]
               if b.get("run_type") == "aggregate" and
               b.get("aggregate_name") == "median"]
    out = []
    # Interleaved repetitions come out in random order; the table keeps
    # the benchmark's own.
    rows = sorted(medians or report["benchmarks"],
                  key=lambda b: (b.get("family_index", 0),
                                 b.get("per_family_instance_index", 0)))
    for b in rows:
        if not medians and b.get("run_type") != "iteration":
            continue
        if b.get("error_occurred"):
            continue
        args = dict(re.findall(r"(\w+):(\d+)", b["run_name"]))
        scale = {"ns": 1, "us": 1e3, "ms": 1e6, "s": 1e9}[b["time_unit"]]
        # An iteration is a batch; per_request (seconds, CPU) divides it by
        # the batch size. Cases without it time one operation.
        per_request = b.get("per_request")
        ns = (per_request * 1e9 if per_request is not None
              else b["cpu_time"] * scale)
        out.append({"name": b["run_name"].split("/")[0],
                    "buffers": int(args.get("buffers", 0)),
                    "peers": int(args.get("peers", 0)),
                    "batch": int(args.get("batch", 1)),
                    "ns_per_request": ns})
    return out


def load_provider(raw):
    """tent_provider_overhead's cases: the medians over the repetitions of
    the direct and transport wall ns per request and of their ratio (each
    repetition pairs the two; the ratio's median is not the ratio of the
    medians)."""
    with open(os.path.join(raw, "provider_overhead.json")) as f:
        report = json.load(f)
    out = []
    for b in report["benchmarks"]:
        if b.get("error_occurred") or b.get("aggregate_name") != "median":
            continue
        args = dict(re.findall(r"(\w+):(\d+)", b["run_name"]))
        out.append({"op": "read" if args.get("op") == "1" else "write",
                    "bytes": int(args["bytes"]), "batch": int(args["batch"]),
                    "direct_ns": b["direct_ns"],
                    "transport_ns": b["transport_ns"],
                    "transport_over_direct": b["transport_over_direct"]})
    return sorted(out, key=lambda o: (o["op"] == "read", o["bytes"],
                                      o["batch"]))


def ratio(value, ref):
    return value / ref if ref and value is not None else None


def fmt(v, width=7, digits=2):
    return ("%*.*f" % (width, digits, v)) if v is not None else "%*s" % (
        width, "-")


def build(rows, memcpy, iperf3, ucx):
    """One entry per (block, batch, threads): every series side by side."""
    table = {}
    for r in rows:
        key = (r["block_size"], r["batch_size"], r["threads"])
        r["ratio_iperf3"] = ratio(r["bw_gbps"], iperf3.get(r["threads"]))
        r["ratio_memcpy"] = ratio(r["bw_gbps"], memcpy.get(r["block_size"]))
        table.setdefault(key, {})[(r["transport"], r["op"])] = r
    lines = []
    head = "%9s %5s %3s" % ("block", "batch", "thr")
    for xport, op in SERIES:
        name = "%s %s" % (xport, op)
        head += " | %-21s" % name
    head += " | %7s %7s | %7s %7s" % ("ucx put", "ucx get", "memcpy",
                                        "iperf3")
    sub = "%9s %5s %3s" % ("(bytes)", "", "")
    sub += " | %7s %6s %6s" % ("GB/s", "/ip3", "/mcp") * len(SERIES)
    sub += " | %7s %7s | %7s %7s" % ("GB/s", "GB/s", "GB/s", "GB/s")
    lines += [head, sub, "-" * len(sub)]
    for key in sorted(table):
        block, batch, threads = key
        line = "%9d %5d %3d" % key
        for series in SERIES:
            r = table[key].get(series)
            if r is None:
                line += " | %7s %6s %6s" % ("-", "-", "-")
            else:
                line += " | %s %s %s" % (fmt(r["bw_gbps"], 7, 3),
                                          fmt(r["ratio_iperf3"], 6),
                                          fmt(r["ratio_memcpy"], 6))
        line += " | %s %s | %s %s" % (
            fmt(ucx.get(("ucp_put_bw", block)), 7, 3),
            fmt(ucx.get(("ucp_get", block)), 7, 3),
            fmt(memcpy.get(block), 7, 3), fmt(iperf3.get(threads), 7, 3))
        lines.append(line)
    return lines


GOAL_MIN_BLOCK = 256 << 10
GOAL_MAX_BLOCK = 64 << 20


def summarize(values):
    """How many ratios one goal has, their median and their minimum."""
    if not values:
        return {"rows": 0}
    return {"rows": len(values), "median": statistics.median(values),
            "min": min(values)}


def best_by_block(rows):
    """{(transport, op, block): best GB/s over batch and threads}."""
    best = {}
    for r in rows:
        key = (r["transport"], r["op"], r["block_size"])
        best[key] = max(best.get(key, 0.0), r["bw_gbps"])
    return best


def goal_cases(rows):
    """The rows in the goals' block range (256 KiB..64 MiB) by case:
    {(op, block, batch, threads): {transport: GB/s}}."""
    cases = {}
    for r in rows:
        if GOAL_MIN_BLOCK <= r["block_size"] <= GOAL_MAX_BLOCK:
            case = (r["op"], r["block_size"], r["batch_size"], r["threads"])
            cases.setdefault(case, {})[r["transport"]] = r["bw_gbps"]
    return cases


def bandwidth_goals(rows, iperf3):
    """The bandwidth goals over 256 KiB..64 MiB, per op: mpcomm against tcp
    case by case, mpcomm against iperf3 with two streams, and no tcp step
    from one block size to the next falling more than 10 %. Each ratio goal
    is counted per row and per block size's best row (the plot's view)."""
    cases = goal_cases(rows)
    ip2 = iperf3.get(2)
    best_all = best_by_block(
        [r for r in rows
         if GOAL_MIN_BLOCK <= r["block_size"] <= GOAL_MAX_BLOCK])
    out = []
    for op in ("read", "write"):
        per_row_tcp, per_row_ip3 = [], []
        for (case_op, _, _, _), bw in cases.items():
            if case_op != op:
                continue
            mp, tcp = bw.get("mpcomm"), bw.get("tcp")
            if mp is not None and tcp:
                per_row_tcp.append(mp / tcp)
            if mp is not None and ip2:
                per_row_ip3.append(mp / ip2)
        best = {(x, b): v for (x, o, b), v in best_all.items() if o == op}
        blocks = sorted({b for (_, b) in best})
        best_tcp = [best[("mpcomm", b)] / best[("tcp", b)] for b in blocks
                    if ("mpcomm", b) in best and best.get(("tcp", b))]
        best_ip3 = [best[("mpcomm", b)] / ip2 for b in blocks
                    if ("mpcomm", b) in best and ip2]
        tcp_best = [best[("tcp", b)] for b in blocks if ("tcp", b) in best]
        steps = [(blocks[i], blocks[i + 1], tcp_best[i + 1] / tcp_best[i])
                 for i in range(len(tcp_best) - 1) if tcp_best[i]]
        for name, limit, rows_v, best_v in (
                ("mpcomm/tcp, same case", 0.9, per_row_tcp, best_tcp),
                ("mpcomm/iperf3 2-stream", 0.8, per_row_ip3, best_ip3)):
            out.append({"goal": name, "op": op, "limit": limit,
                        "per_row": summarize(rows_v),
                        "per_row_met": sum(v >= limit for v in rows_v),
                        "best_per_size": summarize(best_v),
                        "best_per_size_met": sum(v >= limit
                                                 for v in best_v)})
        falls = [s for s in steps if s[2] < 0.9]
        out.append({"goal": "tcp: no step falls > 10 %", "op": op,
                    "limit": 0.9, "steps": len(steps),
                    "steps_falling": [{"from": a, "to": b, "ratio": r}
                                      for a, b, r in falls]})
    return out


def overhead_goals(overhead):
    """The ratios between tent_transport_overhead's rows that its goals
    compare: 1024 buffers and 64 peers against one, the transport against
    the adapter calls alone, the engine against the transport."""
    rows = {(o["name"], o["buffers"], o["peers"], o["batch"]):
            o["ns_per_request"] for o in overhead}
    out = []
    for batch in sorted({k[3] for k in rows if k[0] == "BM_TransportWrite"}):
        t = lambda b, p: rows.get(("BM_TransportWrite", b, p, batch))
        e = lambda b, p: rows.get(("BM_EngineWrite", b, p, batch))
        a = lambda p: rows.get(("BM_AdapterDirect", 0, p, batch))
        one = lambda p: rows.get(("BM_TransportWriteOneTarget", 1, p, batch))
        base = t(1, 1)
        if not base:
            continue
        out.append({"batch": batch,
                    "buffers_1024_over_1": ratio(t(1024, 1), base),
                    "peers_64_over_1": ratio(t(1, 64), base),
                    "peers_64_over_1_one_target": ratio(one(64), one(1)),
                    "transport_over_adapter": ratio(base, a(1)),
                    "engine_over_transport": ratio(e(1, 1), base)})
    return out


def goal_lines(bw, ovh, provider, agreement):
    lines = ["Goals (256 KiB..64 MiB; per row, and each block size's best "
             "row):"]
    for g in bw:
        if "steps" in g:
            falls = ", ".join(
                "%s->%s %.2fx" % (size(f["from"]), size(f["to"]), f["ratio"])
                for f in g["steps_falling"]) or "none"
            lines.append("  %-26s %-5s %d of %d steps fall (%s)" % (
                g["goal"], g["op"], len(g["steps_falling"]), g["steps"],
                falls))
            continue
        pr, bp = g["per_row"], g["best_per_size"]
        if not pr["rows"]:
            continue
        lines.append(
            "  %-26s %-5s >= %.1fx: rows %d/%d (median %.2fx, min %.2fx); "
            "sizes %d/%d (median %.2fx, min %.2fx)" %
            (g["goal"], g["op"], g["limit"], g["per_row_met"], pr["rows"],
             pr["median"], pr["min"], g["best_per_size_met"], bp["rows"],
             bp.get("median", 0), bp.get("min", 0)))
    for a in agreement:
        g = a["round2_over_round1"]
        lines.append(
            "  round 2 / round 1, same %-12s >= 0.9x: rows %d/%d "
            "(median %.2fx, min %.2fx)" % (a["series"],
             a["rows_at_least_0.9"], g["rows"], g["median"], g["min"]))
    for o in ovh:
        lines.append(
            "  overhead batch %-3d 1024/1 buffers %s, 64/1 peers %s "
            "(one target %s), transport/adapter %s, engine/transport %s" %
            (o["batch"], fmt(o["buffers_1024_over_1"], 4),
             fmt(o["peers_64_over_1"], 4),
             fmt(o["peers_64_over_1_one_target"], 4),
             fmt(o["transport_over_adapter"], 5),
             fmt(o["engine_over_transport"], 4)))
    if provider:
        lines.append("  over softmpcomm, transport/direct: " + ", ".join(
            "%s %s b%d %s" % (p["op"], size(p["bytes"]), p["batch"],
                              fmt(p["transport_over_direct"], 4))
            for p in provider))
    return lines


def size(n):
    return "%dM" % (n >> 20) if n >= 1 << 20 else "%dK" % (n >> 10)


def plot(out_dir, rows, memcpy, iperf3, ucx):
    """Best GB/s over batch and threads per block size, one line a series."""
    data = os.path.join(out_dir, "gbps_vs_block.dat")
    blocks = sorted({r["block_size"] for r in rows} | set(memcpy))
    best = best_by_block(rows)
    columns = ["%s_%s" % s for s in SERIES] + ["ucx_put", "ucx_get", "memcpy"]
    with open(data, "w") as f:
        f.write("# block_size " + " ".join(columns) + "  (GB/s; best over "
                "batch and threads for tebench; NaN = not measured)\n")
        for block in blocks:
            vals = [best.get((xport, op, block)) for xport, op in SERIES]
            vals += [ucx.get(("ucp_put_bw", block)),
                     ucx.get(("ucp_get", block)), memcpy.get(block)]
            f.write("%d %s\n" % (block, " ".join(
                "NaN" if v is None else "%.4f" % v for v in vals)))
    png = os.path.join(out_dir, "gbps_vs_block.png")
    titles = ["tebench mpcomm read", "tebench mpcomm write",
              "tebench tcp read", "tebench tcp write", "ucx_perftest put (tcp)",
              "ucx_perftest get (tcp)", "memcpy"]
    plots = ['"%s" using ($1/1024):%d with linespoints title "%s"' %
             (data, i + 2, t) for i, t in enumerate(titles)]
    for streams, gbps in sorted(iperf3.items()):
        plots.append('%f with lines dashtype 2 title "iperf3 loopback, %d '
                     'stream(s)"' % (gbps, streams))
    script = "\n".join([
        "set terminal pngcairo size 1100,700 noenhanced",
        'set output "%s"' % png,
        'set title "GB/s against block size on %s (%d cores)"' %
        (platform.node(), os.cpu_count()),
        "set logscale x 2",
        'set xlabel "block size (KiB)"',
        'set ylabel "GB/s (1e9 B/s)"',
        "set key outside right",
        "set grid",
        "set yrange [0:*]",
        "plot " + ", \\\n     ".join(plots),
    ]) + "\n"
    with open(os.path.join(out_dir, "gbps_vs_block.gp"), "w") as f:
        f.write(script)
    subprocess.run(["gnuplot"], input=script, text=True, check=True)
    return png


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--raw", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--mode", required=True)
    ap.add_argument("--duration", type=float, required=True)
    ap.add_argument("--warmup", type=float, default=0.0)
    ap.add_argument("--tebench_args", default="")
    ap.add_argument("--seconds", type=int, required=True)
    args = ap.parse_args()

    measured, first = load_tebench(args.raw)
    rows = merge_rounds(measured)
    rounds = max(r["rounds"] for r in rows) if rows else 0
    agreement = round_agreement(rows)
    memcpy = load_memcpy(args.raw)
    iperf3 = load_iperf3(args.raw)
    ucx, ucx_note = load_ucx(args.raw)
    overhead = load_overhead(args.raw)
    provider = load_provider(args.raw)

    lines = build(rows, memcpy, iperf3, ucx)
    lines.append("")
    lines.append("/ip3: ratio to iperf3 loopback with as many streams as "
                 "threads; /mcp: ratio to memcpy of the block size.")
    if rounds > 1:
        lines.append("Each tebench figure is the median of %d rounds, "
                     "measured minutes apart (bench/results.json keeps each "
                     "round's GB/s)." % rounds)
    lines.append("First transfer of each tebench run (us, connection setup "
                 "included; the median over a series' runs where each block "
                 "size ran apart): " + ", ".join("%s %.0f" % kv
                                           for kv in sorted(first.items())))
    if ucx_note:
        lines.append("UCX: " + ucx_note)
    lines.append("")
    lines.append("tent_transport_overhead (CPU ns per request):")
    for o in overhead:
        lines.append("  %-20s buffers=%-5s peers=%-3s batch=%-3d %12.1f" % (
            o["name"], o["buffers"] or "-", o["peers"] or "-", o["batch"],
            o["ns_per_request"]))
    lines.append("tent_provider_overhead (wall us per request over "
                 "softmpcomm, medians of paired repetitions):")
    for p in provider:
        lines.append("  %-5s %-4s batch=%-3d direct %8.2f transport %8.2f "
                     "ratio %.3f" % (p["op"], size(p["bytes"]), p["batch"],
                                     p["direct_ns"] / 1e3,
                                     p["transport_ns"] / 1e3,
                                     p["transport_over_direct"]))
    bw_goals = bandwidth_goals(rows, iperf3)
    ovh_goals = overhead_goals(overhead)
    lines.append("")
    lines += goal_lines(bw_goals, ovh_goals, provider, agreement)
    png = plot(args.out, rows, memcpy, iperf3, ucx)
    lines.append("")
    lines.append("plot: %s" % png)
    text = "\n".join(lines) + "\n"
    with open(os.path.join(args.out, "table.txt"), "w") as f:
        f.write(text)
    sys.stdout.write(text)

    results = {
        "mode": args.mode,
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "host": {"name": platform.node(), "cpus": os.cpu_count(),
                 "kernel": platform.release()},
        "tebench_case_duration_s": args.duration,
        "tebench_case_warmup_s": args.warmup,
        "tebench_args": args.tebench_args.split(),
        "measurement_seconds": args.seconds,
        "tebench_rounds": rounds,
        "tebench": rows,
        "tebench_first_transfer_us": first,
        "memcpy": [{"block_size": b, "gbps": g}
                   for b, g in sorted(memcpy.items())],
        "iperf3": [{"streams": s, "write_size": 1 << 20, "gbps": g}
                   for s, g in sorted(iperf3.items())],
        "ucx": [{"test": t, "block_size": s, "gbps": g}
                for (t, s), g in sorted(ucx.items())],
        "ucx_note": ucx_note,
        "transport_overhead": overhead,
        "provider_overhead": provider,
        "goals": {"bandwidth": bw_goals, "overhead": ovh_goals,
                  "round_agreement": agreement},
        "plot": png,
    }
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump(results, f, indent=2)
        f.write("\n")


if __name__ == "__main__":
    main()
