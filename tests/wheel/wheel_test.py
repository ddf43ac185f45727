#!/usr/bin/env python3
"""The mooncake-transfer-engine wheel, end to end: scripts/build_wheel.sh
packs it from a USE_MPCOMM=ON build dir, it is installed into a fresh
virtual environment (pip --no-index --no-deps), and importing it behaves as
the guide's "Wheel Packaging" section says: without libmpcomm reachable the
import fails with the loader's exact message; with LD_LIBRARY_PATH set to
$MPCOMM_ROOT/lib it imports, loading libtent from the wheel and libmpcomm
from that prefix. Also checks that scripts/wheel_check.py rejects wheels
that break each packaging guarantee.

Env: BUILD_DIR (a configured and built USE_MPCOMM=ON build dir, reused),
MPCOMM_ROOT (its MPComm prefix, e.g. softmpcomm's), PYTHON (the packing
interpreter; default /usr/bin/python3). Run by scripts/run_tests.sh after
the ON build."""
import glob
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
import zipfile

ROOT = os.path.normpath(os.path.join(os.path.dirname(
    os.path.abspath(__file__)), "..", ".."))
BUILD_DIR = os.environ.get("BUILD_DIR", "")
MPCOMM_ROOT = os.environ.get("MPCOMM_ROOT", "")
PYTHON = os.environ.get("PYTHON") or (
    "/usr/bin/python3" if os.path.exists("/usr/bin/python3")
    else sys.executable)
LIBS = "mooncake_transfer_engine.libs"
MISSING = ("ImportError: libmpcomm.so.1: cannot open shared object file: "
           "No such file or directory")
# Prints where the loaded libtent and libmpcomm come from.
PROBE = """
from mooncake import engine
print("engine", engine.__file__)
for line in open("/proc/self/maps"):
    path = line.split()[-1]
    if "/libtent.so" in path or "/libmpcomm.so" in path:
        print("map", path)
"""


