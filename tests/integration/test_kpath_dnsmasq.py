#!/usr/bin/env python3
# SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
"""A real third-party UDP server: dnsmasq (Debian's dnsmasq-base) answering
DNS on a loopback port from its own records, traced by PID, under a bounded
load: 4 clients, each with a socket of its own, 150 queries each (A and
AAAA for three names, in turn). Every query must be found as a request of
dnsmasq:PORT on its datagram flow, named by its type and name, tiled
exactly, none partial, and own work (dnsmasq's cpu) on its path.

Then dnsmasq as a forwarder (no cache) in front of kp_backend --udp, both
traced: each query "c5.kp.test" costs the backend 5 ms of CPU. dnsmasq
sends it upstream from a socket of its own on a random port; the path of
each of its requests goes into the backend's work for that query, framed
with the call ("kp_backend:PORT A c5.kp.test"), as its own work."""
import os
import shutil
import socket
import struct
import subprocess
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kpathlib as K  # noqa: E402
from tap import CRITPATH, WORKLOADS, Tap  # noqa: E402

CLIENTS = 4
PER_CLIENT = 150
NAMES = ("www.kp.test", "api.kp.test", "db.kp.test")
TYPES = ((1, "A"), (28, "AAAA"))


def query(qid, name, qtype):
    q = struct.pack(">HHHHHH", qid, 0x0100, 1, 0, 0, 0)
    for label in name.split("."):
        q += bytes([len(label)]) + label.encode()
    return q + b"\0" + struct.pack(">HH", qtype, 1)


