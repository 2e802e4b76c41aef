#!/usr/bin/env python3
# SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
"""Google CPT's figure 2 as real processes: kp_server (A: threads A1, A2) calls
kp_backend (B) over loopback TCP; both traced. The critical path of each
request is known from how kp_server.c is built:

  seq        A1 5 ms, B1 20 ms, A1 8 ms, A2 2 ms            latency ~35 ms
  par        B1 and A2 in parallel: A2 off the path         latency ~33 ms
  overlap_b  A1 keeps computing 10 ms while B works 20 ms: B on the path
  overlap_a  A1 keeps computing 20 ms while B works 5 ms: B off the path
  seq_v6     seq, A connected to B by a dual-stack socket (AF_INET6, as Java's
             are): A sees ::ffff:127.0.0.1 where B sees 127.0.0.1
"""
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kpathlib as K  # noqa: E402
from tap import CRITPATH, WORKLOADS, Tap  # noqa: E402

N = 20
MS = K.MS
# mode: latency, A1 on path, B on path, A2 on path (ms); (lo, hi) = a range
CASES = {
    "seq": (35, 13, 20, (1.0, 5.0)),
    "par": (33, 13, 20, (0.0, 1.0)),
    "overlap_b": (33, 13, 20, (0.0, 0.5)),
    "overlap_a": (33, 33, (0.0, 1.5), (0.0, 0.5)),
    "seq_v6": (35, 13, 20, (1.0, 5.0)),
}


def work(g):
    """The request's own work other than waiting for a CPU. A1 and B run at
    once in the overlap cases, and on a busy machine they can share a CPU;
    then each waits behind the other, and that wait is own (DESIGN.md section
    5: a hand-off's peer), on top of the CPU time the workload fixes."""
    return K.own(g) and g.get("category") != "runqueue"


def median_work_latency(reqs):
    if not reqs:
        return 0
    return statistics.median(q["latency_ns"] - K.path_ns(q, lambda g: not work(g)) for q in reqs)


def check_ms(tap, what, value_ns, expect, reqs):
    if isinstance(expect, tuple):
        good = expect[0] * MS <= value_ns <= expect[1] * MS
        want = f"{expect[0]}..{expect[1]} ms"
    else:
        good = K.near(value_ns, expect)
        want = f"~{expect} ms (+-30% or 3 ms)"
    detail = f"median {K.fmt_ms(value_ns)}, expected {want}"
    if not good and reqs:
        detail += "\n" + K.describe(reqs[len(reqs) // 2])
    tap.ok(f"{what}: {K.fmt_ms(value_ns)}, expected {want}", good, detail)


def run_case(tap, mode):
    lat_ms, a1_ms, b_ms, a2_ms = CASES[mode]
    backend, bf = K.start_ready([os.path.join(WORKLOADS, "kp_backend")])
    v6 = mode.endswith("_v6")
    server, sf = K.start_ready([os.path.join(WORKLOADS, "kp_server"), "--mode",
                                mode.removesuffix("_v6"), "--backend", str(bf["port"]),
                                *(["--backend-v6"] if v6 else [])])
    port, a1, a2 = sf["port"], sf["A1"], sf["A2"]
    client_p50 = []
    rep, path = K.record_workload(
        tap, f"cpt-{mode}", [sf["pid"], bf["pid"]],
        lambda: client_p50.append(K.run_client(port, N)))
    K.stop(server)
    K.stop(backend)
    if rep is None:
        return
    name = f"cpt {mode}"
    reqs = K.service_requests(rep, port)
    breqs = K.service_requests(rep, bf["port"])
    K.check_tiling(tap, name, rep.get("requests", []))
    tap.ok(f"{name}: {len(reqs)} requests of kp_server:{port} found, {N} sent",
           N - 1 <= len(reqs) <= N,
           f"services seen: {sorted({q.get('service') for q in rep.get('requests', [])})}\n"
           f"recording {path}")
    tap.ok(f"{name}: {len(breqs)} downstream requests of kp_backend:{bf['port']}, {N} made",
           N - 1 <= len(breqs) <= N, f"recording {path}")
    if not reqs:
        return
    names = sorted({q.get("name") for q in reqs})
    tap.ok(f"{name}: requests named by their HTTP method and path",
           all(str(q.get("name", "")).startswith("GET /kp") for q in reqs), f"names: {names}")
    bnames = sorted({q.get("name") for q in breqs})
    tap.ok(f"{name}: downstream requests named 'get'",
           breqs and all(q.get("name") == "get" for q in breqs), f"names: {bnames}")
    tap.ok(f"{name}: no request partial (no loss at this load)",
           not any(q.get("partial") for q in rep["requests"]),
           f"warnings: {rep.get('warnings')}")
    sorted_reqs = sorted(reqs, key=lambda q: q["latency_ns"])
    # Other load on the machine stretches the wall clock as run-queue
    # waits; the request's own work is what the workload fixes.
    check_ms(tap, f"{name}: median latency without run-queue waits or interference (client "
             f"saw {client_p50[0] if client_p50 else '?'} ms, path "
             f"{K.fmt_ms(K.median_latency(reqs))})", median_work_latency(reqs), lat_ms, sorted_reqs)
    check_ms(tap, f"{name}: A1 (tid {a1}) own work on the path",
             K.median_ns(reqs, lambda g: g.get("tid") == a1 and work(g)), a1_ms, sorted_reqs)
    check_ms(tap, f"{name}: B (pid {bf['pid']}) own work on the path",
             K.median_ns(reqs, lambda g: g.get("pid") == bf["pid"] and work(g)), b_ms,
             sorted_reqs)
    if a2:
        check_ms(tap, f"{name}: A2 (tid {a2}) own work on the path",
                 K.median_ns(reqs, lambda g: g.get("tid") == a2 and work(g)), a2_ms,
                 sorted_reqs)
    # overlap: A1 and B compute at once by design, and share a CPU when the
    # machine is busy; then each is the other's culprit
    limit = None if mode.startswith("overlap") else 1 * MS
    errs = K.interference_errors(reqs, {sf["pid"], bf["pid"]}, limit)
    tap.ok(f"{name}: interference only as waits behind named culprits"
           + ("" if limit is None else ", at most 1 ms of it by the workload alone"), not errs,
           "\n".join(errs[:10]) + "\n" + K.describe(sorted_reqs[len(sorted_reqs) // 2]))


def main():
    tap = Tap()
    if not tap.ok("critpath is built", os.access(CRITPATH, os.X_OK), f"{CRITPATH} missing"):
        K.done(tap)
    modes = sys.argv[1:] or list(CASES)
    for mode in modes:
        try:
            run_case(tap, mode)
        except RuntimeError as e:
            tap.ok(f"cpt {mode}: workload runs", False, str(e))
    K.done(tap)


if __name__ == "__main__":
    main()
