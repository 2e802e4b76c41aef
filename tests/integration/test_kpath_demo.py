#!/usr/bin/env python3
# SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
"""What `make demo` promises a new user: the demo's frontend + kvstore,
recorded under light closed-loop load, give requests named by their HTTP
method and path, downstream kvstore calls on their paths, and the
"cache-maint" thread (which holds the cache lock ~15 ms every 200 ms) named as
the lock culprit in contention[], and never the idle task as a culprit.
Tiling holds on every request. Recorded, as `make demo` does, with --probe on
three of the front end's functions: their calls are frames of the paths
(price_cart only in GET /cart, kv_get nested in lookup)."""
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kpathlib as K  # noqa: E402
from tap import BUILD, CRITPATH, Tap  # noqa: E402

DEMO = os.path.join(BUILD, "demo")


def main():
    tap = Tap()
    if not tap.ok("critpath and the demo are built", os.access(CRITPATH, os.X_OK)
                  and os.access(os.path.join(DEMO, "frontend"), os.X_OK),
                  f"{CRITPATH} or {DEMO}/frontend missing"):
        K.done(tap)
    port, kv_port = K.free_port(), K.free_port()
    kv = K.spawn([os.path.join(DEMO, "kvstore"), "--port", str(kv_port)],
                 stderr=subprocess.DEVNULL)
    K.wait_port(kv_port, kv)
    front = K.spawn([os.path.join(DEMO, "frontend"), "--port", str(port), "--kv-port",
                     str(kv_port)], stderr=subprocess.DEVNULL)
    K.wait_port(port, front)
    out = []

    def drive():
        r = subprocess.run([os.path.join(DEMO, "loadgen"), "--port", str(port), "-c", "4",
                            "-d", "4", "--think-ms", "2"], capture_output=True, text=True,
                           timeout=60)
        if r.returncode != 0:
            raise RuntimeError(f"loadgen: exit {r.returncode}: {r.stdout} {r.stderr}")
        out.append(r.stdout)
    probes = ["--probe", "lookup", "--probe", "kv_get", "--probe", "price_cart"]
    rep, path = K.record_workload(tap, "demo", [front.pid, kv.pid], drive, seconds=8,
                                  extra=probes)
    K.stop(front)
    K.stop(kv)
    if rep is None:
        K.done(tap)
    m = re.search(r"RESULT requests=(\d+)", out[0] if out else "")
    sent = int(m[1]) if m else 0
    reqs = K.service_requests(rep, port)
    kreqs = K.service_requests(rep, kv_port)
    K.check_tiling(tap, "demo", rep.get("requests", []))
    tap.ok(f"demo: {len(reqs)} frontend requests found, loadgen completed {sent}",
           sent and 0.95 * sent <= len(reqs) <= sent,
           f"services: {sorted({q.get('service') for q in rep.get('requests', [])})}\n"
           f"recording {path}")
    names = {q.get("name") for q in reqs}
    tap.ok("demo: frontend requests named 'GET /item…' or 'GET /cart…'",
           reqs and all(re.match(r"GET /(item|cart)", str(n)) for n in names),
           f"names (some): {sorted(map(str, names))[:10]}")
    tap.ok(f"demo: {len(kreqs)} kvstore requests named 'get'",
           kreqs and all(q.get("name") == "get" for q in kreqs),
           f"names: {sorted({str(q.get('name')) for q in kreqs})[:10]}")
    on_kv = sum(1 for q in reqs if K.path_ns(q, lambda g: g.get("pid") == kv.pid) > 0)
    tap.ok(f"demo: kvstore on the critical path of {on_kv} frontend requests", on_kv > 0, "")
    lockreqs = [q for q in reqs if any(
        g.get("category") == "lock" and any(c.get("comm") == "cache-maint"
                                            for c in g.get("culprits") or [])
        for g in q.get("critical_path") or [])]
    slow = sorted(reqs, key=lambda q: -q["latency_ns"])
    tap.ok(f"demo: {len(lockreqs)} requests waited on the lock with cache-maint as culprit",
           len(lockreqs) > 0, "\n".join(K.describe(q) for q in slow[:2]))
    def stacks(q):
        return {tuple(g.get("frames", [])[2:]) for g in q.get("critical_path") or []
                if g.get("pid") == front.pid and g.get("category") == "cpu"}

    carts = [q for q in reqs if str(q.get("name")).startswith("GET /cart")]
    priced = [q for q in carts if ("price_cart",) in stacks(q)]
    tap.ok(f"demo: price_cart is a frame of the CPU time of {len(priced)}/{len(carts)} "
           f"GET /cart requests", carts and len(priced) >= 0.9 * len(carts),
           K.describe(carts[0]) if carts else "no GET /cart requests")
    # a GET /item reaches price_cart only queued behind a cart on the same
    # worker (its bytes waited while the worker priced the cart): that is
    # the cart's work, "(other requests)", never the item's own
    items = [q for q in reqs if not str(q.get("name")).startswith("GET /cart")]
    queued = [q for q in items if ("(other requests)", "price_cart") in stacks(q)]
    own = [q for q in items if ("price_cart",) in stacks(q)]
    tap.ok(f"demo: price_cart on the paths of {len(queued)}/{len(items)} GET /item requests "
           f"only (those queued behind a cart), as other requests' work; as their own in "
           f"{len(own)} (at most 1%)", len(queued) <= 0.2 * len(items)
           and len(own) <= 0.01 * len(items), K.describe(own[0]) if own else "")
    nested = sum(1 for q in reqs if ("lookup", "kv_get") in stacks(q))
    tap.ok(f"demo: kv_get nested in lookup on the paths of {nested} requests", nested > 0,
           K.describe(reqs[0]) if reqs else "")
    cont = rep.get("contention") or []
    maint = [c for c in cont if c.get("comm") == "cache-maint" and c.get("category") == "lock"]
    tap.ok("demo: contention[] names cache-maint (lock) at the top of the lock culprits",
           maint and maint[0] is next(c for c in cont if c.get("category") == "lock"),
           f"contention: {cont[:5]}")
    # a thread woken onto an idle CPU waits behind no task: swapper/N (pid 0)
    # is never a culprit; the recorder's "[other]" (pid 0 too) may be
    idle = [(q.get("id"), c) for q in reqs + kreqs for g in q.get("critical_path") or []
            for c in g.get("culprits") or []
            if c.get("pid") == 0 and c.get("comm") not in ("[other]", "[other tasks]")]
    idle += [(None, c) for c in cont if c.get("pid") == 0 and c.get("comm") not in ("[other]", "[other tasks]")]
    tap.ok("demo: the idle task is never named as a culprit", not idle, f"{idle[:5]}")
    K.done(tap)


if __name__ == "__main__":
    main()