def client(port, cid, sent, lock):
    """Sends PER_CLIENT queries one after the other; counts the answered ones
    by name into sent."""
    mine = {}
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.settimeout(5)
            for i in range(PER_CLIENT):
                name = NAMES[i % len(NAMES)]
                qtype, tname = TYPES[(i // len(NAMES)) % len(TYPES)]
                qid = (cid << 12 | i) & 0xffff
                s.sendto(query(qid, name, qtype), ("127.0.0.1", port))
                answer, _ = s.recvfrom(512)
                if struct.unpack(">H", answer[:2])[0] != qid or not answer[2] & 0x80:
                    raise RuntimeError(f"query {qid}: not its answer")
                mine[f"{tname} {name}"] = mine.get(f"{tname} {name}", 0) + 1
    finally:
        with lock:
            for k, v in mine.items():
                sent[k] = sent.get(k, 0) + v


FWD_N = 30
FWD_QUERY = "A c5.kp.test"


def dnsmasq_argv(port, *extra):
    return ["dnsmasq", "--keep-in-foreground", "--conf-file=/dev/null", "--no-resolv",
            "--no-hosts", "--bind-interfaces", "--listen-address=127.0.0.1", f"--port={port}",
            "--user=root", "--pid-file=", *extra]


def forwarder(tap):
    """dnsmasq forwarding every query to a traced kp_backend --udp."""
    backend, bf = K.start_ready([os.path.join(WORKLOADS, "kp_backend"), "--udp"])
    port = K.free_port()
    server = K.spawn(dnsmasq_argv(port, "--cache-size=0", f"--server=127.0.0.1#{bf['port']}"),
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    K.wait_port(port, server)

    def drive():
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.settimeout(5)
            for i in range(FWD_N):
                s.sendto(query(i, "c5.kp.test", 1), ("127.0.0.1", port))
                if struct.unpack(">H", s.recvfrom(512)[0][:2])[0] != i:
                    raise RuntimeError(f"query {i}: not its answer")

    rep, path = K.record_workload(tap, "dnsmasq forwarding", [server.pid, bf["pid"]], drive)
    K.stop(server)
    K.stop(backend)
    if rep is None:
        return
    what = "dnsmasq forwarding"
    reqs = [q for q in K.service_requests(rep, port) if q.get("name") == FWD_QUERY]
    K.check_tiling(tap, what, rep.get("requests", []))
    tap.ok(f"{what}: {len(reqs)} '{FWD_QUERY}' requests of dnsmasq:{port} found, {FWD_N} sent",
           FWD_N - 1 <= len(reqs) <= FWD_N, f"recording {path}")
    if not reqs:
        return
    mid = sorted(reqs, key=lambda q: q["latency_ns"])[len(reqs) // 2]
    call = f"kp_backend:{bf['port']} {FWD_QUERY}"
    work = K.median_ns(reqs, lambda g: g.get("tid") == bf["B1"] and g.get("category") == "cpu"
                       and K.own(g) and call in (g.get("frames") or []))
    tap.ok(f"{what}: the backend's cpu for the query on the path, own, framed '{call}': "
           f"{K.fmt_ms(work)}, expected ~5 ms", K.near(work, 5, abs_ms=1.5), K.describe(mid))
    net = K.median_ns(reqs, lambda g: g.get("category") == "network")
    tap.ok(f"{what}: no network blind spot ({K.fmt_ms(net)})", net <= 0.5 * K.MS,
           K.describe(mid))
    own = K.median_own_latency(reqs)
    tap.ok(f"{what}: own latency {K.fmt_ms(own)}, expected ~5 ms",
           K.near(own, 5, abs_ms=1.5), K.describe(mid))


def main():
    tap = Tap()
    if not shutil.which("dnsmasq"):
        tap.skip("dnsmasq", "dnsmasq not installed (apt-get install dnsmasq-base)")
        K.done(tap)
    if not tap.ok("critpath is built", os.access(CRITPATH, os.X_OK), f"{CRITPATH} missing"):
        K.done(tap)
    port = K.free_port()
    server = K.spawn(dnsmasq_argv(port, "--address=/kp.test/127.0.0.7",
                                  "--address=/kp.test/::7"),
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    K.wait_port(port, server)  # dnsmasq listens on TCP too
    sent, lock = {}, threading.Lock()
    rep, path = K.record_workload(
        tap, "dnsmasq", [server.pid],
        lambda: K.in_parallel([lambda c=c: client(port, c, sent, lock) for c in range(CLIENTS)]),
        seconds=10)
    K.stop(server)
    if rep is None:
        K.done(tap)
    reqs = K.service_requests(rep, port)
    K.check_tiling(tap, "dnsmasq", rep.get("requests", []))
    by_name = {}
    for q in reqs:
        by_name[q.get("name")] = by_name.get(q.get("name"), 0) + 1
    for name, n in sorted(sent.items()):
        tap.ok(f"dnsmasq: {by_name.get(name, 0)} '{name}' requests of dnsmasq:{port} found, "
               f"{n} sent", n * 0.99 <= by_name.get(name, 0) <= n,
               f"requests by name: {by_name}\nrecording {path}")
    tap.ok("dnsmasq: service named 'dnsmasq:PORT'",
           reqs and all(q.get("service") == f"dnsmasq:{port}" for q in reqs),
           f"services: {sorted({q.get('service') for q in reqs})}")
    partial = sum(1 for q in reqs if q.get("partial"))
    tap.ok("dnsmasq: no request partial (no loss at this load)", partial == 0,
           f"{partial} partial; warnings: {(rep.get('warnings') or [])[:5]}")
    unknown = [w for w in rep.get("warnings") or [] if "senders not known" in str(w)]
    tap.ok("dnsmasq: every datagram read says its sender (no 'senders not known' warning)",
           not unknown, f"{unknown}")
    pid = server.pid
    owned = sum(1 for q in reqs
                if any(g.get("category") == "cpu" and g.get("pid") == pid
                       and not g.get("interference") for g in q.get("critical_path") or []))
    tap.ok(f"dnsmasq: dnsmasq's own cpu on the path of {owned} of {len(reqs)} requests",
           reqs and owned >= len(reqs) * 0.95,
           "\n".join(K.describe(q) for q in reqs[:2]))
    slow = [q for q in reqs if q["latency_ns"] > 50 * K.MS]
    tap.ok("dnsmasq: request latencies are plausible (none over 50 ms)", not slow,
           "\n".join(K.describe(q) for q in slow[:3]))
    forwarder(tap)
    K.done(tap)


if __name__ == "__main__":
    main()
