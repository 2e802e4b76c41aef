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
its path as its own work (>= 95%; with the CPU wait right before it, as
Python's time.sleep sets its deadline before it blocks); the back end's
requests have their own sleep; no request's path runs off the start of a thread it created (no
`unexplained`, >= 95%); a /fast request carries no /sleep request's sleep
as its own (>= 10 ms, <= 2%). A shorter own sleep there is the back end's
interpreter lock: a GIL wait that timed out (5 ms) and then took the lock
without waiting again has no waker to name (README, waits on other
requests' threads); 0–9 of 320 /fast requests have one."""
import collections
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kpathlib as K  # noqa: E402
from tap import CRITPATH, Tap  # noqa: E402

MS = K.MS
CLIENTS, ROUNDS = 8, 20  # each client sends ROUNDS of each path
PATHS = ("/sleep", "/fast")
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
                                  lambda: K.http_load(fport, PATHS, CLIENTS, ROUNDS, sent,
                                                      keepalive=False), seconds=8)
    if rep is None:
        K.done(tap)
    K.check_tiling(tap, "per-connection", rep.get("requests", []))
    front, back = K.by_name(rep, fport), K.by_name(rep, bport)
    K.check_found(tap, "per-connection: socat", front, sent, K.recording_digest(path, rep))
    K.check_found(tap, "per-connection: python", back, sent)

    sleeps = front.get("GET /sleep", [])
    bad = [q for q in sleeps if K.sleep_stretch_ns(q, backend.pid) < 18 * MS]
    tap.ok(f"per-connection: socat /sleep: {len(sleeps) - len(bad)} of {len(sleeps)} have the "
           "back end's 20 ms sleep as their own work (>= 18 ms with the CPU wait before it), "
           "expected >= 95%",
           sleeps and len(bad) <= len(sleeps) * 0.05,
           "\n".join(K.describe(q, 30) for q in bad[:2]))
    bsleeps = back.get("GET /sleep", [])
    bad = [q for q in bsleeps if K.sleep_stretch_ns(q, backend.pid) < 18 * MS]
    tap.ok(f"per-connection: python /sleep: {len(bsleeps) - len(bad)} of {len(bsleeps)} have "
           "their own 20 ms sleep (>= 18 ms with the CPU wait before it), expected >= 95%",
           bsleeps and len(bad) <= len(bsleeps) * 0.05,
           "\n".join(K.describe(q, 30) for q in bad[:2]))
    every = [q for by in (front, back) for v in by.values() for q in v]
    unexpl = [q for q in every if ns(q, lambda g: g.get("category") == "unexplained") > 0]
    tap.ok(f"per-connection: {len(every) - len(unexpl)} of {len(every)} requests have no "
           "`unexplained` time (the walk follows each new thread or process into its "
           "creator), expected >= 95%", every and len(unexpl) <= len(every) * 0.05,
           "\n".join(K.describe(q, 12) for q in unexpl[:3]))
    fast = front.get("GET /fast", []) + back.get("GET /fast", [])
    slept = [q for q in fast if ns(q, lambda g: g.get("category") == "sleep" and K.own(g))
             >= 10 * MS]
    tap.ok(f"per-connection: /fast: {len(fast) - len(slept)} of {len(fast)} carry no /sleep "
           "request's sleep as their own (>= 10 ms), expected >= 98%",
           fast and len(slept) <= len(fast) * 0.02,
           "\n".join(K.describe(q, 30) for q in slept[:2]))
    K.done(tap)


if __name__ == "__main__":
    main()
