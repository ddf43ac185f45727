"""No call in either module reads or writes outside memory the caller owns
or registered. The cases that used to crash the interpreter run in a child
process, so a crash is a failed test (the child's return code), not a dead
pytest."""
import os
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
import tent

import patterns

CHILD_DEADLINE_S = 60.0
TCP_ONLY = ('{"transports": {"tcp": {"enable": true}, "mpcomm": {"enable": '
            'false}}}')


def run_child(code):
    """Runs code in a fresh interpreter; (returncode, stdout lines,
    stderr)."""
    env = dict(os.environ)
    env["MC_TENT_CONF"] = TCP_ONLY
    env["GLOG_logtostderr"] = "1"
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)],
                          env=env, capture_output=True,
                          timeout=CHILD_DEADLINE_S)
    return (proc.returncode, proc.stdout.decode().splitlines(),
            proc.stderr.decode(errors="replace"))


CLASSIC_START = """
from mooncake import engine
e = engine.TransferEngine()
assert e.initialize("127.0.0.1", "P2PHANDSHAKE", "tcp", "") == 0
"""


@pytest.mark.parametrize("call,printed,logged", [
    ("e.write_bytes_to_buffer(0, b'x' * 16, 16)", "-1",
     "write_bytes_to_buffer: local range [0x0, +16) is not inside "
     "registered memory"),
    ("e.read_bytes_from_buffer(0x1000, 16)", "b''",
     "read_bytes_from_buffer: local range [0x1000, +16) is not inside "
     "registered memory"),
    ("e.read_bytes_from_buffer(0, 16)", "b''",
     "read_bytes_from_buffer: local range [0x0, +16) is not inside "
     "registered memory"),
])
def test_classic_raw_address_outside_engine_memory_is_refused(
        call, printed, logged):
    rc, out, err = run_child(CLASSIC_START + "print('RESULT', repr(%s))\n"
                             "e.close()\n" % call)
    assert rc == 0, "child ended with %d:\n%s" % (rc, err[-2000:])
    assert out == ["RESULT " + printed]
    assert logged in err


def test_classic_raw_address_inside_engine_memory_only():
    """Allocated or registered memory is readable and writable, up to its
    end and no further; freed memory is refused again."""
    rc, out, err = run_child(CLASSIC_START + """
import numpy as np
buf = e.allocate_managed_buffer(4096)
assert buf != 0
print("WEND", e.write_bytes_to_buffer(buf + 4090, b"x" * 16, 16))
print("REND", repr(e.read_bytes_from_buffer(buf + 4090, 16)))
print("WOK", e.write_bytes_to_buffer(buf + 4080, "0123456789abcdef", 16))
print("ROK", repr(e.read_bytes_from_buffer(buf + 4080, 16)))
print("WLONG", e.write_bytes_to_buffer(buf, b"abc", 4))
print("FREE", e.free_managed_buffer(buf, 4096))
print("RFREED", repr(e.read_bytes_from_buffer(buf, 3)))
arr = np.zeros(64, dtype=np.uint8)
print("REG", e.register_memory(arr.ctypes.data, 64))
print("WARR", e.write_bytes_to_buffer(arr.ctypes.data, bytearray(b"hi"), 2))
print("ARR", bytes(arr[:2]))
e.close()
""")
    assert rc == 0, "child ended with %d:\n%s" % (rc, err[-2000:])
    assert out == [
        "WEND -1", "REND b''", "WOK 0", "ROK b'0123456789abcdef'",
        "WLONG -1", "FREE 0", "RFREED b''", "REG 0", "WARR 0", "ARR b'hi'"
    ]
    assert "write_bytes_to_buffer: length 4 exceeds the 3 source bytes" in err


def test_tent_request_longer_than_its_object_is_refused_before_any_byte():
    """The reported case: a 4 KiB bytearray as the destination of a 4 MiB
    READ. Accepted, the TCP worker wrote 4 MiB into it."""
    rc, out, err = run_child("""
import numpy as np
import tent
e = tent.TransferEngine()
src = np.ones(4 << 20, dtype=np.uint8)
e.register_local_memory(src)
h = e.open_segment(e.get_segment_name())
small = bytearray(4096)
try:
    req = tent.Request(tent.READ, small, h, src.ctypes.data, 4 << 20)
except tent.InvalidArgumentError as x:
    print("REFUSED", x)
else:
    import time
    b = e.allocate_transfer_batch(1)
    e.submit_transfer(b, [req])
    end = time.monotonic() + 30
    while (e.get_transfer_status_overall(b).state == tent.PENDING and
           time.monotonic() < end):
        pass
    print("ACCEPTED")
""")
    assert rc == 0, "child ended with %d:\n%s" % (rc, err[-2000:])
    assert out == [
        "REFUSED Request.source: length 4194304 exceeds the bytearray "
        "object's 4096 bytes"
    ]


