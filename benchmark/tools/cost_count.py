#!/usr/bin/env python3
"""Instructions per request of tent_transport_overhead's cases, by callgrind.

Builds nothing: give it the build directory that holds
benchmark/tent_cost_count (or the benchmark folder, or the binary). Each
case runs once under valgrind's callgrind, which counts only the measured
requests (tent_cost_count toggles collection around them; setup, warm-up
and teardown are not counted), and the count is divided by the number of
requests. Only the thread that makes the requests is counted. With metrics
on, folding the events of its ring into the histograms is not counted
either: it runs on the metrics' drain thread, or on the requesting thread
when the drain thread has not kept up, which depends on how the host
schedules the two. Counts are exact for a given binary: they change with
the code, the compiler and its flags, not with the host's load.

  cost_count.py BUILD_DIR                 every case, one table
  cost_count.py BUILD_DIR --json OUT      ... and the figures as JSON
  cost_count.py BUILD_DIR --metrics       ... with the engine's metrics on
                                          (budget rows with "metrics": true
                                          always run with them on)
  cost_count.py BUILD_DIR --check BUDGET  the budget's cases only; exit 1
                                          when one grows past +tolerance
  cost_count.py BUILD_DIR --cases budget --json benchmark/cost_budget.json
                                          rewrite the budget from this build

Exit 77 (ctest's skip) when valgrind is not installed.
"""
import argparse
import concurrent.futures
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

SKIP = 77
DRIVER = "tent_cost_count"
# The budget: the transport at batch 1 and 64, over the worlds of 1 and
# 1024 buffers per peer and 1 and 64 peers; the engine at batch 1 and 64
# with 1 and 64 peers (1 buffer each: its 64 peer engines make each case
# the slowest under callgrind, and the buffer count is the transport's
# look-up, budgeted above).
# A case is (path, buffers, peers, batch, metrics on). The engine's cases
# are budgeted with metrics off and on (docs/metrics.md).
BUDGET_CASES = ([("transport", buffers, peers, batch, False)
                 for buffers in (1, 1024) for peers in (1, 64)
                 for batch in (1, 64)] +
                [("engine", 1, peers, batch, metrics)
                 for metrics in (False, True)
                 for peers in (1, 64) for batch in (1, 64)])
# tent_transport_overhead's cases, at 1 and 1024 buffers; the adapter has
# no buffers ("-" in the table).
ALL_CASES = ([("adapter", 0, peers, batch, False)
              for peers in (1, 64) for batch in (1, 64)] +
             [(path, buffers, peers, batch, False)
              for path in ("transport", "engine")
              for buffers in (1, 1024) for peers in (1, 64)
              for batch in (1, 64)])
DEFAULT_TOLERANCE = 0.10


def find_driver(where):
    candidates = [where, os.path.join(where, DRIVER),
                  os.path.join(where, "benchmark", DRIVER)]
    for path in candidates:
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    sys.exit(f"cost_count: no {DRIVER} under '{where}' (build the target "
             f"{DRIVER}; it needs valgrind/callgrind.h and no sanitizer)")


def describe_build(driver):
    """'<build type>, <compiler> <version>' from the CMake cache above the
    driver, or "unknown" when there is none."""
    folder = os.path.dirname(os.path.abspath(driver))
    while True:
        cache = os.path.join(folder, "CMakeCache.txt")
        if os.path.isfile(cache):
            break
        parent = os.path.dirname(folder)
        if parent == folder:
            return "unknown"
        folder = parent
    with open(cache) as f:
        text = f.read()
    build_type = re.search(r"^CMAKE_BUILD_TYPE:\w+=(.*)$", text, re.M)
    compiler = "unknown compiler"
    for name in sorted(os.listdir(os.path.join(folder, "CMakeFiles"))):
        info = os.path.join(folder, "CMakeFiles", name, "CMakeCXXCompiler.cmake")
        if os.path.isfile(info):
            with open(info) as f:
                found = dict(re.findall(
                    r'^set\(CMAKE_CXX_COMPILER_(ID|VERSION) "([^"]*)"\)',
                    f.read(), re.M))
            compiler = f"{found.get('ID', '?')} {found.get('VERSION', '?')}"
    return f"{(build_type.group(1) if build_type else '') or 'no build type'}, {compiler}"


