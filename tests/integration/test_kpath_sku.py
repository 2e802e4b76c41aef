#!/usr/bin/env python3
# SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
"""CPU time by SKU (DESIGN.md section 5) from two real recordings of one
service, as a user compares two machines: `record --sku fast`, then `record
--sku slow`, then `report fast.rec slow.rec`. One VM has one CPU model, so
the slower machine is kp_server --cpu-scale 1.5: the same code burning 1.5
times the CPU in every computation, while its downstream kp_backend (the
same process in both recordings) does not change.

  kp_server --mode seq: A1 5 ms + 8 ms and A2 2 ms of cpu per request
                        (15 ms; 22.5 ms scaled), B 20 ms in either
Expected: kp_server's cpu step slower on "slow" by ~1.5 (SKU-sensitive), the
request's whole cpu time by ~(22.5 + 20) / (15 + 20) = 1.21, B's step not
SKU-sensitive, and each request's cpu segments labelled with its own
recording's SKU although both recordings come from one boot.
"""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kpathlib as K  # noqa: E402
from tap import CRITPATH, WORKLOADS, Tap  # noqa: E402

N = 20
RUNS = (("fast", 1.0), ("slow", 1.5))


def record(tap, sku, scale, port, backend, bf):
    server, sf = K.start_ready([os.path.join(WORKLOADS, "kp_server"), "--mode", "seq",
                                "--port", str(port), "--backend", str(bf["port"]),
                                "--cpu-scale", str(scale)])
    rep, path = K.record_workload(tap, f"sku-{sku}", [sf["pid"], bf["pid"]],
                                  lambda: K.run_client(port, N), seconds=6,
                                  extra=("--sku", sku))
    K.stop(server)
    return rep, path


def by_sku(step):
    return {s["sku"]: s for s in step.get("by_sku", [])}


def main():
    tap = Tap()
    if not tap.ok("critpath is built", os.access(CRITPATH, os.X_OK), f"{CRITPATH} missing"):
        K.done(tap)
    try:
        backend, bf = K.start_ready([os.path.join(WORKLOADS, "kp_backend")])
        port = K.free_port()	# the same service name in both recordings
        paths = []
        for sku, scale in RUNS:
            rep, path = record(tap, sku, scale, port, backend, bf)
            if rep is None:
                K.done(tap)
            paths.append(path)
        K.stop(backend)
    except RuntimeError as e:
        tap.ok("sku: workload runs", False, str(e))
        K.done(tap)

    argv = [CRITPATH, "report", *paths, "--format", "json"]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    if not tap.ok("sku: report of both recordings", r.returncode == 0,
                  f"{' '.join(argv)}: exit {r.returncode}: {r.stderr[-2000:]}"):
        K.done(tap)
    rep = json.loads(r.stdout)
    svc = f"kp_server:{port}"
    reqs = K.service_requests(rep, port)
    K.check_tiling(tap, "sku", rep.get("requests", []))
    tap.ok(f"sku: {len(reqs)} requests of {svc}, {2 * N} sent", 2 * N - 2 <= len(reqs) <= 2 * N)

    # each request's cpu segments carry its own recording's label (one boot)
    labels = {}
    for q in reqs:
        skus = {g.get("sku") for g in q["critical_path"] if g["category"] == "cpu"}
        labels.setdefault(tuple(sorted(s or "" for s in skus)), 0)
        labels[tuple(sorted(s or "" for s in skus))] += 1
    tap.ok("sku: every request's cpu segments are of one SKU, fast or slow, about half each",
           set(labels) == {("fast",), ("slow",)} and min(labels.values()) >= N - 1,
           f"labels of requests: {labels}")

    cmp = rep.get("sku_comparison")
    if not tap.ok("sku: the report compares the two SKUs", cmp is not None,
                  f"keys: {sorted(rep)}"):
        K.done(tap)
    # kp_backend's requests are served to a traced caller: in kp_server's
    # paths (B's step there), not compared again as requests of their own
    tap.ok("sku: SKUs fast and slow, the front end's requests on each",
           sorted(s["sku"] for s in cmp["skus"]) == ["fast", "slow"]
           and all(N - 1 <= s["requests"] <= N for s in cmp["skus"]),
           json.dumps(cmp["skus"]))
    steps = {(tuple(s["frames"]), s["whole_request"]): s for s in cmp["steps"]}
    own = steps.get(((svc, "GET /kp/{n}"), False))
    whole = steps.get(((svc, "GET /kp/{n}"), True))
    b = [s for (fr, w), s in steps.items()
         if not w and len(fr) == 3 and fr[0] == svc and fr[2].startswith("kp_backend:")]
    detail = json.dumps(cmp["steps"], indent=1)[:3000]
    if not tap.ok(f"sku: {svc}'s own cpu step, its whole cpu and B's step compared",
                  own and whole and b, detail):
        K.done(tap)
    slow = by_sku(own)["slow"]
    tap.ok(f"sku: {svc}'s cpu step on slow / fast = {slow['ratio']:.3f} (1.5 by the workload; "
           f"1.35..1.65), SKU-sensitive", 1.35 <= slow["ratio"] <= 1.65
           and slow["verdict"] == "slower" and own["sensitive"], json.dumps(own))
    tap.ok(f"sku: {svc}'s cpu step ~15 ms on fast, ~22.5 ms on slow",
           K.near(by_sku(own)["fast"]["mean_ns"], 15) and K.near(slow["mean_ns"], 22.5),
           json.dumps(own))
    ws = by_sku(whole)["slow"]
    tap.ok(f"sku: a request's whole cpu time on slow / fast = {ws['ratio']:.3f} "
           f"(~1.21: 1.12..1.32), slower", 1.12 <= ws["ratio"] <= 1.32
           and ws["verdict"] == "slower", json.dumps(whole))
    bs = by_sku(b[0])["slow"]
    tap.ok(f"sku: B's cpu step on slow / fast = {bs['ratio']:.3f} (unchanged: 0.9..1.1), "
           f"not SKU-sensitive", 0.9 <= bs["ratio"] <= 1.1
           and bs["verdict"] in ("same", "unclear") and not b[0]["sensitive"], json.dumps(b[0]))

    argv = [CRITPATH, "report", *paths]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    tap.ok("sku: the text report shows CPU time by SKU with the verdict",
           r.returncode == 0 and "CPU time by SKU" in r.stdout
           and "slower (SKU-sensitive)" in r.stdout and "SKUs: " in r.stdout,
           r.stdout[-3000:] + r.stderr[-1000:])
    K.done(tap)


if __name__ == "__main__":
    main()
