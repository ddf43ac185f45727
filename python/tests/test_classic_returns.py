"""mooncake.engine answers refusals with the classic binding's sentinels
(-1, 0, b"", None, []) and logs why, as Mooncake's own tests and the
SGLang/vLLM connectors expect; arguments are taken in the kinds classic
takes (any sequence for a list, str for write_bytes_to_buffer). Calls are
written the way those clients write them: positional, addresses as ints."""
import numpy as np
import pytest
from mooncake import engine

import patterns
from conftest import Target, make_initiator

UNKNOWN = "127.0.0.1:1"  # nothing listens on port 1


@pytest.fixture(scope="module")
def tcp_pair():
    target = Target("tcp")
    eng = make_initiator("tcp")
    yield eng, target
    eng.close()
    assert target.close() == 0


@pytest.fixture
def managed(tcp_pair):
    eng, _ = tcp_pair
    buf = eng.allocate_managed_buffer(1 << 16)
    assert buf != 0
    yield buf
    assert eng.free_managed_buffer(buf, 1 << 16) == 0


def test_initialize_refusals_return_minus_one():
    eng = engine.TransferEngine()
    assert eng.initialize("127.0.0.1", "P2PHANDSHAKE", "warp", "") == -1
    assert eng.initialize("127.0.0.1", "P2PHANDSHAKE", "", "") == -1
    assert eng.initialize_ext("127.0.0.1", "P2PHANDSHAKE", "warp", "",
                              "p2p") == -1
    assert eng.initialize("127.0.0.1", "zookeeper://127.0.0.1:2181", "tcp",
                          "") == -1
    assert eng.initialize("127.0.0.1:port", "P2PHANDSHAKE", "tcp", "") == -1
    # The refusals left the engine usable; device_name may be None, as
    # classic's char* allows.
    assert eng.initialize("127.0.0.1", "P2PHANDSHAKE", "tcp", None) == 0
    assert eng.get_rpc_port() > 0
    # An allocation that cannot be had is 0, not MemoryError.
    assert eng.allocate_managed_buffer(1 << 62) == 0
    assert eng.initialize("127.0.0.1", "P2PHANDSHAKE", "tcp", "") == -1
    eng.close()


@pytest.mark.parametrize("state", ["not initialized", "closed"])
def test_an_engine_without_a_runtime_answers_sentinels(state):
    eng = engine.TransferEngine()
    if state == "closed":
        assert eng.initialize("127.0.0.1", "P2PHANDSHAKE", "tcp", "") == 0
        eng.close()
    local = np.zeros(64, dtype=np.uint8)
    addr = local.ctypes.data
    assert eng.get_rpc_port() == -1
    assert eng.get_segment_name() == ""
    assert eng.allocate_managed_buffer(4096) == 0
    assert eng.free_managed_buffer(addr, 64) == -1
    assert eng.transfer_sync_write(UNKNOWN, addr, 0, 16) == -1
    assert eng.transfer_sync_read(UNKNOWN, addr, 0, 16) == -1
    assert eng.batch_transfer_sync_read(UNKNOWN, [addr], [0], [16]) == -1
    assert eng.batch_transfer_async_write(UNKNOWN, [addr], [0], [16]) == 0
    assert eng.transfer_submit_write(UNKNOWN, addr, 0, 16) == 0
    assert eng.get_batch_transfer_status([1]) == -1
    assert eng.transfer_check_status(1) == -1
    assert eng.register_memory(addr, 64) == -1
    assert eng.unregister_memory(addr) == -1
    assert eng.batch_register_memory([addr], [64]) == -1
    assert eng.batch_unregister_memory([addr]) == -1
    assert eng.write_bytes_to_buffer(addr, b"abcd", 4) == -1
    assert eng.read_bytes_from_buffer(addr, 4) == b""
    assert eng.get_first_buffer_address(UNKNOWN) == 0
    assert eng.get_notifies() == []
    assert eng.send_probe(UNKNOWN) == -1
    assert eng.get_engine() is None
    assert eng.get_engine_ptr() == 0
    assert eng.warmup_efa_segment(UNKNOWN) == 0


def test_unknown_peer_returns_the_sentinels(tcp_pair, managed):
    eng, _ = tcp_pair
    write, read = engine.TransferOpcode.Write, engine.TransferOpcode.Read
    assert eng.transfer_sync_write(UNKNOWN, managed, 0, 16) == -1
    assert eng.transfer_sync_read(UNKNOWN, managed, 0, 16) == -1
    assert eng.transfer_sync(UNKNOWN, managed, 0, 16, write) == -1
    assert eng.batch_transfer_sync_write(UNKNOWN, [managed], [0], [16]) == -1
    assert eng.batch_transfer_sync(UNKNOWN, [managed], [0], [16], read) == -1
    assert eng.batch_transfer_async_read(UNKNOWN, [managed], [0], [16]) == 0
    assert eng.batch_transfer_async(UNKNOWN, [managed], [0], [16], write) == 0
    assert eng.transfer_submit_write(UNKNOWN, managed, 0, 16) == 0
    assert eng.get_first_buffer_address(UNKNOWN) == 0
    assert eng.send_probe(UNKNOWN) == -1