def case_key(case):
    path, buffers, peers, batch, metrics = case
    return (f"{path}/buffers:{buffers or '-'}/peers:{peers}/batch:{batch}"
            + ("/metrics" if metrics else ""))


# --metrics: the engine records and serves metrics (docs/metrics.md) on a
# free loopback port; without it they are off whatever the caller's
# environment says, so the figures stay comparable.
METRICS_ON = {"TENT_METRICS_ENABLED": "1", "TENT_METRICS_HTTP_HOST": "127.0.0.1",
              "TENT_METRICS_HTTP_PORT": "0", "TENT_METRICS_REPORT_INTERVAL": "0"}
METRICS_OFF = {"TENT_METRICS_ENABLED": "0"}


def count(driver, case, requests, tmp):
    """Instructions per request of one case, as a float."""
    path, buffers, peers, batch, metrics = case
    out = os.path.join(tmp, case_key(case).replace("/", "_") + ".out")
    # Each peer engine of the 64-peer cases runs its listeners' thread
    # pools: more threads than valgrind's default 500.
    # Collection is per thread and starts off on every thread:
    # tent_cost_count turns it on for the requesting (main) thread only,
    # whose counts callgrind writes to `out`-01. A ring fold toggles it
    # off on that thread (and on on the drain thread, whose file is not
    # read).
    command = [os.environ.get("VALGRIND", "valgrind"), "--tool=callgrind",
               "--max-threads=4000",
               "--instr-atstart=no", "--collect-atstart=no",
               "--separate-threads=yes",
               "--toggle-collect=*ThreadSlots::Block::drainLocked*",
               f"--callgrind-out-file={out}", driver, f"--path={path}",
               f"--buffers={max(buffers, 1)}", f"--peers={peers}",
               f"--batch={batch}", f"--requests={requests}"]
    run = subprocess.run(command, capture_output=True, text=True,
                         timeout=600,
                         env={**os.environ,
                              **(METRICS_ON if metrics else METRICS_OFF)})
    if run.returncode != 0:
        raise RuntimeError(f"{case_key(case)}: exit {run.returncode}:\n"
                           f"{run.stderr[-2000:]}")
    counted = re.search(r"^requests (\d+)$", run.stdout, re.M)
    with open(out + "-01") as f:
        total = re.search(r"^totals: (\d+)", f.read(), re.M)
    if not counted or not total:
        raise RuntimeError(f"{case_key(case)}: no request count or total "
                           f"in the output:\n{run.stdout}{run.stderr[-2000:]}")
    return int(total.group(1)) / int(counted.group(1))


def measure(driver, cases, requests, jobs):
    with tempfile.TemporaryDirectory(prefix="cost_count.") as tmp:
        with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
            futures = [pool.submit(count, driver, c, requests, tmp)
                       for c in cases]
            return [f.result() for f in futures]


def table(rows, budget=None):
    header = ["case", "batch", "buffers", "peers", "instructions/request"]
    if budget is not None:
        header += ["budget", "change"]
    lines = [header]
    for case, ir in rows:
        path, buffers, peers, batch, metrics = case
        line = [path + ("+metrics" if metrics else ""), str(batch), str(buffers or "-"), str(peers),
                f"{ir:.0f}"]
        if budget is not None:
            limit = budget.get(case_key(case))
            line += [f"{limit:.0f}", f"{(ir / limit - 1) * 100:+.1f}%"]
        lines.append(line)
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    return "\n".join("  ".join(cell.rjust(w) if i else cell.ljust(w)
                               for i, (cell, w) in enumerate(zip(line, widths)))
                     for line in lines)


