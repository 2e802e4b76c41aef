#!/usr/bin/env python3
# SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
"""Downstream calls over UDP, as a stub resolver makes them. kp_server
--mode udp computes 2 ms, sends a DNS query for "s15.kp.test" from a UDP
socket of its own (unconnected, sendto/recvfrom; every other request
connected, send/recv, as glibc's resolver does) to kp_backend --udp (which
sleeps 15 ms and answers), computes 2 ms.

Backend traced too: the path goes through the datagram into the backend's
request (its thread B1 sleeping ~15 ms), the backend's requests are found
on its datagram flows and named by their query ("A s15.kp.test"), and the
wait is neither a network blind spot nor unexplained.
Backend not traced: a ~15 ms network segment naming the peer
127.0.0.1:PORT, the query named in its frame.
The traced case again with `record --all-syscalls` (the calls seen at their
entry and exit: a socket's first send binds its port in between).

Then a server blocked in recvfrom when the recording starts, in both
captures: each read recorded carries the sender of its own datagram (each
client sends its port as the payload), not one left from the read that
was in flight at the start."""
import os
import socket
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kpathlib as K  # noqa: E402
import reclib as R  # noqa: E402
from tap import CRITPATH, WORKLOADS, Tap  # noqa: E402

N = 20
MS = K.MS
QUERY = "A s15.kp.test"


