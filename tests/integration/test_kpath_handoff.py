#!/usr/bin/env python3
# SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
"""Thread-pool hand-off (SCENARIOS.md kernel case 5). kp_server --mode handoff:
the main thread reads a request and queues it (mutex + condvar) to "worker",
which computes 10 ms and queues to "writer", which sends the reply. The
worker's time is the request's own work (interference false), not lock
contention, though it was reached through futex wake-ups."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kpathlib as K  # noqa: E402
from tap import CRITPATH, WORKLOADS, Tap  # noqa: E402

N = 20
MS = K.MS


def main():
    tap = Tap()
    if not tap.ok("critpath is built", os.access(CRITPATH, os.X_OK), f"{CRITPATH} missing"):
        K.done(tap)
    server, sf = K.start_ready([os.path.join(WORKLOADS, "kp_server"), "--mode", "handoff"])
    port, worker, writer = sf["port"], sf["worker"], sf["writer"]
    rep, path = K.record_workload(tap, "handoff", [sf["pid"]], lambda: K.run_client(port, N))
    K.stop(server)
    if rep is None:
        K.done(tap)
    reqs, mid = K.served(tap, "handoff", rep, port, N, path)
    if not reqs:
        K.done(tap)
    unnamed = [q for q in reqs if q.get("name") == "request"]
    tap.ok(f"handoff: every request named by its command ({len(unnamed)} of {len(reqs)} only "
           "'request')", not unnamed, "the payload of a read that began before the previous "
           "response was written must still be captured\n" + K.describe(unnamed[0] if unnamed
                                                                      else mid))
    lat = K.median_own_latency(reqs)
    tap.ok(f"handoff: median latency without interference {K.fmt_ms(lat)} (path "
           f"{K.fmt_ms(K.median_latency(reqs))}), expected ~10 ms", K.near(lat, 10.3),
           K.describe(mid))
    w = K.median_ns(reqs, lambda g: g.get("tid") == worker and K.own(g))
    tap.ok(f"handoff: worker (tid {worker}) own work on the path {K.fmt_ms(w)}, expected ~10 ms",
           K.near(w, 10), K.describe(mid))
    wi = K.median_ns(reqs, lambda g: g.get("tid") == worker and g.get("category") == "cpu"
                     and not K.own(g))
    tap.ok("handoff: the worker's CPU time is own work (interference false)", wi == 0,
           f"interference on the worker: {K.fmt_ms(wi)}\n" + K.describe(mid))
    errs = K.interference_errors(reqs, {sf["pid"]}, 1 * MS)
    tap.ok("handoff: interference only as waits behind named culprits, at most 1 ms of it by "
           "the server's own threads", not errs, "\n".join(errs[:10]) + "\n" + K.describe(mid))
    lock = K.median_ns(reqs, lambda g: g.get("category") == "lock")
    tap.ok("handoff: no lock time on the path (the queues are hand-offs, not contention)",
           lock <= 0.5 * MS, f"lock {K.fmt_ms(lock)}\n" + K.describe(mid))
    wr = sum(1 for q in reqs if (q.get("critical_path") or [{}])[-1].get("tid") == writer)
    tap.ok(f"handoff: the writer (tid {writer}) ends the path in {wr}/{len(reqs)} requests",
           wr >= 0.8 * len(reqs), K.describe(mid))
    K.done(tap)


if __name__ == "__main__":
    main()
