#!/usr/bin/env python3
# SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
"""A Go service (net/http, Debian's golang-go): its runtime runs a request's
goroutine on whichever thread is free, parks it in the netpoller while it
waits for the downstream, and hands it back through futex wakeups of its
threads. kp_goserver computes 2 ms, calls kp_backend (traced; it sleeps
15 ms) on a pooled connection, computes 2 ms; one client. Every
request must be found and tiled, its own cpu ~4 ms in whatever threads ran
it, the backend's sleep on its path as the request's own work (a
downstream that sleeps while serving the call still serves it), and
nothing unexplained."""
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kpathlib as K  # noqa: E402
from tap import CRITPATH, WORKLOADS, Tap  # noqa: E402

# One client at a time: with several, goroutines take turns on a thread in
# user space, with no call between one's work and another's, and which of
# them a stretch of that thread's cpu was is not in kernel events (a
# response write claims the stretch since its thread's previous call)
CLIENTS = 1
N = 40
MS = K.MS
SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "workloads",
                   "kp_goserver.go")


def main():
    tap = Tap()
    if not shutil.which("go"):
        tap.skip("go", "go not installed (apt-get install golang-go)")
        K.done(tap)
    if not tap.ok("critpath is built", os.access(CRITPATH, os.X_OK), f"{CRITPATH} missing"):
        K.done(tap)
    goserver = K.go_build(tap, "go", SRC)
    if not goserver:
        K.done(tap)
    backend, bf = K.start_ready([os.path.join(WORKLOADS, "kp_backend")])
    server, sf = K.start_ready([goserver, str(bf["port"])])
    port, pid = sf["port"], sf["pid"]

    rep, path = K.record_workload(tap, "go", [pid, bf["pid"]], lambda: K.in_parallel(
        [lambda: K.run_client(port, N)] * CLIENTS))
    K.stop(server)
    K.stop(backend)
    if rep is None:
        K.done(tap)
    n = CLIENTS * N
    reqs, mid = K.served(tap, "go", rep, port, n, path, service="kp_goserver", slack=CLIENTS)
    named = sum(1 for q in reqs if q.get("name") == "GET /kp/{n}")
    tap.ok(f"go: {named} of them named 'GET /kp/{{n}}'", named == len(reqs),
           f"names: {sorted(set(q.get('name') for q in reqs))}")
    if not reqs:
        K.done(tap)
    lat = K.median_own_latency(reqs)
    tap.ok(f"go: median latency without interference {K.fmt_ms(lat)}, expected ~19 ms",
           K.near(lat, 19), K.describe(mid))
    cpu = K.median_ns(reqs, lambda g: g.get("pid") == pid and g.get("category") == "cpu" and
                      K.own(g))
    tap.ok(f"go: the request's own cpu in kp_goserver's threads {K.fmt_ms(cpu)}, "
           "expected ~4 ms", K.near(cpu, 4, abs_ms=1.2), K.describe(mid))
    # goroutines switched in user space leave no wakeup to follow: the
    # response write's claim on its thread's time says whose it is
    bare = [q for q in reqs if K.path_ns(q, lambda g: g.get("pid") == pid and
                                         g.get("category") == "cpu" and K.own(g)) < 2 * MS]
    tap.ok(f"go: {len(bare)} of {len(reqs)} requests with less than 2 ms of own cpu "
           "(at most a tenth)", len(bare) <= len(reqs) // 10,
           "\n".join(K.describe(q) for q in bare[:2]))
    threads = {g.get("tid") for q in reqs for g in q.get("critical_path") or []
               if g.get("pid") == pid and g.get("category") == "cpu"}
    tap.ok(f"go: the requests ran on {len(threads)} of kp_goserver's threads", threads, "")
    sleep = K.median_ns(reqs, lambda g: g.get("pid") == bf["pid"] and
                        g.get("category") == "sleep" and K.own(g))
    tap.ok(f"go: the backend's sleep on the path, the request's own (not interference), "
           f"{K.fmt_ms(sleep)}, expected ~15 ms", K.near(sleep, 15), K.describe(mid))
    unexpl = K.median_ns(reqs, lambda g: g.get("category") == "unexplained")
    net = K.median_ns(reqs, lambda g: g.get("category") == "network")
    tap.ok(f"go: nothing unexplained ({K.fmt_ms(unexpl)}) and no blind spot "
           f"({K.fmt_ms(net)})", unexpl <= 1 * MS and net <= 1 * MS, K.describe(mid))
    K.done(tap)


if __name__ == "__main__":
    main()
