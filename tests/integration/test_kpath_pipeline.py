#!/usr/bin/env python3
# SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
"""Pipelined requests from a real client: redis-server (Debian) under
redis-benchmark -P 4 -n 2000 -c 2 -t set,get, traced by PID with
--payload-bytes 512 (four SETs of this benchmark are ~180 bytes, more than
the default 128-byte prefix). Each pipelined command is a request of its
own: 2000 SET and 2000 GET found, named by their command, tiled exactly;
the commands of one batch share their read-then-write exchange (start,
end), so requests come in groups of equal start; no warning that requests
went past the payload prefix."""
import os
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kpathlib as K  # noqa: E402
from tap import CRITPATH, Tap  # noqa: E402

N = 2000
P = 4


class Recording(K.Recording):
    """kpathlib's recording with extra `critpath record` options."""

    def __init__(self, pids, seconds, path, extra):
        self.path = path
        self.errpath = path + ".stderr"
        self.argv = [CRITPATH, "record", "-p", ",".join(str(p) for p in pids),
                     "-d", str(seconds), "-o", path, *extra]
        self.err = open(self.errpath, "w")
        self.t0 = time.time()
        self.proc = K.spawn(self.argv, stdout=self.err, stderr=subprocess.STDOUT)
        self.seconds = seconds


def main():
    tap = Tap()
    if not shutil.which("redis-server") or not shutil.which("redis-benchmark"):
        tap.skip("pipeline", "redis-server / redis-benchmark not installed (apt-get install "
                 "redis-server redis-tools)")
        K.done(tap)
    if not tap.ok("critpath is built", os.access(CRITPATH, os.X_OK), f"{CRITPATH} missing"):
        K.done(tap)
    port = K.free_port()
    d = K.workdir("pipeline")
    server = K.spawn(["redis-server", "--port", str(port), "--bind", "127.0.0.1",
                      "--save", "", "--appendonly", "no", "--daemonize", "no",
                      "--dir", d, "--logfile", os.path.join(d, "redis.log")],
                     stdout=subprocess.DEVNULL)
    K.wait_port(port, server)
    path = os.path.join(d, "pipeline.rec")
    rec = Recording([server.pid], 10, path, ["--payload-bytes", "512"])
    err = rec.wait_attached()
    if not tap.ok("pipeline: critpath record attaches", err is None, f"{rec.cmdline()}\n{err}"):
        K.done(tap)
    r = subprocess.run(["redis-benchmark", "-h", "127.0.0.1", "-p", str(port), "-n", str(N),
                        "-c", "2", "-P", str(P), "-t", "set,get", "-q"],
                       capture_output=True, text=True, timeout=120)
    tap.ok("pipeline: redis-benchmark -P 4 ran", r.returncode == 0,
           f"exit {r.returncode}: {r.stderr[-500:]}")
    rc, text = rec.finish()
    K.stop(server)
    if not tap.ok("pipeline: critpath record exits 0", rc == 0, f"{rec.cmdline()}\n{text}"):
        K.done(tap)
    rep, err = K.report_json(path)
    if not tap.ok("pipeline: critpath report --format json reads the recording",
                  rep is not None, err):
        K.done(tap)
    reqs = K.service_requests(rep, port)
    K.check_tiling(tap, "pipeline", rep.get("requests", []))
    by_name = {}
    for q in reqs:
        by_name[q.get("name")] = by_name.get(q.get("name"), 0) + 1
    for cmd in ("SET", "GET"):
        n = by_name.get(cmd, 0)
        tap.ok(f"pipeline: {n} {cmd} requests of redis-server:{port} found, {N} sent "
               f"in batches of {P}", N * 0.99 <= n <= N + 2 * P,
               f"requests by name: {by_name}\nwarnings: {(rep.get('warnings') or [])[:5]}\n"
               f"recording {path}")
    # the commands of one batch: one exchange, so one start and one end
    groups = {}
    for q in reqs:
        if q.get("name") in ("SET", "GET"):
            groups.setdefault((q["start_ns"], q["end_ns"]), []).append(q)
    sizes = sorted(len(g) for g in groups.values())
    full = sum(1 for s in sizes if s == P)
    tap.ok(f"pipeline: requests come in batches of {P} sharing start and end "
           f"({full} of {len(sizes)} exchanges)", sizes and full >= 0.9 * len(sizes),
           f"batch sizes seen: {sorted(set(sizes))}")
    ids = [q.get("id") for q in reqs]
    tap.ok("pipeline: every request has an id of its own", len(ids) == len(set(ids)),
           f"{len(ids) - len(set(ids))} repeated")
    warns = [w for w in rep.get("warnings") or [] if "pipelined" in w]
    tap.ok("pipeline: no request went past the 512-byte payload prefix", not warns,
           "\n".join(warns))
    partial = sum(1 for q in reqs if q.get("partial"))
    tap.ok("pipeline: no request partial (no loss at this load)", partial == 0,
           f"{partial} partial; warnings: {(rep.get('warnings') or [])[:5]}")
    K.done(tap)


if __name__ == "__main__":
    main()
