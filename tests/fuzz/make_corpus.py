#!/usr/bin/env python3
"""Writes the seed corpus of each fuzz target into fuzz/corpus/<target>/.

The seeds are built here from the wire formats' descriptions, not by the
C++ encoders, so a bug in an encoder cannot hide in the corpus. Run it from
anywhere; it rewrites the folders it owns.
"""
import json
import os
import struct

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")


def write(target, name, data):
    folder = os.path.join(ROOT, target)
    os.makedirs(folder, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(folder, name), "wb") as f:
        f.write(data)


def ports():
    for name, text in [("min", "1"), ("max", "65535"), ("zero", "0"),
                       ("over", "65536"), ("negative", "-1"), ("plus", "+80"),
                       ("space", " 80"), ("suffix", "80x"), ("empty", ""),
                       ("leading_zeros", "000080"),
                       ("huge", "99999999999999999999")]:
        write("mpcomm_port", name, text)


def endpoints():
    for name, text in [("v1", "v1:10.0.0.1:13579"),
                       ("no_version", "10.0.0.1:13579"),
                       ("v2", "v2:10.0.0.1:1"), ("ipv6", "[::1]:80"),
                       ("port0", "v1:host:0"), ("host_like_version", "vm01:22"),
                       ("empty_host", "v1::80"), ("four_parts", "a:b:c:d"),
                       ("empty", ""), ("name", "v1:node-7.example_net:65535")]:
        write("mpcomm_endpoint", name, text)


def configs():
    write("config_loader", "engine", json.dumps({
        "metadata_type": "p2p", "rpc_server_port": 15000,
        "rpc": {"idle_timeout_ms": 60000, "frame_timeout_ms": 10000,
                "max_connections": 256, "timeout_ms": 5000},
        "transports": {"tcp": {"enable": True, "timeout_ms": 5000,
                               "workers": 4},
                       "mpcomm": {"enable": False}},
        "policy": [{"name": "p", "transports": ["tcp"]}]}))
    write("config_loader", "empty_object", "{}")
    write("config_loader", "array", "[1, 2]")
    write("config_loader", "unterminated", '{"a": {"b": ')
    write("config_loader", "trailing", '{"a": 1} x')
    write("config_loader", "comments", '// c\n{"a": /* d */ 1}')
    write("config_loader", "deep", '{"a":' * 64 + "1" + "}" * 64)
    # One level past rpc/max_json_depth's default, and the probe's 1,002.
    write("config_loader", "too_deep", '{"a":' * 65 + "1" + "}" * 65)
    write("config_loader", "probe_depth", "[" * 1002)
    write("config_loader", "long_key", json.dumps({"k" * 65536: 1}))
    write("config_loader", "long_number", '{"n": ' + "9" * 4096 + "}")
    write("config_loader", "brackets_in_strings",
          json.dumps({"s": "[" * 2000, "c": "{" * 2000}))
    write("config_loader", "brackets_in_comment",
          "// " + "[" * 2000 + "\n{\"a\": 1}")
    write("config_loader", "numbers",
          '{"i": -9223372036854775808, "u": 18446744073709551615, '
          '"d": 1e308, "e": -0.0, "s": "\\u00e9\\ud83d\\ude00"}')


def segments():
    good = {"name": "10.0.0.1:15000", "type": "memory",
            "buffers": [{"addr": 4096, "length": 65536, "location": "cpu:0",
                         "transports": [7, 12]},
                        {"addr": 18446744073709547520, "length": 4096,
                         "location": "cpu:1", "transports": [7]}],
            "transport_attrs": {"7": "10.0.0.1:40123",
                                "12": "v1:10.0.0.1:13579"}}
    write("segment_decoder", "good", json.dumps(good))
    write("segment_decoder", "file", '{"name": "f", "type": "file"}')
    wraps = json.loads(json.dumps(good))
    wraps["buffers"][1]["length"] = 4097
    write("segment_decoder", "wraps", json.dumps(wraps))
    zero = json.loads(json.dumps(good))
    zero["buffers"][0]["length"] = 0
    write("segment_decoder", "zero_length", json.dumps(zero))
    badkey = json.loads(json.dumps(good))
    badkey["transport_attrs"] = {"07": "x", "tcp": "y"}
    write("segment_decoder", "bad_attr_key", json.dumps(badkey))
    write("segment_decoder", "not_object", "[]")
    write("segment_decoder", "types", '{"name": 1, "buffers": {}}')
    # At and one past metadata/max_segment_buffers as the harness sets it
    # (64), and more values than its rpc/max_json_values (4096).
    for name, count in [("at_buffer_cap", 64), ("over_buffer_cap", 65),
                        ("many_buffers", 2000)]:
        many = {"name": "m", "type": "memory",
                "buffers": [{"addr": (i + 1) << 13, "length": 4096,
                             "transports": [0]} for i in range(count)]}
        write("segment_decoder", name, json.dumps(many))
    write("segment_decoder", "probe_depth", "[" * 1002)
    write("segment_decoder", "deep_in_buffer",
          '{"name": "d", "buffers": [{"addr": 4096, "length": 1, '
          '"location": ' + "[" * 70 + "]" * 70 + "}]}")
    write("segment_decoder", "long_name", json.dumps({"name": "n" * 4096}))
    write("segment_decoder", "long_location", json.dumps(
        {"name": "l", "buffers": [{"addr": 1, "length": 1,
                                   "location": "c" * 4096}]}))
    write("segment_decoder", "wrong_types", json.dumps(
        {"name": "w", "incarnation": "7", "registration_epoch": -1,
         "machine_id": [], "buffers": [{"addr": "4096", "length": 1.5}]}))