def clean_env(**extra):
    """The environment minus anything that could find the build tree or
    MPComm: no LD_LIBRARY_PATH, no PYTHONPATH."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("LD_LIBRARY_PATH", "PYTHONPATH", "PYTHONHOME")}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.update(extra)
    return env


STATE = {}


def setUpModule():
    """Builds the wheel once, for both classes."""
    if not BUILD_DIR or not MPCOMM_ROOT:
        raise RuntimeError("set BUILD_DIR (a USE_MPCOMM=ON build dir) and "
                           "MPCOMM_ROOT (its MPComm prefix)")
    tmp = tempfile.mkdtemp(prefix="wheel_test.")
    STATE["tmp"] = tmp
    out = os.path.join(tmp, "dist")
    r = subprocess.run(
        ["bash", os.path.join(ROOT, "scripts", "build_wheel.sh")],
        env=dict(os.environ, BUILD_DIR=BUILD_DIR, OUT_DIR=out, PYTHON=PYTHON),
        capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"build_wheel.sh failed ({r.returncode}):\n"
                           f"{r.stdout[-4000:]}\n{r.stderr[-4000:]}")
    STATE["build_log"] = r.stdout
    wheels = glob.glob(os.path.join(out, "*.whl"))
    if len(wheels) != 1:
        raise RuntimeError(f"expected one wheel in {out}: {wheels}")
    STATE["wheel"] = wheels[0]


def tearDownModule():
    if "tmp" in STATE:
        shutil.rmtree(STATE["tmp"], ignore_errors=True)


class Wheel(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = STATE["tmp"]
        cls.wheel = STATE["wheel"]
        cls.build_log = STATE["build_log"]
        cls.venv = os.path.join(cls.tmp, "venv")
        subprocess.run([PYTHON, "-m", "venv", cls.venv], check=True,
                       env=clean_env())
        cls.py = os.path.join(cls.venv, "bin", "python")
        subprocess.run([cls.py, "-m", "pip", "install", "--quiet",
                        "--no-index", "--no-deps", cls.wheel], check=True,
                       env=clean_env(PIP_DISABLE_PIP_VERSION_CHECK="1"))

    def run_in_venv(self, code, **env):
        # cwd is the temp dir: no source-tree mooncake/ on sys.path.
        return subprocess.run([self.py, "-c", code], cwd=self.tmp,
                              env=clean_env(**env), capture_output=True,
                              text=True, timeout=60)

    def test_script_prints_the_wheel_and_its_contents(self):
        self.assertIn(f"build_wheel: {self.wheel}\n", self.build_log)
        self.assertIn("wheel_check: OK\n", self.build_log)
        self.assertIn(f"  {LIBS}/libtent.so.0\n", self.build_log)

    def test_contents(self):
        with zipfile.ZipFile(self.wheel) as z:
            names = set(z.namelist())
        self.assertIn("mooncake/__init__.py", names)
        self.assertIn(f"{LIBS}/libtent.so.0", names)
        self.assertEqual([], [n for n in names if "libmpcomm" in n])
        # Every module file CMake laid out under <build>/python is packed.
        built = set()
        py_build = os.path.join(BUILD_DIR, "python")
        for dirpath, dirs, files in os.walk(py_build):
            dirs[:] = [d for d in dirs
                       if d not in ("CMakeFiles", "tests", "__pycache__")]
            for f in files:
                if f.endswith((".so", ".py", ".pyi")):
                    built.add(os.path.relpath(os.path.join(dirpath, f),
                                              py_build))
        self.assertTrue(any(n.startswith("mooncake/engine.") for n in built))
        self.assertEqual(set(), built - names)

    def test_http_metadata_server_command_is_installed(self):
        # The entry point upstream's wheel has too; its module is packed.
        with zipfile.ZipFile(self.wheel) as z:
            names = set(z.namelist())
            points = [n for n in names if n.endswith("entry_points.txt")]
            self.assertEqual(1, len(points), names)
            text = z.read(points[0]).decode()
        self.assertIn("mooncake/http_metadata_server.py", names)
        self.assertIn("mooncake_http_metadata_server = "
                      "mooncake.http_metadata_server:main", text)
        self.assertTrue(os.access(os.path.join(
            self.venv, "bin", "mooncake_http_metadata_server"), os.X_OK))

    def test_import_without_libmpcomm_fails_with_the_guides_message(self):
        r = subprocess.run(["ldconfig", "-p"], capture_output=True,
                           text=True)
        if "libmpcomm.so.1 " in r.stdout:
            self.skipTest("libmpcomm.so.1 is installed system-wide "
                          "(ldconfig -p lists it): it cannot be unreachable")
        r = self.run_in_venv("from mooncake import engine")
        self.assertEqual(1, r.returncode, r.stderr)
        self.assertEqual(MISSING, r.stderr.strip().splitlines()[-1])

    def test_import_with_ld_library_path_loads_libtent_from_the_wheel(self):
        lib = os.path.join(MPCOMM_ROOT, "lib")
        r = self.run_in_venv(PROBE, LD_LIBRARY_PATH=lib)
        self.assertEqual(0, r.returncode, r.stderr)
        lines = r.stdout.splitlines()
        site = os.path.realpath(self.venv)
        engine = [l.split(" ", 1)[1] for l in lines if l.startswith("engine ")]
        self.assertEqual(1, len(engine), r.stdout)
        self.assertTrue(os.path.realpath(engine[0]).startswith(site + "/"),
                        engine[0])
        maps = {os.path.basename(p): os.path.realpath(p)
                for p in (l.split(" ", 1)[1] for l in lines
                          if l.startswith("map "))}
        self.assertEqual(os.path.join(os.path.dirname(os.path.dirname(
            os.path.realpath(engine[0]))), LIBS, "libtent.so.0"),
            maps.get("libtent.so.0"), r.stdout)
        mpcomm = [p for name, p in maps.items()
                  if name.startswith("libmpcomm.so")]
        self.assertEqual(1, len(mpcomm), r.stdout)
        self.assertTrue(mpcomm[0].startswith(os.path.realpath(lib) + "/"),
                        mpcomm[0])

    def test_top_level_modules_import_too(self):
        with zipfile.ZipFile(self.wheel) as z:
            top = sorted({n.split(".")[0] for n in z.namelist()
                          if "/" not in n and n.endswith(".so")})
        if not top:
            self.skipTest("no top-level extension module in the wheel")
        lib = os.path.join(MPCOMM_ROOT, "lib")
        for name in top:
            r = self.run_in_venv(f"import {name}", LD_LIBRARY_PATH=lib)
            self.assertEqual(0, r.returncode, f"import {name}: {r.stderr}")


class WheelCheckRejects(unittest.TestCase):
    """scripts/wheel_check.py on wheels doctored to break one guarantee
    each: it fails and names the problem."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = STATE["tmp"]
        cls.wheel = STATE["wheel"]

    def doctored(self, edit):
        """A copy of the wheel after edit(unpacked_dir)."""
        work = tempfile.mkdtemp(dir=self.tmp)
        unpacked = os.path.join(work, "w")
        with zipfile.ZipFile(self.wheel) as z:
            z.extractall(unpacked)
        edit(unpacked)
        out = os.path.join(work, os.path.basename(self.wheel))
        with zipfile.ZipFile(out, "w") as z:
            for dirpath, _, files in os.walk(unpacked):
                for f in files:
                    full = os.path.join(dirpath, f)
                    z.write(full, os.path.relpath(full, unpacked))
        return out

    def check(self, wheel, *args):
        r = subprocess.run([PYTHON, os.path.join(ROOT, "scripts",
                                                 "wheel_check.py"), wheel,
                            *(args or ("--mpcomm-soname", "libmpcomm.so.1"))],
                           capture_output=True, text=True)
        return r.returncode, r.stderr.splitlines()

    def engine(self, unpacked):
        found = glob.glob(os.path.join(unpacked, "mooncake", "engine.*.so"))
        self.assertEqual(1, len(found))
        return found[0]

    def test_accepts_the_built_wheel(self):
        self.assertEqual((0, []), self.check(self.wheel))

    def test_libmpcomm_inside(self):
        def edit(d):
            shutil.copy(os.path.join(MPCOMM_ROOT, "lib", "libmpcomm.so.1"),
                        os.path.join(d, LIBS, "libmpcomm.so.1"))
        rc, err = self.check(self.doctored(edit))
        self.assertEqual(1, rc)
        self.assertIn(f"wheel_check: {LIBS}/libmpcomm.so.1: libmpcomm must "
                      "not be inside the wheel (it is resolved at run time)",
                      err)

    def test_runpath_into_the_build_tree(self):
        src = os.path.join(BUILD_DIR, "src")

        def edit(d):
            path = self.engine(d)
            subprocess.run(["patchelf", "--set-rpath", src, path], check=True)
        rc, err = self.check(self.doctored(edit))
        self.assertEqual(1, rc)
        rel = self.engine_rel()
        self.assertIn(f"wheel_check: {rel}: RPATH/RUNPATH entry '{src}' is "
                      "not $ORIGIN-relative", err)

    def test_runpath_leaving_the_wheel(self):
        def edit(d):
            path = self.engine(d)
            subprocess.run(["patchelf", "--set-rpath", "$ORIGIN/../../..",
                            path], check=True)
        rc, err = self.check(self.doctored(edit))
        self.assertEqual(1, rc)
        self.assertIn(f"wheel_check: {self.engine_rel()}: RPATH/RUNPATH "
                      "entry '$ORIGIN/../../..' leaves the wheel", err)

    def test_dt_needed_on_libmpcomm_dropped(self):
        def edit(d):
            path = self.engine(d)
            subprocess.run(["patchelf", "--remove-needed", "libmpcomm.so.1",
                            path], check=True)
        wheel = self.doctored(edit)
        rc, err = self.check(wheel)
        self.assertEqual(1, rc)
        self.assertEqual([f"wheel_check: {self.engine_rel()} has no "
                          "DT_NEEDED on libmpcomm.so.1",
                          f"wheel_check: FAILED: 1 problem(s) in {wheel}"],
                         err)

    def test_libtent_missing(self):
        def edit(d):
            os.remove(os.path.join(d, LIBS, "libtent.so.0"))
        rc, err = self.check(self.doctored(edit))
        self.assertEqual(1, rc)
        self.assertIn(f"wheel_check: {self.engine_rel()} needs libtent.so.0, "
                      "which is neither in the wheel nor a system library",
                      err)

    def test_checked_as_a_build_without_mpcomm(self):
        rc, err = self.check(self.wheel, "--no-mpcomm")
        self.assertEqual(1, rc)
        self.assertIn(f"wheel_check: {self.engine_rel()} needs "
                      "libmpcomm.so.1, but the wheel was checked as built "
                      "without MPComm", err)

    def engine_rel(self):
        with zipfile.ZipFile(self.wheel) as z:
            found = [n for n in z.namelist()
                     if n.startswith("mooncake/engine.") and n.endswith(".so")]
        self.assertEqual(1, len(found))
        return found[0]


if __name__ == "__main__":
    unittest.main(verbosity=2)
