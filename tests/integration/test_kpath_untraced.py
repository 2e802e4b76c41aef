#!/usr/bin/env python3
# SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
"""Untraced downstream (SCENARIOS.md kernel case 7). kp_server --mode untraced
computes 2 ms, calls kp_backend (NOT traced) which sleeps 15 ms, computes
2 ms. Expected: a ~15 ms network segment naming the peer 127.0.0.1:PORT (a
blind spot, sized exactly), and ~4 ms of the request thread's CPU."""
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
    backend, bf = K.start_ready([os.path.join(WORKLOADS, "kp_backend")])
    server, sf = K.start_ready([os.path.join(WORKLOADS, "kp_server"), "--mode", "untraced",
                                "--backend", str(bf["port"])])
    port, a1 = sf["port"], sf["A1"]
    peer = f"127.0.0.1:{bf['port']}"
    rep, path = K.record_workload(tap, "untraced", [sf["pid"]], lambda: K.run_client(port, N))
    K.stop(server)
    K.stop(backend)
    if rep is None:
        K.done(tap)
    reqs, mid = K.served(tap, "untraced", rep, port, N, path)
    tap.ok("untraced: no request of the untraced backend reported",
           not K.service_requests(rep, bf["port"]), "")
    if not reqs:
        K.done(tap)
    lat = K.median_latency(reqs)
    tap.ok(f"untraced: median latency {K.fmt_ms(lat)}, expected ~19 ms", K.near(lat, 19),
           K.describe(mid))
    net = K.median_ns(reqs, lambda g: g.get("category") == "network" and g.get("peer") == peer)
    tap.ok(f"untraced: network time naming peer {peer}: {K.fmt_ms(net)}, expected ~15 ms",
           K.near(net, 15), K.describe(mid))
    other = K.median_ns(reqs, lambda g: g.get("category") == "network" and g.get("peer") != peer)
    tap.ok("untraced: no network time attributed elsewhere", other <= 1 * MS,
           f"{K.fmt_ms(other)}\n" + K.describe(mid))
    cpu = K.median_ns(reqs, lambda g: g.get("tid") == a1 and g.get("category") == "cpu")
    tap.ok(f"untraced: request thread CPU {K.fmt_ms(cpu)}, expected ~4 ms", K.near(cpu, 4),
           K.describe(mid))
    K.done(tap)


if __name__ == "__main__":
    main()