def test_mismatched_lengths_return_the_sentinels(tcp_pair, managed):
    eng, target = tcp_pair
    seg, peer = target.segment, target.addr
    assert eng.batch_transfer_sync_read(seg, [managed, managed + 16], [peer],
                                        [16, 16]) == -1
    assert eng.batch_transfer_sync_write(seg, [managed], [peer],
                                         [16, 16]) == -1
    assert eng.batch_transfer_async_read(seg, (managed, ),
                                         (peer, peer + 16), (16, )) == 0
    local = np.zeros(8192, dtype=np.uint8)
    base = local.ctypes.data
    assert eng.batch_register_memory([base, base + 4096], [4096]) == -1
    # Nothing was registered by the refused call.
    assert eng.batch_unregister_memory([base]) != 0


def test_unregistered_ranges_return_the_sentinels(tcp_pair, managed):
    eng, target = tcp_pair
    seg, peer = target.segment, target.addr
    # Past the end of what the peer registered.
    assert eng.transfer_sync_read(seg, managed, peer + target.size - 8,
                                  16) == -1
    assert eng.batch_transfer_async_write(seg, [managed],
                                          [peer + target.size], [16]) == 0
    # Local memory that is not registered.
    stray = np.zeros(64, dtype=np.uint8)
    assert eng.transfer_sync_write(seg, stray.ctypes.data, peer, 16) == -1
    assert eng.write_bytes_to_buffer(stray.ctypes.data, b"x" * 16, 16) == -1
    assert eng.read_bytes_from_buffer(stray.ctypes.data, 16) == b""
    # Unknown batch ids.
    assert eng.get_batch_transfer_status([12345]) == -1
    assert eng.transfer_check_status(12345) == -1
    # Unregistering memory that is not registered: classic's negative code.
    assert eng.unregister_memory(stray.ctypes.data) < 0


def test_tuples_and_str_are_taken_where_classic_takes_them(tcp_pair,
                                                           managed):
    eng, target = tcp_pair
    seg, peer = target.segment, target.addr
    text = "hello, target!"
    assert eng.write_bytes_to_buffer(managed, text, len(text)) == 0
    assert eng.read_bytes_from_buffer(managed, len(text)) == text.encode()
    assert eng.batch_transfer_sync_write(seg, (managed, ), (peer, ),
                                         (len(text), )) == 0
    back = managed + 4096
    assert eng.batch_transfer_sync_read(seg, (back, ), (peer, ),
                                        (len(text), )) == 0
    assert eng.read_bytes_from_buffer(back, len(text)) == text.encode()
    batch = eng.batch_transfer_async_read(seg, (back, back + 64),
                                          (peer, peer + 64), (64, 64))
    assert batch != 0
    assert eng.get_batch_transfer_status((batch, )) == 0
    assert eng.read_bytes_from_buffer(back + 64, 64) == patterns.pattern(
        7, target.size)[64:128]
    # Put the target's pattern back for the other tests.
    assert eng.write_bytes_to_buffer(managed, patterns.pattern(
        7, target.size)[:len(text)], len(text)) == 0
    assert eng.transfer_sync_write(seg, managed, peer, len(text)) == 0
    region = np.zeros(2 * 4096, dtype=np.uint8)
    base = region.ctypes.data
    assert eng.batch_register_memory((base, base + 4096), (4096, 4096)) == 0
    assert eng.batch_unregister_memory((base, base + 4096)) == 0
    assert eng.register_memory(base, 4096) == 0
    assert eng.unregister_memory(base) == 0


def test_wrong_kinds_still_raise_as_in_classic(tcp_pair, managed):
    eng, target = tcp_pair
    # A str is not a list of buffers: TypeError, as pybind11's conversion.
    with pytest.raises(TypeError, match="buffers must be a sequence"):
        eng.batch_transfer_sync_write(target.segment, "abc", [0], [16])
    # Classic raises ValueError for an unknown transport_hint.
    with pytest.raises(ValueError, match="unknown transport_hint 'warp'"):
        eng.transfer_sync_write(target.segment, managed, target.addr, 16,
                                transport_hint="warp")


def test_free_managed_buffer_frees_only_managed_buffers(tcp_pair):
    eng, target = tcp_pair
    own = np.zeros(4096, dtype=np.uint8)
    assert eng.register_memory(own.ctypes.data, 4096) == 0
    assert eng.free_managed_buffer(own.ctypes.data, 4096) == -1
    # The caller's registration is untouched: a READ into it still works.
    assert eng.transfer_sync_read(target.segment, own.ctypes.data,
                                  target.addr, 4096) == 0
    assert own.tobytes() == patterns.pattern(7, target.size)[:4096]
    assert eng.unregister_memory(own.ctypes.data) == 0
    buf = eng.allocate_managed_buffer(4096)
    assert buf != 0
    assert eng.free_managed_buffer(buf, 8192) == -1
    assert eng.free_managed_buffer(buf, 4096) == 0
    assert eng.free_managed_buffer(buf, 4096) == -1
