#!/usr/bin/env python3
# SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
"""A proxy that hands the back-end fetch to another pool thread (DESIGN.md 5:
a hand-off is ownership, not contention).

Debian's Varnish with a VCL that passes every request: the client's worker
thread reads the request, hands the fetch to another worker of the pool and
waits on a condition variable; the fetch worker sends the request to the
back end, reads the reply and wakes it. The back end is Python's
ThreadingHTTPServer (kpathlib's THREADED_BACKEND: /sleep sleeps 20 ms, /fast
answers at once). 8 clients on keep-alive connections send the two paths in
turn. Recorded by the pids of Varnish's worker process and the back end.

Checked: every request found on both tiers and tiled; a /sleep request's
path enters the back end and has its 20 ms sleep as its own work (>= 95%),
reached through the fetch thread as the request's own, not as a lock
holder; no /fast request carries a /sleep request's sleep (>= 18 ms) as its
own."""
import collections
import os
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kpathlib as K  # noqa: E402
from tap import CRITPATH, Tap  # noqa: E402

MS = K.MS
CLIENTS, ROUNDS = 8, 15
PATHS = ("/sleep", "/fast")
VCL = """vcl 4.1;
backend default { .host = "127.0.0.1"; .port = "%d"; }
sub vcl_recv { return (pass); }
"""


def worker_pid(master):
    """Varnish's worker process (cache-main), a child of the manager."""
    deadline = time.time() + 20
    while time.time() < deadline:
        try:
            with open(f"/proc/{master}/task/{master}/children") as f:
                kids = [int(p) for p in f.read().split()]
        except OSError:
            kids = []
        for k in kids:
            try:
                with open(f"/proc/{k}/comm") as f:
                    if f.read().strip() == "cache-main":
                        return k
            except OSError:
                pass
        time.sleep(0.1)
    raise RuntimeError("no cache-main process under varnishd")


def main():
    tap = Tap()
    if not shutil.which("varnishd"):
        tap.skip("pool hand-off", "varnishd not installed (apt-get install varnish)")
        K.done(tap)
    if not tap.ok("critpath is built", os.access(CRITPATH, os.X_OK), f"{CRITPATH} missing"):
        K.done(tap)
    d = K.workdir("handoff_varnish")
    os.chmod(d, 0o755)  # varnishd's children run as its own user
    bport, vport = K.free_port(), K.free_port()
    vcl = os.path.join(d, "pass.vcl")
    with open(vcl, "w") as f:
        f.write(VCL % bport)
    try:
        backend = K.threaded_backend(d, bport)
        varnish = K.spawn(["varnishd", "-F", "-f", vcl, "-a", f"127.0.0.1:{vport}",
                           "-n", os.path.join(d, "varnish"), "-s", "malloc,32m",
                           "-p", "thread_pools=1", "-p", "thread_pool_min=16"],
                          stdout=open(os.path.join(d, "varnishd.log"), "w"),
                          stderr=subprocess.STDOUT)
        K.wait_port(vport, varnish, timeout=30)
        worker = worker_pid(varnish.pid)
    except (RuntimeError, OSError) as e:
        tap.ok("pool hand-off: varnishd and the back end start", False, str(e))
        K.done(tap)
    sent = collections.Counter()
    rep, path = K.record_workload(tap, "handoff_varnish", [worker, backend.pid],
                                  lambda: K.http_load(vport, PATHS, CLIENTS, ROUNDS, sent),
                                  seconds=8)
    K.stop(varnish)
    if rep is None:
        K.done(tap)
    K.check_tiling(tap, "pool hand-off", rep.get("requests", []))
    front, back = K.by_name(rep, vport), K.by_name(rep, bport)
    K.check_found(tap, "pool hand-off: varnish", front, sent)
    K.check_found(tap, "pool hand-off: back end", back, sent)

    def own_sleep(q):
        return K.path_ns(q, lambda g: g.get("category") == "sleep" and K.own(g)
                         and g.get("pid") == backend.pid)

    sleeps = front.get("GET /sleep", [])
    bad = [q for q in sleeps if own_sleep(q) < 18 * MS]
    tap.ok(f"pool hand-off: /sleep: {len(sleeps) - len(bad)} of {len(sleeps)} enter the back "
           "end and have its 20 ms sleep as their own (>= 18 ms), expected >= 95%",
           sleeps and len(bad) <= len(sleeps) * 0.05,
           "\n".join(K.describe(q, 30) for q in bad[:2]))
    fast = front.get("GET /fast", [])
    slept = [q for q in fast if K.path_ns(q, lambda g: g.get("category") == "sleep"
                                          and K.own(g)) >= 18 * MS]
    tap.ok(f"pool hand-off: /fast: {len(fast) - len(slept)} of {len(fast)} carry no /sleep "
           "request's sleep as their own", fast and not slept,
           "\n".join(K.describe(q, 30) for q in slept[:2]))
    K.done(tap)


if __name__ == "__main__":
    main()
