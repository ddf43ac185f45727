"""Classic metadata connection strings reach this tree's stores:
"redis://host:port", "etcd://host:port" and "http://host:port/metadata"
(the shipped mooncake.http_metadata_server) move bytes through engines
that find each other by name in the store. The test reads the target's
descriptor from the store itself and then removes it, so an engine that
ignored the store (and found its peer some other way) fails it."""
import base64
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

import numpy as np
import pytest
from mooncake import engine

import patterns
from conftest import Target

DEADLINE_S = 20.0


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def redis_ready(port):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
            s.sendall(b"PING\r\n")
            return s.recv(16).startswith(b"+PONG")
    except OSError:
        return False


def etcd_ready(port):
    try:
        url = "http://127.0.0.1:%d/health" % port
        with urllib.request.urlopen(url, timeout=1) as reply:
            return b'"true"' in reply.read()
    except OSError:
        return False


def http_ready(port):
    url = "http://127.0.0.1:%d/metadata?key=ready" % port
    try:
        urllib.request.urlopen(url, timeout=1)
    except urllib.error.HTTPError as e:
        return e.code == 404  # up, and the key is not there
    except OSError:
        return False
    return False


def redis_command(port, *words):
    """One RESP command; the reply's first line and, for a bulk string, its
    payload (None for a nil reply)."""
    out = b"*%d\r\n" % len(words)
    for w in words:
        w = w.encode() if isinstance(w, str) else w
        out += b"$%d\r\n%s\r\n" % (len(w), w)
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(out)
        data = b""
        end = time.monotonic() + DEADLINE_S
        while True:
            assert time.monotonic() < end, "no reply from redis"
            chunk = s.recv(1 << 16)
            assert chunk, "redis closed the connection"
            data += chunk
            head, sep, rest = data.partition(b"\r\n")
            if not sep:
                continue
            if not head.startswith(b"$"):
                return head
            size = int(head[1:])
            if size < 0:
                return None
            if len(rest) >= size + 2:
                return rest[:size]


def etcd_call(port, verb, key):
    body = json.dumps({"key": base64.b64encode(key.encode()).decode()})
    request = urllib.request.Request(
        "http://127.0.0.1:%d/v3/kv/%s" % (port, verb), data=body.encode(),
        headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=5) as reply:
        return json.loads(reply.read())


def http_call(store, verb, key):
    """(status, body) of one request to the http metadata server."""
    url = store + "?" + urllib.parse.urlencode({"key": key})
    request = urllib.request.Request(url, method=verb)
    try:
        with urllib.request.urlopen(request, timeout=5) as reply:
            return reply.status, reply.read()
    except urllib.error.HTTPError as e:
        return e.code, b""


def store_get(store, key):
    """The value stored under key, or None."""
    kind, address = store.split("://")
    if kind == "http":
        status, body = http_call(store, "GET", key)
        assert status in (200, 404), status
        return body if status == 200 else None
    port = int(address.rsplit(":", 1)[1])
    if kind == "redis":
        return redis_command(port, "GET", key)
    kvs = etcd_call(port, "range", key).get("kvs", [])
    return base64.b64decode(kvs[0]["value"]) if kvs else None


def store_delete(store, key):
    kind, address = store.split("://")
    if kind == "http":
        assert http_call(store, "DELETE", key)[0] == 200
        return
    port = int(address.rsplit(":", 1)[1])
    if kind == "redis":
        assert redis_command(port, "DEL", key) == b":1"
    else:
        assert etcd_call(port, "deleterange", key).get("deleted") == "1"


