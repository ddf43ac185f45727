#!/usr/bin/env python3
"""Checks a mooncake-transfer-engine wheel for what auditwheel would vouch
for, on machines without auditwheel (Debian has none):

  - no libmpcomm inside: MPComm stays an external library, upgraded on its
    own (the guide's "Wheel Packaging" rule);
  - with MPComm, mooncake/engine*.so keeps its DT_NEEDED on libmpcomm.so.<N>,
    so importing without MPComm fails with the loader's message;
  - every RPATH/RUNPATH entry is $ORIGIN-relative and stays inside the wheel
    (nothing points into a build tree or an MPComm prefix);
  - every library an ELF file in the wheel needs is inside the wheel, is
    libmpcomm, or is a system library owned by a Debian package;
  - the wheel's Python tag matches the extensions' ABI suffix.

Prints the wheel's contents and the system libraries it relies on; exits 1
with one line per violated guarantee.

usage: wheel_check.py WHEEL (--mpcomm-soname libmpcomm.so.N | --no-mpcomm)
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile

SYSTEM_DIRS = ("/lib", "/lib64", "/usr/lib", "/usr/lib64")
MPCOMM_NEEDED = re.compile(r"^libmpcomm\.so\.\d+$")


def elf_id(path):
    """(class, machine) from the ELF header, or None for a non-ELF file."""
    with open(path, "rb") as f:
        head = f.read(20)
    if len(head) < 20 or head[:4] != b"\x7fELF":
        return None
    order = "little" if head[5] == 1 else "big"
    return head[4], int.from_bytes(head[18:20], order)


def dynamic(path):
    """NEEDED names and RPATH/RUNPATH entries, from readelf."""
    out = subprocess.run(["readelf", "-dW", path], check=True,
                         capture_output=True, text=True).stdout
    needed, paths = [], []
    for line in out.splitlines():
        m = re.search(r"\((NEEDED|RPATH|RUNPATH)\)\s+.*\[(.*)\]", line)
        if not m:
            continue
        if m.group(1) == "NEEDED":
            needed.append(m.group(2))
        else:
            paths.extend(e for e in m.group(2).split(":"))
    return needed, paths


def ldconfig_cache():
    """name -> [paths] from the dynamic linker's cache."""
    out = subprocess.run(["ldconfig", "-p"], capture_output=True,
                         text=True).stdout
    cache = {}
    for line in out.splitlines():
        m = re.match(r"\s*(\S+) \(.*\) => (\S+)$", line)
        if m:
            cache.setdefault(m.group(1), []).append(m.group(2))
    return cache


def debian_package(path):
    """The Debian package owning path ('' when none; None without dpkg)."""
    if shutil.which("dpkg-query") is None:
        return None
    candidates = [path, os.path.realpath(path)]
    # merged-/usr: dpkg records /usr/lib/... for files reached via /lib/...
    candidates += ["/usr" + p for p in list(candidates)
                   if not p.startswith("/usr/")]
    for p in candidates:
        r = subprocess.run(["dpkg-query", "-S", p], capture_output=True,
                           text=True)
        if r.returncode == 0 and r.stdout:
            return r.stdout.split(":")[0].strip()
    return ""


def system_library(name, ident, cache):
    """Path of a system library for name matching ident, or None."""
    for path in cache.get(name, []):
        in_system = any(path.startswith(d + "/") for d in SYSTEM_DIRS)
        if in_system and os.path.exists(path) and elf_id(path) == ident:
            return path
    return None


