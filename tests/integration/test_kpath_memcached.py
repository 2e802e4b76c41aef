#!/usr/bin/env python3
# SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
"""A real third-party server: memcached (Debian) on a loopback port, traced by
PID, under a bounded load: 4 connections, each 250 `set` then `get` pairs
(1000 of each). Every request must be found, named 'get' / 'set', tiled
exactly, and none partial."""
import os
import shutil
import socket
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kpathlib as K  # noqa: E402
from tap import CRITPATH, Tap  # noqa: E402

CONNS = 4
PER_CONN = 250


def read_until(s, end):
    buf = b""
    while not buf.endswith(end):
        chunk = s.recv(4096)
        if not chunk:
            raise RuntimeError("memcached closed the connection")
        buf += chunk
    return buf


def client(port, cid):
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for i in range(PER_CONN):
            key = f"k{cid}:{i}"
            val = f"value-{cid}-{i}".encode()
            s.sendall(b"set %s 0 0 %d\r\n%s\r\n" % (key.encode(), len(val), val))
            if read_until(s, b"\r\n") != b"STORED\r\n":
                raise RuntimeError(f"set {key} not stored")
            s.sendall(b"get %s\r\n" % key.encode())
            if val not in read_until(s, b"END\r\n"):
                raise RuntimeError(f"get {key} returned something else")


def main():
    tap = Tap()
    if not shutil.which("memcached"):
        tap.skip("memcached", "memcached not installed (apt-get install memcached)")
        K.done(tap)
    if not tap.ok("critpath is built", os.access(CRITPATH, os.X_OK), f"{CRITPATH} missing"):
        K.done(tap)
    port = K.free_port()
    server = K.spawn(["memcached", "-l", "127.0.0.1", "-p", str(port), "-U", "0", "-t", "2",
                      "-m", "64", "-u", "root"], stdout=subprocess.DEVNULL)
    K.wait_port(port, server)

    rep, path = K.record_workload(
        tap, "memcached", [server.pid],
        lambda: K.in_parallel([lambda c=c: client(port, c) for c in range(CONNS)]), seconds=10)
    K.stop(server)
    if rep is None:
        K.done(tap)
    reqs = K.service_requests(rep, port)
    K.check_tiling(tap, "memcached", rep.get("requests", []))
    by_name = {}
    for q in reqs:
        by_name[q.get("name")] = by_name.get(q.get("name"), 0) + 1
    n = CONNS * PER_CONN
    for cmd in ("get", "set"):
        tap.ok(f"memcached: {by_name.get(cmd, 0)} '{cmd}' requests of memcached:{port} found, "
               f"{n} sent", n * 0.99 <= by_name.get(cmd, 0) <= n,
               f"requests by name: {by_name}\nservices: "
               f"{sorted({q.get('service') for q in rep.get('requests', [])})}\nrecording {path}")
    tap.ok("memcached: service named 'memcached:PORT'",
           reqs and all(q.get("service") == f"memcached:{port}" for q in reqs),
           f"services: {sorted({q.get('service') for q in reqs})}")
    partial = sum(1 for q in reqs if q.get("partial"))
    tap.ok("memcached: no request partial (no loss at this load)", partial == 0,
           f"{partial} partial; warnings: {(rep.get('warnings') or [])[:5]}")
    slow = [q for q in reqs if q["latency_ns"] > 50 * K.MS]
    tap.ok("memcached: request latencies are plausible (none over 50 ms)", not slow,
           "\n".join(K.describe(q) for q in slow[:3]))
    K.done(tap)


if __name__ == "__main__":
    main()
