"""The classic API's refusals return classic's sentinels and log a reason
that names the method and the bad value; every classic method is
present."""
import json
import threading
import time

import numpy as np
import pytest
from mooncake import engine

from conftest import Target, make_initiator

# Every method Mooncake's classic TransferEngine binds.
CLASSIC_METHODS = [
    "initialize", "initialize_ext", "get_rpc_port",
    "allocate_managed_buffer", "free_managed_buffer", "transfer_sync_write",
    "transfer_sync_read", "batch_transfer_sync_write",
    "batch_transfer_sync_read", "batch_transfer_async_write",
    "batch_transfer_async_read", "transfer_sync", "batch_transfer_sync",
    "batch_transfer_async", "transfer_write_on_cuda", "transfer_read_on_cuda",
    "batch_transfer_write_on_cuda", "batch_transfer_read_on_cuda",
    "get_batch_transfer_status", "transfer_submit_write",
    "transfer_check_status", "write_bytes_to_buffer",
    "read_bytes_from_buffer", "register_memory", "unregister_memory",
    "batch_register_memory", "batch_unregister_memory", "get_local_topology",
    "get_first_buffer_address", "warmup_efa_segment", "get_notifies",
    "send_probe", "get_engine", "get_engine_ptr"
]
CUDA_METHODS = [m for m in CLASSIC_METHODS if m.endswith("_on_cuda")]


@pytest.fixture(scope="module")
def tcp_pair():
    target = Target("tcp")
    eng = make_initiator("tcp")
    yield eng, target
    eng.close()
    assert target.close() == 0


def test_every_classic_method_is_present():
    missing = [m for m in CLASSIC_METHODS
               if not hasattr(engine.TransferEngine, m)]
    assert missing == []
    assert int(engine.TransferOpcode.Read) == 0
    assert int(engine.TransferOpcode.Write) == 1


@pytest.mark.parametrize("method", CUDA_METHODS)
def test_cuda_methods_raise_not_implemented_naming_themselves(method):
    eng = engine.TransferEngine()
    with pytest.raises(NotImplementedError, match="^%s: " % method) as info:
        getattr(eng, method)("peer", 0, 0, 0)
    assert isinstance(info.value, engine.TransferError)
    assert info.value.code == "NotImplemented"


def logged(capfd):
    """What the module logged (glog writes to the process's stderr)."""
    return capfd.readouterr().err


def test_read_only_buffer_is_refused_as_a_read_destination(tcp_pair, capfd):
    eng, target = tcp_pair
    capfd.readouterr()
    assert eng.transfer_sync_read(target.segment, bytes(16),
                                  target.addr) == -1
    assert ("transfer_sync_read: the bytes object is read-only and cannot "
            "be the destination of a READ") in logged(capfd)
    frozen = np.zeros(16, dtype=np.uint8)
    frozen.flags.writeable = False
    assert eng.transfer_sync_read(target.segment, frozen, target.addr) == -1
    assert "ndarray object is read-only" in logged(capfd)


def test_length_past_the_registered_range_is_refused(tcp_pair, capfd):
    eng, target = tcp_pair
    local = np.zeros(target.size + 4096, dtype=np.uint8)
    assert eng.register_memory(local) == 0
    past = target.size + 1
    capfd.readouterr()
    assert eng.transfer_sync_read(target.segment, local, target.addr,
                                  past) == -1
    text = logged(capfd)
    assert "range [0x%x, +%d)" % (target.addr, past) in text
    assert "outside every buffer segment '%s' registered" % (
        target.segment) in text
    # Longer than the Python object itself.
    assert eng.transfer_sync_read(target.segment, local, target.addr,
                                  local.nbytes + 1) == -1
    assert "length %d exceeds the ndarray object's %d bytes" % (
        local.nbytes + 1, local.nbytes) in logged(capfd)
    assert eng.unregister_memory(local) == 0
    # Local memory that is not registered.
    assert eng.transfer_sync_write(target.segment, local, target.addr,
                                   16) == -1
    assert "local range [0x%x, +16) is not inside registered" % (
        local.ctypes.data) in logged(capfd)


def test_unknown_segment_and_bad_names_are_refused(tcp_pair, capfd):
    eng, _ = tcp_pair
    local = np.zeros(16, dtype=np.uint8)
    assert eng.register_memory(local) == 0
    capfd.readouterr()
    assert eng.transfer_sync_write("127.0.0.1:1", local, 0, 16) == -1
    assert "transfer_sync_write: " in logged(capfd)
    assert eng.batch_transfer_sync_write("127.0.0.1:1", [local], [0, 1],
                                         [16]) == -1
    assert ("batch_transfer_sync_write: buffers (1), peer_buffer_addresses "
            "(2) and lengths (1) differ in length") in logged(capfd)
    assert eng.unregister_memory(local) == 0
    fresh = engine.TransferEngine()
    assert fresh.initialize("127.0.0.1", "P2PHANDSHAKE", "rdma", "") == -1
    assert ("initialize: protocol 'rdma' is not a transport of this "
            "build") in logged(capfd)
    assert fresh.initialize("127.0.0.1", "zk://10.0.0.1:2181", "tcp",
                            "") == -1
    assert "metadata type 'zk' is not supported" in logged(capfd)


def test_closed_engine_answers_minus_one_naming_the_method(capfd):
    eng = make_initiator("tcp")
    eng.close()
    capfd.readouterr()
    assert eng.transfer_sync_read("127.0.0.1:1", bytearray(8), 0) == -1
    assert ("transfer_sync_read: the TransferEngine is closed"
            in logged(capfd))
    assert eng.get_rpc_port() == -1
    assert "get_rpc_port: the TransferEngine is closed" in logged(capfd)


def test_a_thread_keeps_running_while_another_waits_in_a_transfer():
    """The target is stopped (SIGSTOP), so the WRITE waits for the TCP
    transport's bound (1500 ms here). Python code in another thread must
    run while it waits: the call releases the GIL."""
    conf = {"transports": {"tcp": {"enable": True, "timeout_ms": 1500},
                           "mpcomm": {"enable": False}}}
    target = Target("tcp")
    eng = make_initiator("tcp", tent_conf=json.dumps(conf))
    try:
        src = np.ones(1 << 16, dtype=np.uint8)
        eng.register_memory(src)
        # Opens and caches the segment while the target still answers.
        assert eng.transfer_sync_write(target.segment, src, target.addr) == 0
        target.stop()
        window = {}

        def blocked():
            window["enter"] = time.monotonic()
            window["rc"] = eng.transfer_sync_write(target.segment, src,
                                                   target.addr)
            window["exit"] = time.monotonic()

        ticks = []
        waiter = threading.Thread(target=blocked)
        waiter.start()
        while waiter.is_alive():
            ticks.append(time.monotonic())
            waiter.join(timeout=0.01)
        assert window["rc"] == -1
        assert window["exit"] - window["enter"] >= 1.0, window
        inside = [t for t in ticks
                  if window["enter"] + 0.2 < t < window["exit"] - 0.2]
        # At 10 ms per tick, ~100 ticks fit in the window; with the GIL
        # held across the wait there would be none.
        assert len(inside) >= 20, (len(inside), window)
    finally:
        eng.close()
        target.close()
