#!/usr/bin/env python3
# SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
"""Servers that create a thread or a process per connection (DESIGN.md 5:
a creation is a hand-off, followed into the creator).

Debian's socat as a forking TCP proxy (`TCP-LISTEN:…,fork`: the listener
accepts, forks a process per connection, and the child connects to the back
end and copies bytes both ways) in front of Python's own
http.server.ThreadingHTTPServer (a thread per connection: kpathlib's
THREADED_BACKEND): /sleep sleeps 20 ms, /fast returns at once.
8 clients send the two paths in turn, each request on a new connection.
Recorded by the pids of socat's listener and the Python server.

Checked: every request found under its name on both tiers and tiled
exactly; a /sleep request through socat has the back end's 20 ms sleep on
its path as its own work (>= 95%); the back end's requests have their own
sleep; no request's path runs off the start of a thread it created (no
`unexplained`, >= 95%); a /fast request carries no sleep as its own
(<= 2%)."""
import collections
import http.client
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kpathlib as K  # noqa: E402
from tap import CRITPATH, Tap  # noqa: E402

MS = K.MS
CLIENTS, ROUNDS = 8, 20  # each client sends ROUNDS of each path
PATHS = ("/sleep", "/fast")
def load(port, sent):
    def client(i):
        for k in range(ROUNDS * len(PATHS)):
            p = PATHS[(i + k) % len(PATHS)]
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
            try:
                c.request("GET", p)
                r = c.getresponse()
                body = r.read()
            finally:
                c.close()
            if r.status != 200 or body != (p + "\n").encode():
                raise RuntimeError(f"GET {p}: {r.status} {body[:80]!r}")
            sent[p] += 1
    K.in_parallel([lambda i=i: client(i) for i in range(CLIENTS)])


def ns(q, pred):
    return K.path_ns(q, pred)


def main():
    tap = Tap()
    if not shutil.which("socat"):
        tap.skip("per-connection", "socat not installed (apt-get install socat)")
        K.done(tap)
    if not tap.ok("critpath is built", os.access(CRITPATH, os.X_OK), f"{CRITPATH} missing"):
        K.done(tap)
    d = K.workdir("per_conn")
    bport, fport = K.free_port(), K.free_port()
    try:
        backend = K.threaded_backend(d, bport)
        proxy = K.spawn(["socat", f"TCP-LISTEN:{fport},bind=127.0.0.1,reuseaddr,fork",
                         f"TCP:127.0.0.1:{bport}"])
        K.wait_port(fport, proxy)
    except RuntimeError as e:
        tap.ok("per-connection: servers start", False, str(e))
        K.done(tap)
    sent = collections.Counter()
    rep, path = K.record_workload(tap, "per_conn", [proxy.pid, backend.pid],
                                  lambda: load(fport, sent), seconds=8)
    if rep is None:
        K.done(tap)
    K.check_tiling(tap, "per-connection", rep.get("requests", []))
    front = collections.defaultdict(list)
    back = collections.defaultdict(list)
    for q in K.service_requests(rep, fport):
        front[q.get("name")].append(q)
    for q in K.service_requests(rep, bport):
        back[q.get("name")].append(q)
    for p in PATHS:
        for tier, by in (("socat", front), ("python", back)):
            n, found = sent[p], len(by[f"GET {p}"])
            tap.ok(f"per-connection: {found} 'GET {p}' requests of {tier} found, {n} sent",
                   n - max(1, n // 50) <= found <= n,
                   f"{tier} requests by name: { {k: len(v) for k, v in by.items()} }\n"
                   + K.recording_digest(path, rep))

    def own_sleep(q, pid):
        return ns(q, lambda g: g.get("category") == "sleep" and K.own(g) and g.get("pid") == pid)

    sleeps = front["GET /sleep"]
    bad = [q for q in sleeps if own_sleep(q, backend.pid) < 18 * MS]
    tap.ok(f"per-connection: socat /sleep: {len(sleeps) - len(bad)} of {len(sleeps)} have the "
           "back end's 20 ms sleep as their own work (>= 18 ms), expected >= 95%",
           sleeps and len(bad) <= len(sleeps) * 0.05,
           "\n".join(K.describe(q, 30) for q in bad[:2]))
    bsleeps = back["GET /sleep"]
    bad = [q for q in bsleeps if own_sleep(q, backend.pid) < 18 * MS]
    tap.ok(f"per-connection: python /sleep: {len(bsleeps) - len(bad)} of {len(bsleeps)} have "
           "their own 20 ms sleep, expected >= 95%",
           bsleeps and len(bad) <= len(bsleeps) * 0.05,
           "\n".join(K.describe(q, 30) for q in bad[:2]))
    every = [q for by in (front, back) for v in by.values() for q in v]
    unexpl = [q for q in every if ns(q, lambda g: g.get("category") == "unexplained") > 0]
    tap.ok(f"per-connection: {len(every) - len(unexpl)} of {len(every)} requests have no "
           "`unexplained` time (the walk follows each new thread or process into its "
           "creator), expected >= 95%", every and len(unexpl) <= len(every) * 0.05,
           "\n".join(K.describe(q, 12) for q in unexpl[:3]))
    fast = front["GET /fast"] + back["GET /fast"]
    slept = [q for q in fast if ns(q, lambda g: g.get("category") == "sleep" and K.own(g))
             >= 2 * MS]
    tap.ok(f"per-connection: /fast: {len(fast) - len(slept)} of {len(fast)} carry no sleep "
           "as their own (< 2 ms), expected >= 98%", fast and len(slept) <= len(fast) * 0.02,
           "\n".join(K.describe(q, 30) for q in slept[:2]))
    K.done(tap)


if __name__ == "__main__":
    main()