def check(wheel, mpcomm_soname):
    problems = []
    root = tempfile.mkdtemp(prefix="wheel_check.")
    try:
        with zipfile.ZipFile(wheel) as z:
            infos = z.infolist()
            z.extractall(root)
        print(f"wheel: {os.path.abspath(wheel)}")
        print("contents:")
        for info in infos:
            print(f"  {info.file_size:>10}  {info.filename}")
        names = [i.filename for i in infos]

        for n in names:
            if os.path.basename(n).startswith("libmpcomm"):
                problems.append(f"{n}: libmpcomm must not be inside the "
                                "wheel (it is resolved at run time)")
        if "mooncake/__init__.py" not in names:
            problems.append("mooncake/__init__.py is missing")
        engines = [n for n in names
                   if re.match(r"^mooncake/engine\..*\.so$", n)]
        if not engines:
            problems.append("no extension mooncake/engine*.so in the wheel")

        # Python tag of the wheel (name-version-pytag-abitag-plat.whl)
        # against the ABI suffix of each extension.
        parts = os.path.basename(wheel)[:-len(".whl")].split("-")
        pytag = parts[-3] if len(parts) >= 5 else ""
        for n in names:
            m = re.search(r"\.cpython-(\d+)-[^/]*\.so$", n)
            if m and pytag != "cp" + m.group(1):
                problems.append(f"{n} is built for cpython-{m.group(1)} but "
                                f"the wheel is tagged {pytag or '(none)'}")

        cache = ldconfig_cache()
        external = {}
        for n in names:
            path = os.path.join(root, n)
            ident = elf_id(path)
            if ident is None:
                continue
            needed, paths = dynamic(path)
            here = os.path.dirname(path)
            search = []
            for entry in paths:
                if not re.match(r"^\$(ORIGIN|\{ORIGIN\})(/|$)", entry):
                    problems.append(f"{n}: RPATH/RUNPATH entry '{entry}' is "
                                    "not $ORIGIN-relative")
                    continue
                resolved = os.path.normpath(
                    re.sub(r"^\$(ORIGIN|\{ORIGIN\})", here, entry))
                if os.path.commonpath([resolved, root]) != root:
                    problems.append(f"{n}: RPATH/RUNPATH entry '{entry}' "
                                    "leaves the wheel")
                    continue
                search.append(resolved)
            for lib in needed:
                if MPCOMM_NEEDED.match(lib):
                    if mpcomm_soname is None:
                        problems.append(f"{n} needs {lib}, but the wheel "
                                        "was checked as built without MPComm")
                    continue
                if any(os.path.exists(os.path.join(d, lib)) for d in search):
                    continue
                sys_path = system_library(lib, ident, cache)
                if sys_path is None:
                    problems.append(f"{n} needs {lib}, which is neither in "
                                    "the wheel nor a system library")
                    continue
                pkg = debian_package(sys_path)
                if pkg == "":
                    problems.append(f"{n} needs {lib} ({sys_path}), which "
                                    "no Debian package provides")
                    continue
                external[lib] = (sys_path, pkg or "package unknown: no dpkg")
            if mpcomm_soname and n in engines and mpcomm_soname not in needed:
                problems.append(f"{n} has no DT_NEEDED on {mpcomm_soname}")

        print("system libraries it needs (not bundled):")
        for lib in sorted(external):
            path, pkg = external[lib]
            print(f"  {lib:<28} {path}  ({pkg})")
        if mpcomm_soname:
            print(f"  {mpcomm_soname:<28} not bundled: found at run time "
                  "(LD_LIBRARY_PATH=$MPCOMM_ROOT/lib)")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return problems


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("wheel")
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--mpcomm-soname",
                   help="the DT_NEEDED engine*.so must keep, e.g. "
                        "libmpcomm.so.1")
    g.add_argument("--no-mpcomm", action="store_true",
                   help="the wheel was built with USE_MPCOMM=OFF")
    args = ap.parse_args()
    if args.mpcomm_soname is not None and \
            not MPCOMM_NEEDED.match(args.mpcomm_soname):
        ap.error(f"--mpcomm-soname: '{args.mpcomm_soname}' is not "
                 "libmpcomm.so.<N>")
    problems = check(args.wheel, args.mpcomm_soname)
    if problems:
        for p in problems:
            print(f"wheel_check: {p}", file=sys.stderr)
        print(f"wheel_check: FAILED: {len(problems)} problem(s) in "
              f"{args.wheel}", file=sys.stderr)
        return 1
    print("wheel_check: OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
