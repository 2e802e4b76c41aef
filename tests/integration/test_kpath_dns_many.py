#!/usr/bin/env python3
# SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
"""DNS servers answering many clients on one UDP socket at once, so that
they read several queries in a row from it before they answer any.

dnsmasq (Debian's dnsmasq-base) as a forwarder without a cache in front of
an upstream in this test (a Python UDP server, not traced, that answers
every query 5 ms after it came, a query's wait not holding up the next
one's), traced by PID; 8 clients, each with a socket of its own, send 100
queries each, one after the other, every one for a name of its own
('A c3-q17.kp.test'). While the upstream holds the queries, the clients'
next ones queue on dnsmasq's socket.

Then unbound (Debian's unbound) on a loopback port with two threads
sharing its one UDP socket (so-reuseport off), answering the same names
from local-data records, under 8 clients that each ask for an A and an
AAAA record of a name at once, as glibc's getaddrinfo does (50 names, 100
queries each). unbound answers each datagram before it reads the next,
but its two threads read the socket in turn: one's read can follow the
other's.

Every query must be found as a request of the server's service ('dnsmasq:PORT',
'unbound:PORT'), named by its type and name: at least 99% named so, none
named just 'request', the count within 1% of what was sent; every request
tiles exactly."""
import os
import shutil
import socket
import struct
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kpathlib as K  # noqa: E402
from tap import CRITPATH, Tap  # noqa: E402
from test_kpath_dnsmasq import dnsmasq_argv, query  # noqa: E402

CLIENTS = 8
PER_CLIENT = 100
DELAY_MS = 5


def qname(c, i):
    return f"c{c}-q{i}.kp.test"


# The upstream: answers each query DELAY_MS after it came (A 127.0.0.7),
# from a heap of due answers, so that queries wait side by side.
UPSTREAM = r"""
import heapq, select, socket, struct, sys, time
delay = float(sys.argv[1]) / 1000
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("127.0.0.1", 0))
print("READY port=%d" % s.getsockname()[1], flush=True)
due, n = [], 0
while True:
    now = time.monotonic()
    while due and due[0][0] <= now:
        _, _, data, addr = heapq.heappop(due)
        s.sendto(data, addr)
    r, _, _ = select.select([s], [], [], max(0.0, due[0][0] - now) if due else None)
    if not r:
        continue
    q, addr = s.recvfrom(4096)
    if len(q) < 12:
        continue
    end = 12
    while q[end]:
        end += q[end] + 1
    end += 5
    answer = (q[:2] + struct.pack(">HHHHH", 0x8180, 1, 1, 0, 0) + q[12:end] +
              b"\xc0\x0c" + struct.pack(">HHIH", 1, 1, 60, 4) + bytes([127, 0, 0, 7]))
    n += 1
    heapq.heappush(due, (time.monotonic() + delay, n, answer, addr))
"""


