#!/usr/bin/env python3
"""The target process of the two-process tests (conftest.Target starts it).

It brings up a classic engine the way the guide's examples do, registers a
numpy array holding pattern(7), prints
``READY <segment> <address> <nbytes>`` and then answers one command per
stdin line until stdin closes:

  SHA             -> ``SHA <sha256 of the array>``
  NOTIFY <secs>   -> ``NOTIFY <name> <msg>`` for the first notification
                     received within <secs>, else ``NOTIFY-NONE``
"""
import hashlib
import sys
import time

import numpy as np
from mooncake import engine

import patterns


def main():
    protocol, size = sys.argv[1], int(sys.argv[2])
    # Optional third argument: a metadata connection string ("redis://...",
    # "http://host:port/metadata"); p2p when absent.
    metadata = sys.argv[3] if len(sys.argv) > 3 else "P2PHANDSHAKE"
    eng = engine.TransferEngine()
    rc = eng.initialize(hostname="127.0.0.1",
                        metadata_server=metadata,
                        protocol=protocol,
                        device_name="")
    if rc != 0:
        print("FAILED initialize returned %d" % rc, flush=True)
        return 1
    array = np.frombuffer(bytearray(patterns.pattern(7, size)),
                          dtype=np.uint8)
    eng.register_memory(array)
    print("READY %s %d %d" % (eng.get_segment_name(), array.ctypes.data,
                              array.nbytes), flush=True)
    for line in sys.stdin:
        words = line.split()
        if words == ["SHA"]:
            print("SHA " + hashlib.sha256(array.tobytes()).hexdigest(),
                  flush=True)
        elif words and words[0] == "NOTIFY":
            end = time.monotonic() + float(words[1])
            found = []
            while not found and time.monotonic() < end:
                found = eng.get_notifies()
                time.sleep(0.01)  # polling back-off with a deadline
            if found:
                print("NOTIFY %s %s" % (found[0].name, found[0].msg),
                      flush=True)
            else:
                print("NOTIFY-NONE", flush=True)
    eng.unregister_memory(array)
    eng.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
