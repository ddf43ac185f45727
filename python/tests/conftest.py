"""Fixtures of the Python suite: a target process and an initiator engine.

Run with PYTHONPATH=<build>/python (ctest sets it). MPComm handshake ports
(MPCOMM_TCP_PORT) come from this process's pid in 32000-32767: above the
C++ suites' ranges (up to 31999) and below the kernel's ephemeral ports.

A store test whose server (redis-server, etcd) is not on PATH skips, naming
it; under TENT_TEST_REQUIRE_STORES=1 (scripts/run_tests.sh sets it in CI)
it fails instead. skip_without_server() does either; a plain pytest.skip()
whose reason says "<server> is not installed" is turned into a failure the
same way (pytest_runtest_makereport below).
"""
import os
import re
import selectors
import shutil
import signal
import subprocess
import sys
import time

import pytest
from mooncake import engine

HERE = os.path.dirname(os.path.abspath(__file__))
TARGET_SIZE = 1 << 20
DEADLINE_S = 30.0


REQUIRE_STORES_VAR = "TENT_TEST_REQUIRE_STORES"
STORE_SERVERS = ("redis-server", "etcd")
_MISSING_SERVER = re.compile(r"\b(%s) is not installed" %
                             "|".join(re.escape(b) for b in STORE_SERVERS))


def stores_required():
    """True under TENT_TEST_REQUIRE_STORES=1 (checked in pytest_configure)."""
    return os.environ.get(REQUIRE_STORES_VAR, "") == "1"


def pytest_configure(config):
    value = os.environ.get(REQUIRE_STORES_VAR, "")
    if value not in ("", "0", "1"):
        raise pytest.UsageError("%s must be 0 or 1, got %r" %
                                (REQUIRE_STORES_VAR, value))


def skip_without_server(binary):
    """Skips the calling test when `binary` is not on PATH, naming it; fails
    it instead under TENT_TEST_REQUIRE_STORES=1."""
    if shutil.which(binary) is not None:
        return
    why = "%s is not installed (not on PATH)" % binary
    if stores_required():
        pytest.fail("%s and %s=1 requires the store tests to run "
                    "(scripts/install_deps.sh installs it)" %
                    (why, REQUIRE_STORES_VAR))
    pytest.skip("%s (scripts/install_deps.sh installs it; %s=1 fails the "
                "test instead)" % (why, REQUIRE_STORES_VAR))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Under TENT_TEST_REQUIRE_STORES=1, a skip for a missing store server
    is a failure: CI must not pass without having run the stores."""
    outcome = yield
    report = outcome.get_result()
    if not report.skipped or not stores_required():
        return
    longrepr = report.longrepr
    reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
    if _MISSING_SERVER.search(reason):
        if reason.startswith("Skipped: "):
            reason = reason[len("Skipped: "):]
        report.outcome = "failed"
        report.longrepr = "%s, and %s=1 requires the store tests to run" % (
            reason, REQUIRE_STORES_VAR)


def mpcomm_ports():
    base = 32000 + (os.getpid() % 380) * 2
    return base, base + 1


class Target:
    """tests/target.py in a child process, driven by stdin/stdout lines."""

    def __init__(self, protocol, size=TARGET_SIZE,
                 metadata_server="P2PHANDSHAKE"):
        env = dict(os.environ)
        env["MPCOMM_TCP_PORT"] = str(mpcomm_ports()[1])
        env.pop("MC_TENT_CONF", None)
        self.proc = subprocess.Popen(
            [sys.executable, os.path.join(HERE, "target.py"), protocol,
             str(size), metadata_server],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
        self._buf = b""
        words = self.read_line("READY").split()
        self.segment, self.addr, self.size = words[1], int(words[2]), int(
            words[3])

    def read_line(self, prefix, deadline_s=DEADLINE_S):
        """The next stdout line starting with prefix; fails at the deadline
        (the pipe is read with select, so this never blocks past it)."""
        sel = selectors.DefaultSelector()
        sel.register(self.proc.stdout, selectors.EVENT_READ)
        end = time.monotonic() + deadline_s
        while True:
            while b"\n" in self._buf:
                line, self._buf = self._buf.split(b"\n", 1)
                text = line.decode(errors="replace")
                if text.startswith("FAILED"):
                    pytest.fail("target: " + text)
                if text.startswith(prefix):
                    return text
            left = end - time.monotonic()
            if left <= 0:
                pytest.fail("no %r line from the target within %.0f s" %
                            (prefix, deadline_s))
            if sel.select(timeout=left):
                chunk = os.read(self.proc.stdout.fileno(), 4096)
                if not chunk:
                    pytest.fail("target exited (rc=%s) before %r" %
                                (self.proc.wait(), prefix))
                self._buf += chunk

    def ask(self, command, prefix, deadline_s=DEADLINE_S):
        self.proc.stdin.write((command + "\n").encode())
        self.proc.stdin.flush()
        return self.read_line(prefix, deadline_s)

    def stop(self):
        """SIGSTOP, and returns once the target is stopped: the signal takes
        effect after send_signal() returns, and until then the target's
        server threads may still answer a request."""
        self.proc.send_signal(signal.SIGSTOP)
        deadline = time.monotonic() + DEADLINE_S
        while time.monotonic() < deadline:
            with open("/proc/%d/stat" % self.proc.pid) as stat:
                # The state follows the ")" that ends the command name.
                if stat.read().rsplit(")", 1)[1].split()[0] == "T":
                    return
            time.sleep(0.001)
        pytest.fail("target not stopped within %.0f s" % DEADLINE_S)

    def close(self):
        self.proc.send_signal(signal.SIGCONT)
        self.proc.stdin.close()
        try:
            rc = self.proc.wait(timeout=DEADLINE_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            pytest.fail("target did not exit within %.0f s" % DEADLINE_S)
        self.proc.stdout.close()
        return rc


def has_mpcomm():
    return engine.SUPPORT_MPCOMM


def make_initiator(protocol, tent_conf=None):
    """A classic engine as the guide's examples start one."""
    os.environ["MPCOMM_TCP_PORT"] = str(mpcomm_ports()[0])
    if tent_conf is not None:
        os.environ["MC_TENT_CONF"] = tent_conf
    try:
        eng = engine.TransferEngine()
        rc = eng.initialize(hostname="127.0.0.1",
                            metadata_server="P2PHANDSHAKE",
                            protocol=protocol,
                            device_name="")
    finally:
        os.environ.pop("MC_TENT_CONF", None)
    assert rc == 0, "initialize(protocol=%r) returned %d" % (protocol, rc)
    return eng


@pytest.fixture(params=["tcp", "mpcomm"])
def protocol(request):
    if request.param == "mpcomm" and not has_mpcomm():
        pytest.skip("this mooncake.engine was built without MPComm "
                    "(USE_MPCOMM=OFF)")
    return request.param


@pytest.fixture
def pair(protocol):
    """(initiator engine, target) over `protocol`."""
    target = Target(protocol)
    try:
        eng = make_initiator(protocol)
    except BaseException:
        target.close()
        raise
    yield eng, target
    eng.close()
    assert target.close() == 0
