"""mooncake.http_metadata_server as a process: Mooncake's GET/PUT/DELETE
protocol byte-exact, the conditional writes TENT's client relies on, and
the bounds (body, key length, key count) answered with their status codes
while the server keeps serving."""
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

DEADLINE_S = 20.0


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def call(url, method="GET", body=None, headers=None):
    """(status, body bytes, ETag or None) of one request."""
    request = urllib.request.Request(url, data=body, method=method,
                                     headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=5) as reply:
            return reply.status, reply.read(), reply.headers.get("ETag")
    except urllib.error.HTTPError as e:
        return e.code, e.read(), e.headers.get("ETag")


@pytest.fixture
def server():
    try:
        import aiohttp  # noqa: F401
    except ImportError:
        pytest.skip("python3-aiohttp is not installed "
                    "(scripts/install_deps.sh installs it)")
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "mooncake.http_metadata_server", "--host",
         "127.0.0.1", "--port", str(port), "--max-body-bytes", "1000",
         "--max-key-bytes", "32", "--max-keys", "3"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = "http://127.0.0.1:%d/metadata" % port
    try:
        end = time.monotonic() + DEADLINE_S
        while True:
            try:
                if call(base + "?key=ready")[0] == 404:
                    break
            except OSError:
                pass
            assert proc.poll() is None, "the server exited"
            assert time.monotonic() < end, "the server is not ready"
            time.sleep(0.05)  # polling back-off with a deadline
        yield base
    finally:
        proc.terminate()
        proc.wait(timeout=DEADLINE_S)


def test_get_put_delete_as_mooncake_clients_use_them(server):
    url = server + "?key=a%2Fb"
    assert call(url)[:2] == (404, b"metadata not found")
    value = bytes(range(256))
    status, text, etag = call(url, "PUT", value)
    assert (status, text) == (200, b"metadata updated")
    assert call(url)[:3] == (200, value, etag)
    assert call(url, "DELETE")[:2] == (200, b"metadata deleted")
    assert call(url, "DELETE")[:2] == (404, b"metadata not found")
    assert call(server + "?key=")[:2] == (400, b"metadata key is required")
    assert call(url, "POST", b"x")[0] == 405


def test_conditional_writes_are_refused_once_the_key_changed(server):
    url = server + "?key=name"
    status, _, first = call(url, "PUT", b"one", {"If-None-Match": "*"})
    assert status == 200
    # Taken: a second claim is refused, and so is a write over a stale tag.
    assert call(url, "PUT", b"two", {"If-None-Match": "*"})[0] == 412
    status, _, second = call(url, "PUT", b"two", {"If-Match": first})
    assert status == 200 and second != first
    assert call(url, "PUT", b"three", {"If-Match": first})[0] == 412
    assert call(url, "DELETE", None, {"If-Match": first})[0] == 412
    assert call(url)[:2] == (200, b"two")
    assert call(url, "DELETE", None, {"If-Match": second})[0] == 200
    # Deleted and written again: the old tag does not match the new value.
    assert call(url, "PUT", b"four")[0] == 200
    assert call(url, "PUT", b"five", {"If-Match": second})[0] == 412


def test_bounds_are_answered_and_the_server_keeps_serving(server):
    assert call(server + "?key=big", "PUT", b"x" * 1001)[0] == 413
    status, text, _ = call(server + "?key=" + "k" * 33, "PUT", b"x")
    assert (status, text) == (400, b"metadata key is 33 bytes, more than "
                              b"--max-key-bytes (32)")
    for key in ("k1", "k2", "k3"):
        assert call(server + "?key=" + key, "PUT", b"x")[0] == 200
    status, text, _ = call(server + "?key=k4", "PUT", b"x")
    assert (status, text) == (507, b"metadata store holds 3 keys, the "
                              b"--max-keys limit")
    # An existing key may still be rewritten, and everything is served.
    assert call(server + "?key=k1", "PUT", b"y")[0] == 200
    assert call(server + "?key=k1")[:2] == (200, b"y")


def test_bad_options_are_refused_naming_them():
    try:
        import aiohttp  # noqa: F401
    except ImportError:
        pytest.skip("python3-aiohttp is not installed")
    out = subprocess.run(
        [sys.executable, "-m", "mooncake.http_metadata_server",
         "--max-keys", "0"], capture_output=True, text=True, timeout=30)
    assert out.returncode == 2
    assert "--max-keys must be positive, got 0" in out.stderr
