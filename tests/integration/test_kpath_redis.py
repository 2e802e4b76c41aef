#!/usr/bin/env python3
# SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
"""A real third-party server: redis-server (Debian) on a loopback port,
traced by PID, under redis-benchmark -n 2000 -c 4 -t get,set. Every request
must be found (2000 GET and 2000 SET), named by its RESP command, tiled
exactly, and none partial (no loss at this load)."""
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kpathlib as K  # noqa: E402
from tap import CRITPATH, Tap  # noqa: E402

N = 2000


def main():
    tap = Tap()
    if not shutil.which("redis-server") or not shutil.which("redis-benchmark"):
        tap.skip("redis", "redis-server / redis-benchmark not installed (apt-get install "
                 "redis-server redis-tools)")
        K.done(tap)
    if not tap.ok("critpath is built", os.access(CRITPATH, os.X_OK), f"{CRITPATH} missing"):
        K.done(tap)
    port = K.free_port()
    d = K.workdir("redis")
    server = K.spawn(["redis-server", "--port", str(port), "--bind", "127.0.0.1",
                      "--save", "", "--appendonly", "no", "--daemonize", "no",
                      "--dir", d, "--logfile", os.path.join(d, "redis.log")],
                     stdout=subprocess.DEVNULL)
    K.wait_port(port, server)
    bench = []

    def drive():
        r = subprocess.run(["redis-benchmark", "-h", "127.0.0.1", "-p", str(port), "-n", str(N),
                            "-c", "4", "-t", "get,set", "-q"],
                           capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            raise RuntimeError(f"redis-benchmark: exit {r.returncode}: {r.stderr[-500:]}")
        bench.append(r.stdout.strip().replace("\r", "\n"))
    rep, path = K.record_workload(tap, "redis", [server.pid], drive, seconds=10)
    K.stop(server)
    if rep is None:
        K.done(tap)
    reqs = K.service_requests(rep, port)
    K.check_tiling(tap, "redis", rep.get("requests", []))
    by_name = {}
    for q in reqs:
        by_name[str(q.get("name")).upper()] = by_name.get(str(q.get("name")).upper(), 0) + 1
    for cmd in ("GET", "SET"):
        n = by_name.get(cmd, 0)
        tap.ok(f"redis: {n} {cmd} requests of redis-server:{port} found, {N} sent",
               N * 0.99 <= n <= N + 2,
               f"requests by name: {by_name}\nservices: "
               f"{sorted({q.get('service') for q in rep.get('requests', [])})}\n"
               f"redis-benchmark: {bench}\nrecording {path}")
    names = {q.get("name") for q in reqs if str(q.get("name")).upper() in ("GET", "SET")}
    tap.ok("redis: named by the RESP command ('GET' / 'SET')", names <= {"GET", "SET"} and names,
           f"names: {names}")
    partial = sum(1 for q in reqs if q.get("partial"))
    tap.ok("redis: no request partial (no loss at this load)", partial == 0,
           f"{partial} partial; warnings: {(rep.get('warnings') or [])[:5]}")
    # one loop serves the 4 clients: a request waits while it reads and
    # answers the others' commands (README, event loops): that time is
    # interference under "(other requests)", on redis-server's thread
    queued = [g for q in reqs for g in q["critical_path"] if "(other requests)" in g["frames"]]
    nq = sum(1 for q in reqs if any("(other requests)" in g["frames"] for g in q["critical_path"]))
    # (its cpu, and whatever else it did meanwhile: every category)
    bad = [g for g in queued if not g["interference"] or g.get("pid") != server.pid]
    tap.ok(f"redis: {nq} of {len(reqs)} requests waited while the loop served other clients "
           f"(at least 10%), as interference on redis-server's thread",
           nq >= len(reqs) // 10 and not bad,
           "\n".join(str(g) for g in bad[:5]) + "\n" + (K.describe(reqs[0]) if reqs else ""))
    slow = [q for q in reqs if q["latency_ns"] > 50 * K.MS]
    tap.ok("redis: request latencies are plausible (none over 50 ms)", not slow,
           "\n".join(K.describe(q) for q in slow[:3]))
    K.done(tap)


if __name__ == "__main__":
    main()