RPC_VERSION = 1


def header(length, version=RPC_VERSION):
    return struct.pack(">BI", version, length)


def frame(payload, version=RPC_VERSION):
    if isinstance(payload, str):
        payload = payload.encode()
    return header(len(payload), version) + payload


def rpc_frames():
    req = '{"op":"GetSegmentDesc"}'
    write("rpc_frame", "one_request", frame(req))
    write("rpc_frame", "two_requests", frame(req) + frame(req))
    write("rpc_frame", "zero_length", header(0))
    write("rpc_frame", "oversized", header(0xFFFFFFFF) + b"{")
    write("rpc_frame", "truncated", header(100) + b'{"op":"Get')
    write("rpc_frame", "half_header", b"\x01\x00\x00")
    write("rpc_frame", "other_version", frame(req, 9))
    write("rpc_frame", "version_zero", frame(req, 0))
    write("rpc_frame", "good_then_other_version", frame(req) + frame(req, 2))
    write("rpc_frame", "unknown_op", frame('{"op":"Bogus"}'))
    write("rpc_frame", "no_op", frame('{"opx":1}'))
    write("rpc_frame", "not_object", frame("[1]"))
    write("rpc_frame", "bad_json", frame("{not json"))
    write("rpc_frame", "padded", frame(req + " " * 1000))
    # The probe's frame: 1,002 '[' in 1,006 bytes.
    write("rpc_frame", "probe_depth", frame("[" * 1002))
    write("rpc_frame", "deep_objects", frame('{"a":' * 200))
    write("rpc_frame", "op_not_string", frame('{"op":{"op":[]}}'))
    write("rpc_frame", "many_values", frame("[" + "0," * 500 + "0]"))


def tcp_headers():
    req_magic, rep_magic = 0x54454E54, 0x54524550

    version = 1

    # magic, version, op, two reserved zero bytes, addr, length
    def request(op, addr, length, magic=req_magic, ver=version, reserved=0):
        return struct.pack(">IBBHQQ", magic, ver, op, reserved, addr, length)

    # magic, version, a reserved zero byte, code, length
    def reply(code, length, magic=rep_magic, ver=version, reserved=0):
        return struct.pack(">IBBHQ", magic, ver, reserved, code, length)

    write("tcp_wire", "write", request(2, 0x7F0000001000, 65536))
    write("tcp_wire", "read", request(1, 0x7F0000001000, 16 << 20))
    write("tcp_wire", "over_cap", request(2, 0, (16 << 20) + 1))
    write("tcp_wire", "bad_op", request(9, 0, 16))
    write("tcp_wire", "bad_magic", request(2, 0, 16, 0xDEADBEEF))
    write("tcp_wire", "reply_ok", reply(0, 4096) + bytes(8))
    write("tcp_wire", "reply_bad_range", reply(1, 0) + bytes(8))
    write("tcp_wire", "reply_huge", reply(0, 1 << 40) + bytes(8))
    write("tcp_wire", "short", b"TENT")
    write("tcp_wire", "other_version", request(2, 0, 16, ver=9))
    write("tcp_wire", "version_zero", request(2, 0, 16, ver=0))
    write("tcp_wire", "reserved_set", request(2, 0, 16, reserved=1))
    write("tcp_wire", "reply_other_version", reply(0, 16, ver=9) + bytes(8))


def notification_records():
    def notify(**fields):
        record = {"op": "Notify", "from": "10.0.0.1:15000", "name": "6e",
                  "msg": "6869"}
        record.update(fields)
        return json.dumps(record)

    write("notification_record", "good", notify())
    write("notification_record", "empty_msg", notify(msg=""))
    write("notification_record", "odd_hex", notify(msg="abc"))
    write("notification_record", "bad_hex", notify(name="zz"))
    write("notification_record", "long_from", notify(**{"from": "f" * 513}))
    write("notification_record", "at_from", notify(**{"from": "f" * 512}))
    write("notification_record", "long_msg", notify(msg="ab" * 65536))
    write("notification_record", "wrong_types",
          notify(**{"from": 7, "name": [], "msg": {}}))
    write("notification_record", "probe_depth", "[" * 1002)
    write("notification_record", "deep_msg",
          '{"op":"Notify","from":"a","name":"","msg":' + "[" * 100 + "}")
    write("notification_record", "not_object", '"Notify"')


if __name__ == "__main__":
    ports()
    endpoints()
    configs()
    segments()
    rpc_frames()
    tcp_headers()
    notification_records()