def run(tap, traced_backend, extra=()):
    what = "udp traced" if traced_backend else "udp untraced"
    if extra:
        what += " " + " ".join(extra)
    backend, bf = K.start_ready([os.path.join(WORKLOADS, "kp_backend"), "--udp"])
    server, sf = K.start_ready([os.path.join(WORKLOADS, "kp_server"), "--mode", "udp",
                                "--backend", str(bf["port"])])
    port, a1, b1 = sf["port"], sf["A1"], bf["B1"]
    peer = f"127.0.0.1:{bf['port']}"
    pids = [sf["pid"], bf["pid"]] if traced_backend else [sf["pid"]]
    name = what.replace(" ", "_").replace("-", "")
    rep, path = K.record_workload(tap, name, pids, lambda: K.run_client(port, N), extra=extra)
    K.stop(server)
    K.stop(backend)
    if rep is None:
        return
    if traced_backend:
        d = R.Dump(path)
        hook = {h.get("name"): h.get("status") for h in d.of("hook")}.get("udp_recvmsg")
        reads = [r for r in d.of("sock", pid=bf["pid"], phase="exit")
                 if r.get("call") in ("recvfrom", "recvmsg") and r.get("bytes", 0) > 0
                 and not r.get("peek")]  # its peek, recv(), asks for no address
        said = [r for r in reads if r.get("rport") and r.get("raddr") == "127.0.0.1"]
        tap.ok(f"{what}: hook udp_recvmsg {hook}; {len(said)} of the backend's {len(reads)} "
               "recvfroms (unconnected socket) say their sender",
               hook == "attached" and reads and len(said) == len(reads),
               f"{[r for r in reads if r not in said][:3]}")
    reqs, mid = K.served(tap, what, rep, port, N, path)
    if not reqs:
        return
    lat = K.median_latency(reqs)
    tap.ok(f"{what}: median latency {K.fmt_ms(lat)}, expected ~19 ms", K.near(lat, 19),
           K.describe(mid))
    cpu = K.median_ns(reqs, lambda g: g.get("tid") == a1 and g.get("category") == "cpu")
    tap.ok(f"{what}: request thread CPU {K.fmt_ms(cpu)}, expected ~4 ms", K.near(cpu, 4),
           K.describe(mid))
    unexpl = K.median_ns(reqs, lambda g: g.get("category") == "unexplained")
    tap.ok(f"{what}: nothing unexplained ({K.fmt_ms(unexpl)})", unexpl <= 1 * MS,
           K.describe(mid))
    breqs = K.service_requests(rep, bf["port"])
    if traced_backend:
        sleep = K.median_ns(reqs, lambda g: g.get("tid") == b1 and
                            g.get("category") == "sleep" and K.own(g))
        tap.ok(f"{what}: the backend's sleep on the path, the request's own, "
               f"{K.fmt_ms(sleep)}, expected ~15 ms", K.near(sleep, 15), K.describe(mid))
        net = K.median_ns(reqs, lambda g: g.get("category") == "network")
        tap.ok(f"{what}: no network blind spot ({K.fmt_ms(net)})", net <= 1 * MS,
               K.describe(mid))
        inside = [q for q in reqs
                  if any(g.get("tid") == b1 and f"kp_backend:{bf['port']} {QUERY}"
                         in (g.get("frames") or []) for g in q.get("critical_path") or [])]
        tap.ok(f"{what}: the backend's steps framed 'kp_backend:{bf['port']} {QUERY}' "
               f"in {len(inside)} of {len(reqs)} requests", len(inside) >= len(reqs) - 1,
               K.describe(mid))
        named = [q for q in breqs if q.get("name") == QUERY]
        tap.ok(f"{what}: {len(named)} backend requests named {QUERY!r} on its datagram "
               f"flows ({len(breqs)} found), {N} sent", N - 1 <= len(named) <= N,
               f"names: {sorted(set(q.get('name') for q in breqs))}")
        if named:
            K.check_tiling(tap, what + " backend", named)
            bl = K.median_latency(named)
            tap.ok(f"{what}: backend request latency {K.fmt_ms(bl)}, expected ~15 ms",
                   K.near(bl, 15), K.describe(named[len(named) // 2]))
    else:
        net = K.median_ns(reqs, lambda g: g.get("category") == "network" and
                          g.get("peer") == peer)
        tap.ok(f"{what}: network time naming peer {peer}: {K.fmt_ms(net)}, expected ~15 ms",
               K.near(net, 15), K.describe(mid))
        framed = [q for q in reqs
                  if any(g.get("category") == "network" and f"{peer} {QUERY}" in
                         (g.get("frames") or []) for g in q.get("critical_path") or [])]
        tap.ok(f"{what}: the blind spot framed '{peer} {QUERY}' in {len(framed)} of "
               f"{len(reqs)} requests", len(framed) >= len(reqs) - 1, K.describe(mid))
        tap.ok(f"{what}: no request of the untraced backend reported", not breqs, "")


ECHO = """
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("127.0.0.1", 0))
print("READY port=%d" % s.getsockname()[1], flush=True)
while True:
    d, a = s.recvfrom(512)
    s.sendto(d, a)
"""


def mid_read(tap, extra=()):
    """Recording starts while the server is blocked in recvfrom."""
    what = "udp mid-read" + ("".join(" " + x for x in extra))
    server, sf = K.start_ready([sys.executable, "-c", ECHO])

    def drive():
        for _ in range(3):
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as c:
                c.bind(("127.0.0.1", 0))
                c.settimeout(5)
                c.sendto(str(c.getsockname()[1]).encode(), ("127.0.0.1", sf["port"]))
                c.recvfrom(64)

    rep, path = K.record_workload(tap, what.replace(" ", "_").replace("-", ""), [server.pid],
                                  drive, seconds=4, extra=extra)
    K.stop(server)
    if rep is None:
        return
    reads = [r for r in R.Dump(path).of("sock", pid=server.pid, phase="exit")
             if r.get("call") == "recvfrom" and r.get("bytes", 0) > 0]
    wrong = [r for r in reads if str(r.get("rport")) != r.get("payload")]
    tap.ok(f"{what}: {len(reads)} recvfroms recorded, each with its own datagram's sender",
           len(reads) >= 2 and not wrong, f"{[(r.get('rport'), r.get('payload')) for r in reads]}")


def main():
    tap = Tap()
    if not tap.ok("critpath is built", os.access(CRITPATH, os.X_OK), f"{CRITPATH} missing"):
        K.done(tap)
    run(tap, True)
    run(tap, False)
    run(tap, True, ("--all-syscalls",))
    mid_read(tap)
    mid_read(tap, ("--all-syscalls",))
    K.done(tap)


if __name__ == "__main__":
    main()
