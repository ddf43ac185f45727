#!/usr/bin/env python3
"""Request/response over one loopback TCP connection, no TENT involved.

usage: loopback_rr.py --sizes=N[,N...] [--seconds=S]

A child process answers each 16-byte request with `size` bytes; the parent
sends a request, receives the whole reply into one reused buffer, and
repeats: one request in flight, as a tebench thread at batch 1 over the
TCP transport has. Prints one line per size:

  rr <size> <GB/s> <us per request>

scripts/bench.sh puts it next to tebench's tcp rows: a drop between two
block sizes that this also shows belongs to the host's loopback TCP, not to
the transport.
"""
import argparse
import os
import socket
import sys
import time

REQUEST = b"q" * 16


def recv_exact(sock, view, size):
    got = 0
    while got < size:
        n = sock.recv_into(view[got:], size - got)
        if n == 0:
            raise ConnectionError("peer closed after %d of %d bytes" %
                                  (got, size))
        got += n


def serve(listener, size):
    conn, _ = listener.accept()
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    reply = b"r" * size
    request = bytearray(len(REQUEST))
    view = memoryview(request)
    try:
        while True:
            recv_exact(conn, view, len(REQUEST))
            conn.sendall(reply)
    except (ConnectionError, OSError):
        pass


def measure(size, seconds):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    address = listener.getsockname()
    pid = os.fork()
    if pid == 0:
        serve(listener, size)
        os._exit(0)
    listener.close()
    sock = socket.create_connection(address)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    buf = bytearray(size)
    view = memoryview(buf)

    def one():
        sock.sendall(REQUEST)
        recv_exact(sock, view, size)

    # Warm-up, as bench.sh gives every tebench case.
    end = time.monotonic() + min(0.3, seconds)
    while time.monotonic() < end:
        one()
    count = 0
    start = time.monotonic()
    end = start + seconds
    while time.monotonic() < end:
        one()
        count += 1
    elapsed = time.monotonic() - start
    sock.close()
    os.waitpid(pid, 0)
    return size * count / elapsed / 1e9, elapsed / count * 1e6


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", required=True)
    ap.add_argument("--seconds", type=float, default=1.0)
    args = ap.parse_args()
    try:
        sizes = [int(s) for s in args.sizes.split(",")]
    except ValueError:
        sys.exit("loopback_rr: --sizes=%s is not a list of byte counts" %
                 args.sizes)
    if not sizes or min(sizes) <= 0 or not args.seconds > 0:
        sys.exit("loopback_rr: --sizes=%s and --seconds=%s must be positive" %
                 (args.sizes, args.seconds))
    for size in sizes:
        gbps, us = measure(size, args.seconds)
        print("rr %d %.3f %.1f" % (size, gbps, us), flush=True)


if __name__ == "__main__":
    main()
