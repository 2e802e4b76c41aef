#!/usr/bin/env python3
# SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
"""CPU starvation (SCENARIOS.md kernel case 6). kp_server --mode starve pins
its request thread and a CPU hog process (kp_hog, not traced) to the same CPU;
each request computes 10 ms of CPU, so it waits about as long again for the
CPU. Expected: run-queue time on the path with the hog named as culprit, and
the hog in contention[] as category runqueue."""
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
    server, sf = K.start_ready([os.path.join(WORKLOADS, "kp_server"), "--mode", "starve"])
    port, a1, hog = sf["port"], sf["A1"], sf["hog_pid"]
    rep, path = K.record_workload(tap, "starve", [sf["pid"]], lambda: K.run_client(port, N))
    K.stop(server)
    if rep is None:
        K.done(tap)
    reqs = sorted(K.service_requests(rep, port), key=lambda q: q["latency_ns"])
    mid = reqs[len(reqs) // 2] if reqs else {}
    K.check_tiling(tap, "starve", rep.get("requests", []))
    tap.ok(f"starve: {len(reqs)} requests of kp_server:{port} found, {N} sent",
           N - 1 <= len(reqs) <= N, f"recording {path}")
    if not reqs:
        K.done(tap)
    lat = K.median_latency(reqs)
    tap.ok(f"starve: median latency {K.fmt_ms(lat)}, expected ~20 ms", K.near(lat, 20),
           K.describe(mid))
    cpu = K.median_ns(reqs, lambda g: g.get("tid") == a1 and g.get("category") == "cpu")
    tap.ok(f"starve: request thread's CPU on the path {K.fmt_ms(cpu)}, expected ~10 ms",
           K.near(cpu, 10), K.describe(mid))
    rq = K.median_ns(reqs, lambda g: g.get("category") == "runqueue")
    tap.ok(f"starve: run-queue time on the path {K.fmt_ms(rq)}, expected ~10 ms",
           K.near(rq, 10, rel=0.5), K.describe(mid))

    def hog_share(q):
        tot = hogn = 0
        for g in q.get("critical_path") or []:
            if g.get("category") != "runqueue":
                continue
            for c in g.get("culprits") or []:
                tot += c.get("ns", 0)
                hogn += c.get("ns", 0) if c.get("pid") == hog else 0
        return hogn, tot
    named = [q for q in reqs if hog_share(q)[0] >= 0.7 * max(hog_share(q)[1], 1) > 0]
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