def as_json(rows, tolerance, build):
    return {
        "what": "instructions per request under callgrind "
                "(benchmark/tools/cost_count.py); they depend on the compiler and "
                "its flags: compare counts of the same build only",
        "build": build,
        "tolerance": tolerance,
        "cases": [{"case": c[0], "buffers": c[1], "peers": c[2],
                   "batch": c[3], **({"metrics": True} if c[4] else {}),
                   "instructions_per_request": round(ir)}
                  for c, ir in rows],
    }


def load_budget(path):
    """{case key: (case, instructions per request)}, the tolerance and the
    build the budget was taken from; exits naming the file when it is not
    a budget."""
    try:
        with open(path) as f:
            data = json.load(f)
        budget = {}
        for entry in data["cases"]:
            case = (entry["case"], entry["buffers"], entry["peers"],
                    entry["batch"], bool(entry.get("metrics", False)))
            limit = float(entry["instructions_per_request"])
            if limit <= 0:
                raise ValueError(f"{case_key(case)} has a budget of {limit}")
            budget[case_key(case)] = (case, limit)
        if not budget:
            raise ValueError("no cases")
        return (budget, float(data.get("tolerance", DEFAULT_TOLERANCE)),
                data.get("build", "unknown"))
    except (OSError, ValueError, KeyError, TypeError) as e:
        sys.exit(f"cost_count: {path} is not a budget: "
                 f"{type(e).__name__}: {e}")


def positive(text):
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got '{text}'")
    return value


def main():
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("build", help="build dir, its benchmark/ or the "
                        f"{DRIVER} binary")
    parser.add_argument("--cases", choices=("all", "budget"), default="all",
                        help="every case (default), or the budget's")
    parser.add_argument("--check", metavar="BUDGET",
                        help="run the budget file's cases; fail past "
                        "its tolerance")
    parser.add_argument("--json", metavar="OUT", help="write the figures")
    parser.add_argument("--requests", type=positive, default=4096,
                        help="requests counted per case (default 4096)")
    parser.add_argument("--jobs", type=positive, default=os.cpu_count() or 1,
                        help="cases run at once (default: the cores)")
    parser.add_argument("--metrics", action="store_true",
                        help="run the engine with metrics enabled")
    args = parser.parse_args()

    if not shutil.which(os.environ.get("VALGRIND", "valgrind")):
        print("SKIPPED: valgrind is not installed; install it "
              "(scripts/install_deps.sh) to count instructions per request")
        return SKIP
    driver = find_driver(args.build)
    build = describe_build(driver)
    budget, tolerance = None, DEFAULT_TOLERANCE
    cases = ALL_CASES if args.cases == "all" else BUDGET_CASES
    if args.check:
        budget, tolerance, budget_build = load_budget(args.check)
        cases = [case for case, _ in budget.values()]
        if budget_build != build:
            print(f"note: the budget was taken from a {budget_build} build, "
                  f"this one is {build}: counts differ between compilers "
                  "and flags")
    if args.metrics and not args.check:
        cases = list(dict.fromkeys(c[:4] + (True,) for c in cases))
    try:
        figures = measure(driver, cases, args.requests, args.jobs)
    except (RuntimeError, subprocess.TimeoutExpired) as e:
        print(f"cost_count: {e}", file=sys.stderr)
        return 1
    rows = list(zip(cases, figures))
    limits = None if budget is None else {k: v for k, (_, v) in budget.items()}
    print(f"{DRIVER} ({build}): instructions per request, callgrind")
    print(table(rows, limits))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(as_json(rows, tolerance, build), f, indent=2)
            f.write("\n")
    if budget is None:
        return 0
    over = [(case, ir, limits[case_key(case)]) for case, ir in rows
            if ir > limits[case_key(case)] * (1 + tolerance)]
    for case, ir, limit in over:
        print(f"FAIL {case_key(case)}: measured {ir:.0f} instructions per "
              f"request, budget {limit:.0f} (+{tolerance:.0%} allowed, "
              f"{(ir / limit - 1) * 100:+.1f}%)")
    if over:
        print("If the growth is intended, rewrite the budget from this "
              "build: benchmark/tools/cost_count.py BUILD --cases budget --json "
              f"{args.check}")
        return 1
    print(f"every case within +{tolerance:.0%} of {args.check}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