def client(port, cid, sent, lock, pairs=False):
    """PER_CLIENT queries, each for a name of its own, one after the other;
    pairs: an A and an AAAA query for each of PER_CLIENT / 2 names sent
    together, then both answers read (as glibc's getaddrinfo does). Counts
    the answered ones into sent."""
    n = 0
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.settimeout(5)
            batches = ([[(i, 1)] for i in range(PER_CLIENT)] if not pairs else
                       [[(i, 1), (i, 28)] for i in range(PER_CLIENT // 2)])
            for k, batch in enumerate(batches):
                want = {}
                for j, (i, qtype) in enumerate(batch):
                    qid = (cid << 12 | k << 1 | j) & 0xffff
                    want[qid] = qname(cid, i)
                    s.sendto(query(qid, qname(cid, i), qtype), ("127.0.0.1", port))
                while want:
                    answer, _ = s.recvfrom(4096)
                    name = want.pop(struct.unpack(">H", answer[:2])[0], None)
                    if name is None:
                        continue
                    if not answer[2] & 0x80 or answer[3] & 0x0f:
                        raise RuntimeError(f"{name}: answer flags {answer[2:4].hex()}")
                    n += 1
    finally:
        with lock:
            sent.append(n)


def drive(port, sent, lock, pairs=False):
    K.in_parallel([lambda c=c: client(port, c, sent, lock, pairs) for c in range(CLIENTS)])


def check(tap, what, rep, port, path, nsent, service, pairs=False):
    K.check_tiling(tap, what, rep.get("requests", []))
    reqs = K.service_requests(rep, port)
    expect = ({f"A {qname(c, i)}" for c in range(CLIENTS) for i in range(PER_CLIENT)}
              if not pairs else
              {f"{t} {qname(c, i)}" for c in range(CLIENTS) for i in range(PER_CLIENT // 2)
               for t in ("A", "AAAA")})
    named = [q for q in reqs if q.get("name") in expect]
    unnamed = [q for q in reqs if q.get("name") == "request"]
    other = [q for q in reqs if q not in named and q not in unnamed]
    names = {}
    for q in named:
        names[q["name"]] = names.get(q["name"], 0) + 1
    twice = sorted(n for n, k in names.items() if k > 1)
    chk = tap.ok
    chk(f"{what}: {len(reqs)} requests of {service}:{port} found, {nsent} queries sent",
           nsent * 0.99 <= len(reqs) <= nsent * 1.01,
           f"services: {sorted({q.get('service') for q in rep.get('requests', [])})}\n"
           f"recording {path}")
    chk(f"{what}: {len(named)} of {len(reqs)} requests named by their query "
           f"('{'A' if not pairs else 'A/AAAA'} cN-qM.kp.test'), at least 99%",
           reqs and len(named) >= 0.99 * nsent,
           f"{len(unnamed)} named 'request', {len(other)} otherwise "
           f"({sorted({q.get('name') for q in other})[:5]})\n" +
           "\n".join(K.describe(q, 6) for q in (unnamed + other)[:2]))
    chk(f"{what}: no request named just 'request' ({len(unnamed)})", not unnamed,
           f"ids: {[q.get('id') for q in unnamed[:10]]}")
    chk(f"{what}: every query's request found once ({len(names)} distinct names, "
           f"{len(twice)} twice or more)", len(names) >= 0.99 * nsent and not twice,
           f"twice: {twice[:5]}")
    partial = sum(1 for q in reqs if q.get("partial"))
    tap.ok(f"{what}: no request partial (no loss at this load)", partial == 0,
           f"{partial} partial; warnings: {(rep.get('warnings') or [])[:5]}")
    return reqs


def dnsmasq_phase(tap):
    up, uf = K.start_ready([sys.executable, "-c", UPSTREAM, str(DELAY_MS)])
    port = K.free_port()
    server = K.spawn(dnsmasq_argv(port, "--cache-size=0", "--dns-forward-max=1000",
                                  f"--server=127.0.0.1#{uf['port']}"),
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    K.wait_port(port, server)
    sent, lock, took = [], threading.Lock(), []

    def load():
        t0 = time.time()
        drive(port, sent, lock)
        took.append(time.time() - t0)
    rep, path = K.record_workload(tap, "dns-many-dnsmasq", [server.pid], load, seconds=6)
    K.stop(server)
    K.stop(up)
    if took:
        print(f"# dnsmasq: {sum(sent)} queries in {took[0] * 1000:.0f} ms", flush=True)
    if rep is None:
        return
    reqs = check(tap, "dns-many-dnsmasq", rep, port, path, sum(sent), "dnsmasq")
    tap.ok(f"dns-many-dnsmasq: all {CLIENTS * PER_CLIENT} queries answered ({sum(sent)})",
           sum(sent) == CLIENTS * PER_CLIENT, "")
    # the upstream is not traced: its 5 ms is a network blind spot on the path
    net = K.median_ns(reqs, lambda g: g.get("category") == "network")
    tap.ok(f"dns-many-dnsmasq: the upstream's {DELAY_MS} ms on the path as network "
           f"(median {K.fmt_ms(net)})", K.near(net, DELAY_MS, abs_ms=2),
           "\n".join(K.describe(q, 8) for q in reqs[:1]))


UNBOUND_CONF = """server:
  interface: 127.0.0.1
  port: {port}
  do-ip6: no
  do-tcp: yes
  do-daemonize: no
  username: ""
  chroot: ""
  directory: "{d}"
  pidfile: "{d}/unbound.pid"
  use-syslog: no
  logfile: "{d}/unbound.log"
  verbosity: 0
  num-threads: 2
  so-reuseport: no
  access-control: 127.0.0.0/8 allow
  module-config: "iterator"
  local-zone: "kp.test." static
{records}
remote-control:
  control-enable: no
"""


def unbound_phase(tap):
    if not shutil.which("unbound"):
        tap.skip("dns-many-unbound", "unbound not installed (apt-get install unbound)")
        return
    d = K.workdir("dns_many_unbound")
    port = K.free_port()
    records = "\n".join(f'  local-data: "{qname(c, i)}. 60 IN A 127.0.0.7"'
                        for c in range(CLIENTS) for i in range(PER_CLIENT))
    conf = os.path.join(d, "unbound.conf")
    with open(conf, "w") as f:
        f.write(UNBOUND_CONF.format(port=port, d=d, records=records))
    server = K.spawn(["unbound", "-d", "-c", conf], stdout=subprocess.DEVNULL,
                     stderr=subprocess.DEVNULL)
    try:
        K.wait_port(port, server)  # do-tcp: it listens on TCP too
    except RuntimeError as e:
        log = os.path.join(d, "unbound.log")
        tap.ok("dns-many-unbound: unbound starts", False,
               f"{e}\n{open(log).read()[-1500:] if os.path.exists(log) else ''}")
        K.stop(server)
        return
    sent, lock, took = [], threading.Lock(), []

    def load():
        t0 = time.time()
        drive(port, sent, lock, pairs=True)
        took.append(time.time() - t0)
    rep, path = K.record_workload(tap, "dns-many-unbound", [server.pid], load, seconds=5)
    K.stop(server)
    if took:
        print(f"# unbound: {sum(sent)} queries in {took[0] * 1000:.0f} ms", flush=True)
    if rep is None:
        return
    check(tap, "dns-many-unbound", rep, port, path, sum(sent), "unbound", pairs=True)
    tap.ok(f"dns-many-unbound: all {CLIENTS * PER_CLIENT} queries answered ({sum(sent)})",
           sum(sent) == CLIENTS * PER_CLIENT, "")


def main():
    tap = Tap()
    if not tap.ok("critpath is built", os.access(CRITPATH, os.X_OK), f"{CRITPATH} missing"):
        K.done(tap)
    if shutil.which("dnsmasq"):
        dnsmasq_phase(tap)
    else:
        tap.skip("dns-many-dnsmasq", "dnsmasq not installed (apt-get install dnsmasq-base)")
    unbound_phase(tap)
    K.done(tap)


if __name__ == "__main__":
    main()
