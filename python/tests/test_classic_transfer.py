"""Two processes move numpy arrays byte-exact with the classic API, over
tcp and (in a build with MPComm) mpcomm."""
import hashlib
import time

import numpy as np
from mooncake import engine

import patterns

PIECES = 4


def registered_array(eng, data):
    array = np.frombuffer(bytearray(data), dtype=np.uint8)
    assert eng.register_memory(array) == 0
    return array


def test_sync_read_and_write_move_a_numpy_array_byte_exact(pair):
    eng, target = pair
    size = target.size
    local = registered_array(eng, bytes(size))
    assert eng.transfer_sync_read(target.segment, local, target.addr,
                                  size) == 0
    assert local.tobytes() == patterns.pattern(7, size)

    local[:] = np.frombuffer(patterns.pattern(11, size), dtype=np.uint8)
    assert eng.transfer_sync_write(target.segment, local, target.addr,
                                   size) == 0
    expected = hashlib.sha256(patterns.pattern(11, size)).hexdigest()
    assert target.ask("SHA", "SHA") == "SHA " + expected
    assert eng.get_first_buffer_address(target.segment) == target.addr
    assert eng.unregister_memory(local) == 0


def test_batch_calls_move_pieces_byte_exact(pair):
    eng, target = pair
    piece = target.size // PIECES
    data = patterns.pattern(23, target.size)
    src = registered_array(eng, data)
    # An address and a length work as well as the array itself.
    buffers = [src.ctypes.data + i * piece for i in range(PIECES)]
    peers = [target.addr + i * piece for i in range(PIECES)]
    assert eng.batch_transfer_sync_write(target.segment, buffers, peers,
                                         [piece] * PIECES) == 0
    dst = registered_array(eng, bytes(target.size))
    views = [dst[i * piece:(i + 1) * piece] for i in range(PIECES)]
    batch = eng.batch_transfer_async_read(target.segment, views, peers)
    assert batch != 0
    assert eng.get_batch_transfer_status([batch]) == 0
    assert dst.tobytes() == data


def test_submit_write_and_check_status(pair):
    eng, target = pair
    data = patterns.pattern(31, target.size)
    src = registered_array(eng, data)
    batch = eng.transfer_submit_write(target.segment, src, target.addr)
    end = time.monotonic() + 30
    state = 0
    while state == 0 and time.monotonic() < end:
        state = eng.transfer_check_status(batch)
    assert state == 1
    expected = hashlib.sha256(data).hexdigest()
    assert target.ask("SHA", "SHA") == "SHA " + expected


def test_transfer_sync_with_notify_reaches_the_target(pair):
    eng, target = pair
    src = registered_array(eng, patterns.pattern(5, 4096))
    notify = engine.TransferNotify("kv-ready", "layer-3")
    assert eng.transfer_sync(target.segment, src, target.addr, 4096,
                             engine.TransferOpcode.Write, notify) == 0
    assert target.ask("NOTIFY 20", "NOTIFY") == "NOTIFY kv-ready layer-3"
