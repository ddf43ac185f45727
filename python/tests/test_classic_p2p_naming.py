"""P2P naming as upstream: engines initialised with the same "host:port"
and P2PHANDSHAKE all start; the port is not bound, get_rpc_port() reports
each engine's own, and a peer reaches each by the name it reports
("host:<that port>")."""
import socket

import numpy as np
from mooncake import engine

import patterns


def test_engines_given_one_name_start_and_are_reached_by_theirs():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    given = "127.0.0.1:%d" % port
    size = 1 << 16
    targets, served = [], []
    try:
        for seed in (21, 22):
            eng = engine.TransferEngine()
            assert eng.initialize(given, "P2PHANDSHAKE", "tcp", "") == 0
            targets.append(eng)
            buf = np.frombuffer(bytearray(patterns.pattern(seed, size)),
                                dtype=np.uint8)
            eng.register_memory(buf)
            served.append((seed, buf))
        ports = [eng.get_rpc_port() for eng in targets]
        assert len(set(ports)) == 2 and port not in ports
        names = [eng.get_segment_name() for eng in targets]
        assert names == ["127.0.0.1:%d" % p for p in ports]
        initiator = engine.TransferEngine()
        assert initiator.initialize("127.0.0.1", "P2PHANDSHAKE", "tcp",
                                    "") == 0
        local = np.zeros(size, dtype=np.uint8)
        initiator.register_memory(local)
        for name, (seed, buf) in zip(names, served):
            local[:] = 0
            assert initiator.transfer_sync_read(name, local,
                                                buf.ctypes.data) == 0
            assert local.tobytes() == patterns.pattern(seed, size)
        initiator.close()
    finally:
        for eng in targets:
            eng.close()