@pytest.fixture
def eng(monkeypatch):
    monkeypatch.setenv("MC_TENT_CONF", TCP_ONLY)
    e = tent.TransferEngine()
    assert e.available()
    return e


def test_tent_request_changes_are_checked_against_the_object(eng):
    small = bytearray(4096)
    big = bytearray(1 << 16)
    req = tent.Request(tent.READ, small, 1, 0, 4096)
    with pytest.raises(tent.InvalidArgumentError,
                       match=r"^Request\.length: length 4097 exceeds the "
                       r"bytearray object's 4096 bytes$"):
        req.length = 4097
    assert req.length == 4096
    req.source = big
    req.length = 1 << 16
    with pytest.raises(tent.InvalidArgumentError,
                       match=r"^Request\.source: length 65536 exceeds the "
                       r"bytearray object's 4096 bytes$"):
        req.source = small
    assert req.source == np.frombuffer(big, dtype=np.uint8).ctypes.data
    # The view is held: the object cannot be resized under the request.
    with pytest.raises(BufferError):
        big.extend(b"x")
    # A read-only source cannot become the destination of a READ.
    frozen = bytes(16)
    write = tent.Request(tent.WRITE, frozen, 1, 0, 16)
    with pytest.raises(tent.InvalidArgumentError,
                       match=r"^Request\.opcode: the bytes object is "
                       r"read-only and cannot be the destination of a READ$"):
        write.opcode = tent.READ
    assert write.opcode == tent.WRITE
    # An int source lifts the object's bound.
    req.source = 4096
    req.length = 1 << 20
    assert (req.source, req.length) == (4096, 1 << 20)


def test_tent_int_source_must_be_registered_memory(eng):
    size = 1 << 16
    src = np.frombuffer(bytearray(patterns.pattern(5, size)), dtype=np.uint8)
    dst = np.zeros(size, dtype=np.uint8)
    eng.register_local_memory(src)
    handle = eng.open_segment(eng.get_segment_name())
    with eng.allocate_batch_guard(1) as batch:
        req = tent.Request(tent.READ, dst.ctypes.data, handle,
                           src.ctypes.data, size)
        with pytest.raises(tent.AddressNotRegisteredError,
                           match=r"^submit_transfer: request 0: local range "
                           r"\[0x%x, \+%d\) is not inside registered memory"
                           % (dst.ctypes.data, size)):
            eng.submit_transfer(batch, [req])
    # Registered, the same address moves the bytes.
    eng.register_local_memory(dst)
    with eng.allocate_batch_guard(1) as batch:
        eng.submit_transfer(batch, [req])
        end = time.monotonic() + CHILD_DEADLINE_S
        while (eng.get_transfer_status_overall(batch).state
               in (tent.PENDING, tent.INITIAL) and time.monotonic() < end):
            pass
        st = eng.get_transfer_status_overall(batch)
        assert (st.state, st.bytes) == (tent.COMPLETED, size)
    assert dst.tobytes() == patterns.pattern(5, size)
    eng.unregister_local_memory(dst)
    eng.unregister_local_memory(src)


def test_tent_batch_allocation_failures_raise_the_documented_classes(eng):
    with pytest.raises(tent.TooManyRequestsError,
                       match=r"^allocate_transfer_batch: cannot allocate a "
                       r"batch of 1099511627776 requests: out of memory$"):
        eng.allocate_transfer_batch(2**40)
    with pytest.raises(tent.InvalidArgumentError,
                       match=r"^allocate_transfer_batch: batch size must be "
                       r"positive$"):
        eng.allocate_transfer_batch(0)
    with pytest.raises(tent.TooManyRequestsError,
                       match=r"^allocate_batch_guard: cannot allocate"):
        eng.allocate_batch_guard(2**40)
    # Still a working engine.
    batch = eng.allocate_transfer_batch(4)
    assert batch != 0
    eng.free_transfer_batch(batch)
