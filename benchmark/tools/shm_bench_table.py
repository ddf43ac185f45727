#!/usr/bin/env python3
"""The shm rows of scripts/bench.sh: tebench over shm beside a plain memcpy
of the same block size, measured in the same run over the same working set.

  shm_bench_table.py <raw dir> <out json>

Reads <raw>/tebench_shm_<op>.json (tebench --json_out) and
<raw>/memcpy_shm.txt (tent_memcpy_bw lines "memcpy <block> <GB/s>"), prints
one table per op with the ratio shm/memcpy, and writes the rows to <out
json>. The goal it names (docs/shm.md): at least 0.8x memcpy from 1 MiB
blocks up.
"""
import json
import os
import sys

GOAL_FROM = 1 << 20
GOAL_RATIO = 0.8


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: shm_bench_table.py <raw dir> <out json>")
    raw, out_path = sys.argv[1], sys.argv[2]
    memcpy = {}
    with open(os.path.join(raw, "memcpy_shm.txt")) as f:
        for line in f:
            parts = line.split()
            if len(parts) == 3 and parts[0] == "memcpy":
                memcpy[int(parts[1])] = float(parts[2])
    rows = []
    for op in ("write", "read"):
        path = os.path.join(raw, "tebench_shm_%s.json" % op)
        with open(path) as f:
            data = json.load(f)
        if not data.get("ok"):
            sys.exit("shm_bench_table: %s reports a failed run" % path)
        print("shm %s (batch 1, 1 thread) beside memcpy:" % op)
        print("  %12s %10s %12s %8s" % ("block (B)", "shm GB/s", "memcpy GB/s",
                                        "shm/mcp"))
        for r in data["rows"]:
            block, bw = r["block_size"], r["bw_gbps"]
            ref = memcpy.get(block)
            ratio = bw / ref if ref else None
            rows.append({"op": op, "block_size": block, "shm_gbps": bw,
                         "memcpy_gbps": ref, "ratio": ratio})
            print("  %12d %10.3f %12s %8s" % (
                block, bw, "%.3f" % ref if ref else "-",
                "%.2f" % ratio if ratio is not None else "-"))
    goal = [r for r in rows if r["block_size"] >= GOAL_FROM and r["ratio"]]
    if goal:
        worst = min(goal, key=lambda r: r["ratio"])
        print("goal shm >= %.1fx memcpy from 1 MiB: worst %.2f (%s, %d B): %s"
              % (GOAL_RATIO, worst["ratio"], worst["op"], worst["block_size"],
                 "met" if worst["ratio"] >= GOAL_RATIO else "NOT met"))
    with open(out_path, "w") as f:
        json.dump({"rows": rows, "goal_ratio": GOAL_RATIO,
                   "goal_from_block": GOAL_FROM}, f, indent=2)


if __name__ == "__main__":
    main()
