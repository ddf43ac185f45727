"""The native `tent` module: upstream TENT's names over the same runtime."""
import time

import numpy as np
import pytest
import tent

import patterns

SIZE = 1 << 16


@pytest.fixture
def eng(monkeypatch):
    monkeypatch.setenv("MC_TENT_CONF", '{"transports": {"tcp": {"enable": '
                       'true}, "mpcomm": {"enable": false}}}')
    e = tent.TransferEngine()
    assert e.available()
    assert e.get_supported_transports() == ["tcp"]
    return e


def wait_overall(e, batch, deadline_s=30.0):
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        st = e.get_transfer_status_overall(batch)
        if st.state not in (tent.TransferStatusEnum.PENDING,
                            tent.TransferStatusEnum.INITIAL):
            return st
    pytest.fail("batch %d still pending after %.0f s" % (batch, deadline_s))


def test_loopback_read_through_requests(eng):
    src = np.frombuffer(bytearray(patterns.pattern(3, SIZE)), dtype=np.uint8)
    dst = np.zeros(SIZE, dtype=np.uint8)
    eng.register_local_memory(src)
    eng.register_local_memory(dst.ctypes.data, dst.nbytes)
    handle = eng.open_segment(eng.get_segment_name())
    info = eng.get_segment_info(handle)
    assert sorted((b.base, b.length) for b in info.buffers) == sorted(
        [(src.ctypes.data, SIZE), (dst.ctypes.data, SIZE)])
    with eng.allocate_batch_guard(1) as batch:
        req = tent.Request(tent.READ, dst, handle, src.ctypes.data, SIZE)
        eng.submit_transfer(batch, [req])
        st = wait_overall(eng, batch)
        assert st.state == tent.TransferStatusEnum.COMPLETED
        assert st.bytes == SIZE
    assert dst.tobytes() == patterns.pattern(3, SIZE)
    eng.unregister_local_memory(src)
    eng.unregister_local_memory(dst)


def test_status_codes_raise_their_classes(eng):
    assert issubclass(tent.InvalidArgumentError, tent.TentException)
    assert tent.TentError is tent.TentException
    with pytest.raises(tent.RpcServiceError, match="127.0.0.1:1") as info:
        eng.open_segment("127.0.0.1:1")
    assert info.value.code == "RpcServiceError"
    with pytest.raises(tent.InvalidArgumentError,
                       match="bytes object is read-only"):
        tent.Request(tent.READ, b"abc", 1, 0, 3)
    with pytest.raises(tent.NotImplementedError):
        eng.export_local_segment()
    with pytest.raises(tent.InvalidArgumentError, match="^free_transfer_batch: freeBatch: unknown batch id "
                       "12345$"):
        eng.free_transfer_batch(12345)


def test_read_only_memory_registers_only_as_read_only(eng):
    frozen = bytes(patterns.pattern(9, 4096))
    with pytest.raises(tent.InvalidArgumentError,
                       match="^register_local_memory: the bytes object is "
                       "read-only and cannot be registered writable"):
        eng.register_local_memory(frozen)
    eng.register_local_memory(frozen, permission=tent.GlobalReadOnly)
    eng.unregister_local_memory(frozen)
