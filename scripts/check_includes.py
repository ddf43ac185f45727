#!/usr/bin/env python3
"""Checks that no two units of the tree include each other.

A unit is a header and its .cpp (src/x/y.h and src/x/y.cpp; a public header
include/tent/x/y.h belongs to the unit src/x/y). Unit A includes unit B
when any file of A has #include "..." naming a file of B. A pair where A
includes B and B includes A is a cycle: one of them should declare what it
needs, or the two are one unit. Each cycle is one line; the exit status is
1 when there is any. --self-test builds a scratch tree with one cycle (split
over a header and the other unit's .cpp) and fails unless it is reported.
"""

import argparse
import os
import re
import sys
import tempfile

ROOTS = ["src", "include", "softmpcomm", "python", "benchmark", "tests"]
INCLUDE_DIRS = ["src", "include", "softmpcomm/include", "softmpcomm/src", "."]
SUFFIXES = (".h", ".hpp", ".cpp", ".cc")
INCLUDE_RE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def unit_of(path):
    stem = os.path.splitext(path)[0]
    if stem.startswith("include/tent/"):
        stem = "src/" + stem[len("include/tent/"):]
    return stem


def resolve(root, name, including):
    for base in [os.path.dirname(including)] + INCLUDE_DIRS:
        candidate = os.path.normpath(os.path.join(base, name))
        if os.path.isfile(os.path.join(root, candidate)):
            return candidate
    return None


def cycles(root):
    edges = {}
    for top in ROOTS:
        for folder, _, names in os.walk(os.path.join(root, top)):
            for name in names:
                if not name.endswith(SUFFIXES):
                    continue
                path = os.path.relpath(os.path.join(folder, name), root)
                with open(os.path.join(root, path), errors="replace") as f:
                    text = f.read()
                for included in INCLUDE_RE.findall(text):
                    target = resolve(root, included, path)
                    if target and unit_of(target) != unit_of(path):
                        edges.setdefault(unit_of(path), set()).add(
                            unit_of(target))
    found = set()
    for a, targets in edges.items():
        for b in targets:
            if a in edges.get(b, ()):
                found.add(tuple(sorted((a, b))))
    return sorted(found)


def self_test():
    with tempfile.TemporaryDirectory() as root:
        files = {
            "src/a/one.h": '#include "a/two.h"\n',
            "src/a/two.h": "struct Two {};\n",
            "src/a/two.cpp": '#include "a/two.h"\n#include "a/one.h"\n',
            "src/a/three.cpp": '#include "a/two.h"\n',
        }
        for path, text in files.items():
            os.makedirs(os.path.dirname(os.path.join(root, path)),
                        exist_ok=True)
            with open(os.path.join(root, path), "w") as f:
                f.write(text)
        got = cycles(root)
        if got != [("src/a/one", "src/a/two")]:
            print("self-test: expected one cycle src/a/one <-> src/a/two, "
                  "got %r" % (got,))
            return 1
    print("self-test: the planted cycle was reported")
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default=os.path.join(
        os.path.dirname(os.path.abspath(__file__)), ".."))
    parser.add_argument("--self-test", action="store_true")
    args = parser.parse_args()
    if args.self_test:
        return self_test()
    found = cycles(os.path.abspath(args.root))
    for a, b in found:
        print("%s <-> %s: each includes the other" % (a, b))
    print("%d include cycles between units" % len(found))
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