@pytest.fixture(params=["redis", "etcd", "http"])
def store(request, tmp_path):
    kind = request.param
    binary = {"redis": "redis-server", "etcd": "etcd",
              "http": sys.executable}[kind]
    if kind == "http" and subprocess.call(
            [sys.executable, "-c", "import aiohttp"],
            stderr=subprocess.DEVNULL) != 0:
        pytest.skip("python3-aiohttp is not installed "
                    "(scripts/install_deps.sh installs it)")
    if shutil.which(binary) is None:
        pytest.skip("%s is not installed (scripts/install_deps.sh installs "
                    "it)" % binary)
    port, peer = free_port(), free_port()
    if kind == "redis":
        args = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save",
                "", "--appendonly", "no", "--dir", str(tmp_path)]
        ready = redis_ready
    elif kind == "http":
        args = [binary, "-m", "mooncake.http_metadata_server", "--host",
                "127.0.0.1", "--port", str(port)]
        ready = http_ready
    else:
        client = "http://127.0.0.1:%d" % port
        peer_url = "http://127.0.0.1:%d" % peer
        args = [binary, "--name=py", "--data-dir=%s" % (tmp_path / "etcd"),
                "--listen-client-urls=" + client,
                "--advertise-client-urls=" + client,
                "--listen-peer-urls=" + peer_url,
                "--initial-advertise-peer-urls=" + peer_url,
                "--initial-cluster=py=" + peer_url]
        ready = etcd_ready
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        end = time.monotonic() + DEADLINE_S
        while not ready(port):
            assert proc.poll() is None, "%s exited" % binary
            assert time.monotonic() < end, "%s not ready" % binary
            time.sleep(0.05)  # polling back-off with a deadline
        yield "%s://127.0.0.1:%d%s" % (kind, port,
                                         "/metadata" if kind == "http" else "")
    finally:
        proc.terminate()
        proc.wait(timeout=DEADLINE_S)


def test_engines_find_each_other_through_the_store(store):
    size = 1 << 16
    target = engine.TransferEngine()
    assert target.initialize("127.0.0.1", store, "tcp", "") == 0
    # initialize_ext: the servers and the type apart.
    kind, servers = store.split("://")
    initiator = engine.TransferEngine()
    assert initiator.initialize_ext("127.0.0.1", servers, "tcp", "",
                                    kind) == 0
    try:
        served = np.frombuffer(bytearray(patterns.pattern(13, size)),
                               dtype=np.uint8)
        target.register_memory(served)
        local = np.zeros(size, dtype=np.uint8)
        initiator.register_memory(local)
        name = target.get_segment_name()
        assert initiator.get_first_buffer_address(name) == served.ctypes.data
        assert initiator.transfer_sync_read(name, local,
                                            served.ctypes.data) == 0
        assert local.tobytes() == patterns.pattern(13, size)

        # The target's descriptor is in the store, under its name, and
        # lists the served buffer.
        key = "mooncake/tent/segments/" + name
        value = store_get(store, key)
        assert value is not None, "no %s in the store" % key
        assert str(served.ctypes.data).encode() in value, value[:200]
        # Without the key, a fresh engine on the same store cannot find the
        # target: the look-up goes through the store and nowhere else.
        store_delete(store, key)
        assert store_get(store, key) is None
        late = engine.TransferEngine()
        assert late.initialize("127.0.0.1", store, "tcp", "") == 0
        try:
            assert late.get_first_buffer_address(name) == 0
        finally:
            late.close()
    finally:
        initiator.close()
        target.close()


def test_a_target_process_is_found_through_the_store(store):
    # Two processes: target.py publishes through the store, this one
    # finds it there by name and reads its pattern byte-exact.
    size = 1 << 16
    target = Target("tcp", size, metadata_server=store)
    initiator = engine.TransferEngine()
    try:
        assert initiator.initialize("127.0.0.1", store, "tcp", "") == 0
        local = np.zeros(size, dtype=np.uint8)
        initiator.register_memory(local)
        assert initiator.transfer_sync_read(target.segment, local,
                                            target.addr) == 0
        assert local.tobytes() == patterns.pattern(7, size)
    finally:
        initiator.close()
        assert target.close() == 0
