#!/usr/bin/env python3
# SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
"""CPU starvation (SCENARIOS.md kernel case 6). kp_server --mode starve pins
its request thread and a CPU hog process (kp_hog, not traced) to the same CPU;
each request computes 10 ms of CPU, so it waits about as long again for the
CPU. Expected: run-queue time on the path with the hog named as culprit, and
the hog in contention[] as category runqueue."""
import os
import statistics
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
    server, sf = K.start_ready([os.path.join(WORKLOADS, "kp_server"), "--mode", "starve"])
    port, a1, hog = sf["port"], sf["A1"], sf["hog_pid"]
    rep, path = K.record_workload(tap, "starve", [sf["pid"]], lambda: K.run_client(port, N))
    K.stop(server)
    if rep is None:
        K.done(tap)
    reqs, mid = K.served(tap, "starve", rep, port, N, path)
    if not reqs:
        K.done(tap)
    def culprit_ns(q):
        """Run-queue culprit time per pid on q's path."""
        by = {}
        for g in q.get("critical_path") or []:
            if g.get("category") != "runqueue":
                continue
            for c in g.get("culprits") or []:
                by[c.get("pid")] = by.get(c.get("pid"), 0) + c.get("ns", 0)
        return by

    # Other load on the machine lands on the hog's CPU too: what the hog and
    # the request fix is the latency without the others' share.
    lat = K.median_ns(reqs, lambda g: True) - statistics.median(
        sum(ns for pid, ns in culprit_ns(q).items() if pid != hog) for q in reqs)
    tap.ok(f"starve: median latency without other tasks' share {K.fmt_ms(lat)} (path "
           f"{K.fmt_ms(K.median_latency(reqs))}), expected ~20 ms", K.near(lat, 20, rel=0.4),
           K.describe(mid))
    cpu = K.median_ns(reqs, lambda g: g.get("tid") == a1 and g.get("category") == "cpu")
    tap.ok(f"starve: request thread's CPU on the path {K.fmt_ms(cpu)}, expected ~10 ms",
           K.near(cpu, 10), K.describe(mid))
    rq = statistics.median(culprit_ns(q).get(hog, 0) for q in reqs)
    tap.ok(f"starve: run-queue time behind kp_hog on the path {K.fmt_ms(rq)}, expected ~10 ms",
           K.near(rq, 10, rel=0.5), K.describe(mid))
    interf = K.median_ns(reqs, lambda g: g.get("category") == "runqueue"
                         and g.get("interference"))
    tap.ok(f"starve: the run-queue time is interference ({K.fmt_ms(interf)})",
           interf >= 0.5 * rq > 0, K.describe(mid))
    named = [q for q in reqs
             if culprit_ns(q) and max(culprit_ns(q).items(), key=lambda kv: kv[1])[0] == hog]
    tap.ok(f"starve: kp_hog (pid {hog}) is the main run-queue culprit in "
           f"{len(named)}/{len(reqs)} requests", len(named) >= 0.8 * len(reqs), K.describe(mid))
    comms = {c.get("comm") for q in reqs for g in q.get("critical_path") or []
             for c in g.get("culprits") or [] if c.get("pid") == hog}
    tap.ok("starve: the culprit is named by its comm 'kp_hog'", comms == {"kp_hog"},
           f"comms: {comms}")
    cont = [c for c in rep.get("contention") or [] if c.get("pid") == hog]
    tap.ok("starve: contention[] lists kp_hog as category runqueue",
           cont and cont[0].get("category") == "runqueue"
           and cont[0].get("requests", 0) >= 0.8 * len(reqs),
           f"contention: {(rep.get('contention') or [])[:5]}")
    K.done(tap)


if __name__ == "__main__":
    main()
