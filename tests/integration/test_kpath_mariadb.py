#!/usr/bin/env python3
# SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
"""MariaDB from Debian under mariadb-slap, recorded by its pid while the load
runs (a thread per connection, all in one process). The server reads each
packet's 4-byte length before its body: the recorder keeps the body's
payload too, and report names the requests by SQL verb. Four clients
update one row: the UPDATEs wait on its lock (another connection's thread
named as the culprit) and on the redo log's flush at commit (disk); the
SELECTs are CPU. Tiling holds on every request."""
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kpathlib as K  # noqa: E402
from tap import CRITPATH, Tap  # noqa: E402

MARIADBD = "/usr/sbin/mariadbd"


def main():
    tap = Tap()
    try:
        pwd.getpwnam("mysql")
        ok = all(shutil.which(c) for c in ("mariadb-install-db", "mariadb", "mariadb-slap")) \
            and os.access(MARIADBD, os.X_OK)
    except KeyError:
        ok = False
    if not ok:
        tap.skip("mariadb: MariaDB installed", "no mariadbd, mariadb-slap or mysql user: run "
                 "make deps")
        tap.done()
    d = tempfile.mkdtemp(prefix="critpath-my-")
    os.chmod(d, 0o755)
    shutil.chown(d, "mysql")
    data, sock = os.path.join(d, "data"), os.path.join(d, "sock")
    port = K.free_port()
    srv = None
    try:
        r = subprocess.run(["runuser", "-u", "mysql", "--", "mariadb-install-db",
                            f"--datadir={data}", "--skip-test-db",
                            "--auth-root-authentication-method=normal"],
                           capture_output=True, text=True, timeout=120, cwd=d)
        if not tap.ok("mariadb: mariadb-install-db", r.returncode == 0, r.stdout + r.stderr):
            tap.done()
        srv = K.spawn(["runuser", "-u", "mysql", "--", MARIADBD, f"--datadir={data}",
                       f"--socket={sock}", f"--port={port}", "--bind-address=127.0.0.1",
                       "--skip-grant-tables", f"--log-error={d}/err.log",
                       f"--pid-file={d}/pid"], stdout=subprocess.DEVNULL,
                      stderr=subprocess.DEVNULL)
        K.wait_port(port, srv, timeout=60)
        with open(os.path.join(d, "pid")) as f:
            pid = int(f.read())
        cli = ["-h", "127.0.0.1", "-P", str(port), "-u", "root"]
        r = subprocess.run(["mariadb", *cli, "-e",
                            "create database b; create table b.t (id int primary key, v int); "
                            "insert into b.t values (1, 1), (2, 2);"],
                           capture_output=True, text=True, timeout=60)
        if not tap.ok("mariadb: a table of two rows", r.returncode == 0, r.stderr):
            tap.done()
        load = subprocess.Popen(["mariadb-slap", *cli, "--concurrency=4", "--iterations=1",
                                 "--number-of-queries=2000000", "--create-schema=b",
                                 "--delimiter=;", "--query=select v from t where id=2; "
                                 "update t set v=v+1 where id=1;"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(1.5)  # its connections open and busy
        path = os.path.join(d, "my.rec")
        rec = subprocess.run([CRITPATH, "record", "-p", str(pid), "-d", "3", "-o", path],
                             capture_output=True, text=True, timeout=120)
        load.kill()
        load.wait()
        tap.ok("mariadb: critpath record -p MARIADBD exits 0", rec.returncode == 0, rec.stderr)
        rep, err = K.report_json(path)
        if not tap.ok("mariadb: report reads the recording", rep is not None, err):
            tap.done()
        reqs = K.service_requests(rep, port)
        names = {}
        for q in reqs:
            names[q.get("name")] = names.get(q.get("name"), 0) + 1
        # a connection's first request can be one whose first packet was read
        # before the recording began: no verb to name it by (4 connections)
        unnamed = [q for q in reqs if q.get("name") not in ("SELECT", "UPDATE")]
        tap.ok(f"mariadb: {len(reqs)} requests on connections open before the recording, "
               f"named by SQL verb: {names}", len(reqs) >= 1000
               and {"SELECT", "UPDATE"} <= set(names) and len(unnamed) <= 4
               and all(str(q.get("id", "")).endswith(":0") for q in unnamed)
               and min(names["SELECT"], names["UPDATE"]) >= len(reqs) // 3,
               f"{names}; not named by verb: {[(q.get('id'), q.get('name')) for q in unnamed]}")
        K.check_tiling(tap, "mariadb", rep.get("requests", []))
        ups = [q for q in reqs if q.get("name") == "UPDATE"]
        disk = [q for q in ups if K.path_ns(q, lambda g: g.get("category") == "disk") > 0]
        locked = [q for q in ups if any(
            g.get("category") == "lock" and any(
                c.get("pid") == pid and c.get("tid") != q["critical_path"][-1].get("tid")
                for c in g.get("culprits") or [])
            for g in q.get("critical_path") or [])]
        tap.ok(f"mariadb: the redo log's flush is disk on the path of {len(disk)} of "
               f"{len(ups)} UPDATEs", len(disk) >= len(ups) // 4 > 0, "")
        tap.ok(f"mariadb: {len(locked)} UPDATEs waited on the row lock held by another "
               f"connection's thread", len(locked) > 0, "")
    finally:
        if srv is not None:
            subprocess.run(["mariadb-admin", "-h", "127.0.0.1", "-P", str(port), "-u", "root",
                            "shutdown"], capture_output=True, timeout=60)
            K.stop(srv)
        shutil.rmtree(d, ignore_errors=True)
    tap.done()


if __name__ == "__main__":
    main()
