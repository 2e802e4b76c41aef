#!/usr/bin/env python3
# SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
"""Off-path lock contention (SCENARIOS.md kernel case 4). kp_server --mode lock:
thread "bg" takes a mutex at every 100 ms of CLOCK_MONOTONIC and holds it for
12 ms of CPU; kp_client sends each request 2 ms past the grid, so the request
thread waits ~10 ms for bg, then computes 1 ms. Expected on every request:
~10 ms of category lock, interference, culprit bg (by tid), and bg at the top
of contention[]."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kpathlib as K  # noqa: E402
from tap import CRITPATH, WORKLOADS, Tap  # noqa: E402

N = 20
MS = K.MS


def culprit_ns(req, tid):
    return sum(c.get("ns", 0) for g in req.get("critical_path") or []
               for c in g.get("culprits") or [] if c.get("tid") == tid)


def main():
    tap = Tap()
    if not tap.ok("critpath is built", os.access(CRITPATH, os.X_OK), f"{CRITPATH} missing"):
        K.done(tap)
    server, sf = K.start_ready([os.path.join(WORKLOADS, "kp_server"), "--mode", "lock",
                                "--period-ms", "100", "--hold-ms", "12"])
    port, a1, bg = sf["port"], sf["A1"], sf["bg"]
    rep, path = K.record_workload(
        tap, "lock", [sf["pid"]],
        lambda: K.run_client(port, N, ["--gap-ms", "0", "--period-ms", "100", "--phase-ms", "2"]))
    K.stop(server)
    if rep is None:
        K.done(tap)
    reqs, mid = K.served(tap, "lock", rep, port, N, path)
    if not reqs:
        K.done(tap)
    # bg holds the lock for 12 ms of *CPU* time: on an idle machine the request
    # waits ~10 ms and takes ~11 ms; on a loaded one bg (and the request) also
    # wait for a CPU, which stretches the latency (18.7 ms was seen) but not the
    # lock time, which is bg's CPU time. So: the latency within a wide range,
    # the lock time near 10 ms, and the holder (its CPU as lock, its waits for
    # a CPU as runqueue) most of every request's path.
    lat = K.median_latency(reqs)
    tap.ok(f"lock: median latency {K.fmt_ms(lat)}, expected ~11 ms (7..60 ms under load)",
           7 * MS <= lat <= 60 * MS, K.describe(mid))
    lock = K.median_ns(reqs, lambda g: g.get("category") == "lock")
    tap.ok(f"lock: median lock time on the path {K.fmt_ms(lock)}, expected ~10 ms",
           K.near(lock, 10, rel=0.4, abs_ms=4.0), K.describe(mid))
    shares = sorted(K.path_ns(q, lambda g: g.get("tid") == bg
                              and g.get("category") in ("lock", "runqueue"))
                    / max(q["latency_ns"], 1) for q in reqs)
    share = shares[len(shares) // 2]
    tap.ok(f"lock: the holder bg is {share:.0%} of the median request's path, expected most",
           share >= 0.6, K.describe(mid))
    interf = K.median_ns(reqs, lambda g: g.get("category") == "lock" and g.get("interference"))
    tap.ok("lock: the lock segments are interference", interf >= 0.9 * lock and lock > 0,
           f"lock {K.fmt_ms(lock)}, of which interference {K.fmt_ms(interf)}\n" + K.describe(mid))
    on_bg = K.median_ns(reqs, lambda g: g.get("category") == "lock" and g.get("tid") == bg)
    tap.ok(f"lock: the lock segments run on the holder bg (tid {bg})", on_bg >= 0.9 * lock > 0,
           f"lock {K.fmt_ms(lock)}, on tid {bg}: {K.fmt_ms(on_bg)}\n" + K.describe(mid))
    named = [q for q in reqs if culprit_ns(q, bg) >= 5 * MS]
    tap.ok(f"lock: bg (tid {bg}) named as culprit for >=5 ms in {len(named)}/{len(reqs)} requests",
           len(named) >= 0.8 * len(reqs), K.describe(mid))
    own = K.median_ns(reqs, lambda g: g.get("tid") == a1 and g.get("category") == "cpu")
    tap.ok(f"lock: the request's own CPU (tid {a1}) {K.fmt_ms(own)}, expected ~1 ms",
           0.5 * MS <= own <= 4 * MS, K.describe(mid))
    cont = rep.get("contention") or []
    top = cont[0] if cont else {}
    tap.ok(f"lock: contention[] starts with bg (tid {bg}), category lock",
           top.get("tid") == bg and top.get("category") == "lock"
           and top.get("requests", 0) >= 0.8 * len(reqs), f"contention: {cont[:5]}")
    K.done(tap)


if __name__ == "__main__":
    main()
