#!/usr/bin/env python3
# SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
"""PostgreSQL from Debian under pgbench, recorded as an operator would: the
load already running, `critpath record -p` given the postmaster's pid only.
PostgreSQL forks a backend per connection, which has the connection its
parent accepted, and the listening socket stays the parent's. So:
- the backends started before the recording are recorded (children of -p);
- their connections, open before the recording, are found as server
  connections, whatever their first record (a reply in flight);
- requests are named by SQL verb (BEGIN, UPDATE, SELECT, INSERT, END);
- a commit's WAL flush is disk on the path of END requests;
- pgbench's clients contend on the one branch row (scale 1): lock waits
  with another backend named as the culprit;
- tiling holds on every request.
Then the same over the Unix-domain socket (psql's and pgbench's default):
no ports there, the accepted end's own address says it is the server's."""
import glob
import os
import pwd
import re
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kpathlib as K  # noqa: E402
from tap import CRITPATH, Tap  # noqa: E402

VERBS = {"BEGIN", "UPDATE", "SELECT", "INSERT", "END"}


def as_postgres(argv, **kw):
    return subprocess.run(["runuser", "-u", "postgres", "--", *argv], capture_output=True,
                          text=True, timeout=120, **kw)


def record_load(tap, bindir, d, pm, conn, how):
    """pgbench with connection options conn, running 2 s before and during a
    3 s recording of -p pm: (report, pgbench's output), or (None, "")."""
    load = subprocess.Popen(["runuser", "-u", "postgres", "--", f"{bindir}/pgbench", *conn,
                             "-c", "4", "-T", "9", "postgres"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    time.sleep(2)  # the backends exist, their connections are busy
    path = os.path.join(d, f"pg-{how}.rec")
    rec = subprocess.run([CRITPATH, "record", "-p", str(pm), "-d", "3", "-o", path],
                         capture_output=True, text=True, timeout=120)
    out = load.communicate(timeout=60)[0]
    m = re.search(r"with the (\d+) process", rec.stderr)
    tap.ok(f"postgres ({how}): record -p POSTMASTER takes its backends too "
           f"({m[1] if m else 0} processes started before the recording)",
           rec.returncode == 0 and m and int(m[1]) >= 4, rec.stderr)
    rep, err = K.report_json(path)
    if not tap.ok(f"postgres ({how}): report reads the recording", rep is not None, err):
        return None, ""
    return rep, out


def main():
    tap = Tap()
    bins = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    try:
        pwd.getpwnam("postgres")
    except KeyError:
        bins = []
    if not bins:
        tap.skip("postgres: PostgreSQL installed", "no /usr/lib/postgresql/*/bin/initdb "
                 "or no postgres user: run make deps")
        tap.done()
    bindir = os.path.dirname(bins[-1])
    d = tempfile.mkdtemp(prefix="critpath-pg-")
    os.chmod(d, 0o755)
    data = os.path.join(d, "data")
    shutil.chown(d, "postgres")
    port = K.free_port()
    srv = None
    try:
        r = as_postgres([f"{bindir}/initdb", "-D", data, "-A", "trust", "-U", "postgres",
                         "--no-sync"])
        if not tap.ok("postgres: initdb", r.returncode == 0, r.stdout + r.stderr):
            tap.done()
        srv = K.spawn(["runuser", "-u", "postgres", "--", f"{bindir}/postgres", "-D", data,
                       "-p", str(port), "-k", d, "-c", "listen_addresses=127.0.0.1"],
                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        K.wait_port(port, srv, timeout=30)
        with open(os.path.join(data, "postmaster.pid")) as f:
            pm = int(f.readline())
        common = ["-h", "127.0.0.1", "-p", str(port), "-U", "postgres"]
        r = as_postgres([f"{bindir}/pgbench", *common, "-i", "-s", "1", "postgres"])
        if not tap.ok("postgres: pgbench -i", r.returncode == 0, r.stdout + r.stderr):
            tap.done()
        rep, out = record_load(tap, bindir, d, pm, common, "tcp")
        if rep is None:
            tap.done()
        reqs = K.service_requests(rep, port)
        names = {q.get("name") for q in reqs}
        tps = re.search(r"tps = ([\d.]+)", out)
        want = float(tps[1]) * 3 * 7 * 0.5 if tps else 1000
        tap.ok(f"postgres: {len(reqs)} requests of postgres:{port} on connections open "
               f"before the recording (pgbench: {tps[1] if tps else '?'} transactions/s of "
               f"7 statements; at least {want:.0f} wanted)", len(reqs) >= want, out[-500:])
        tap.ok(f"postgres: named by SQL verb: {sorted(names)}", names and names <= VERBS
               and {"UPDATE", "END"} <= names, sorted(map(str, names)))
        K.check_tiling(tap, "postgres", rep.get("requests", []))
        ends = [q for q in reqs if q.get("name") == "END"]
        disk = [q for q in ends if K.path_ns(q, lambda g: g.get("category") == "disk") > 0]
        tap.ok(f"postgres: the commit's WAL flush is disk on the path of {len(disk)} of "
               f"{len(ends)} END requests", ends and disk, "")
        locked = [q for q in reqs for g in q.get("critical_path") or []
                  if g.get("category") == "lock" and any(
                      c.get("pid") not in (None, q.get("critical_path")[-1].get("pid"))
                      and c.get("comm") == "postgres" for c in g.get("culprits") or [])]
        tap.ok(f"postgres: {len(locked)} lock waits name another backend as the culprit",
               len(locked) > 0, "")

        rep, out = record_load(tap, bindir, d, pm, ["-h", d, "-p", str(port), "-U",
                                                    "postgres"], "unix")
        if rep is not None:
            reqs = [q for q in rep.get("requests", []) if q.get("service") == "postgres:unix"]
            tps = re.search(r"tps = ([\d.]+)", out)
            want = float(tps[1]) * 3 * 7 * 0.5 if tps else 1000
            names = {q.get("name") for q in reqs}
            tap.ok(f"postgres over its Unix socket: {len(reqs)} requests of postgres:unix "
                   f"named {sorted(names)} (at least {want:.0f} wanted)",
                   len(reqs) >= want and names <= VERBS, out[-500:])
            K.check_tiling(tap, "postgres over its Unix socket", rep.get("requests", []))
            # a lock holder waiting in epoll for its (untraced) client's next
            # statement: a network blind spot on the socket it reads next
            total = sum(q["latency_ns"] for q in reqs)
            unexpl = sum(K.path_ns(q, lambda g: g.get("category") == "unexplained")
                         for q in reqs)
            tap.ok(f"postgres over its Unix socket: {100 * unexpl / max(total, 1):.2f}% of the "
                   f"paths unexplained (under 1%)", total and unexpl < total / 100, "")
    finally:
        if srv is not None:
            K.stop(srv, sig=2)  # SIGINT: fast shutdown
        shutil.rmtree(d, ignore_errors=True)
    tap.done()


if __name__ == "__main__":
    main()
