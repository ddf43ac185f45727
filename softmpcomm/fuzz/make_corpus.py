#!/usr/bin/env python3
"""Writes the wire decoder's seed corpus (corpus/wire_decoder/): a handful of
valid and invalid frame streams, encoded here independently of the C++ codec
(see src/wire.h for the layout). Rerun after a wire format change:

    python3 softmpcomm/fuzz/make_corpus.py
"""
import os
import struct

MAGIC, VERSION = 0x43504D53, 1
HELLO, HELLO_ACK, QUERY_REQ, QUERY_RESP = 1, 2, 3, 4
PUT_REQ, PUT_ACK, GET_REQ, GET_DATA, GET_DONE = 5, 6, 7, 8, 9
CONTROL, DATA = 0, 1


def frame(kind, payload=b"", status=0, key=0, seq=0, addr=0, length=0,
          payload_len=None, magic=MAGIC, version=VERSION):
    if payload_len is None:
        payload_len = len(payload)
    header = struct.pack("<IHHiIQQQQ", magic, version, kind, status, key, seq,
                         addr, length, payload_len)
    assert len(header) == 48
    return header + payload


def buffer_list(entries):
    out = struct.pack("<I", len(entries))
    for addr, length, numa, keys in entries:
        out += struct.pack("<QQiI", addr, length, numa, len(keys))
        out += b"".join(struct.pack("<I", k) for k in keys)
    return out


BUFFERS = buffer_list([(0x7F0000001000, 1 << 20, 0, [0x1234, 0x5678]),
                       (0x7F0000200000, 4096, -1, [0xDEADBEEF])])

SEEDS = {
    # Valid streams, as each side of a connection sees them.
    "valid_control_hello_query": frame(HELLO, b"initiator", key=CONTROL) +
    frame(QUERY_REQ),
    "valid_data_put_get": frame(HELLO, b"init", key=DATA, addr=1) +
    frame(PUT_REQ, b"0123456789abcdef", key=7, seq=1, addr=0x1000,
          length=16) + frame(GET_REQ, key=7, seq=2, addr=0x1000, length=64),
    "valid_reply_query": frame(HELLO_ACK, b"target", length=2) +
    frame(QUERY_RESP, BUFFERS),
    "valid_reply_data": frame(HELLO_ACK, b"target", length=2) +
    frame(GET_DATA, b"x" * 16, seq=2) + frame(GET_DONE, seq=2) +
    frame(PUT_ACK, seq=1),
    "valid_buffer_list": BUFFERS,
    # Invalid ones: each must be refused, none may crash or over-allocate.
    "bad_magic": b"\x42" * 48,
    "bad_version": frame(HELLO, b"a", version=2),
    "truncated_header": frame(HELLO, b"abc")[:20],
    "truncated_host_id": frame(HELLO, b"initiator")[:52],
    "hello_huge_host_id": frame(HELLO, payload_len=1 << 40),
    "hello_bad_rail": frame(HELLO, b"init", key=DATA, addr=7),
    "query_with_payload": frame(HELLO, b"i", key=CONTROL) +
    frame(QUERY_REQ, b"x"),
    "put_over_slice": frame(HELLO, b"i", key=DATA) +
    frame(PUT_REQ, length=(1 << 20) + 1, payload_len=(1 << 20) + 1),
    "get_data_over_chunk": frame(HELLO_ACK, b"t", length=1) +
    frame(GET_DATA, payload_len=(4 << 20) + 1),
    "truncated_buffer_list": BUFFERS[:-3],
}


def main():
    folder = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                          "corpus", "wire_decoder")
    os.makedirs(folder, exist_ok=True)
    for name, data in sorted(SEEDS.items()):
        with open(os.path.join(folder, name), "wb") as out:
            out.write(data)
    print("wrote %d seeds to %s" % (len(SEEDS), folder))


if __name__ == "__main__":
    main()
