#!/usr/bin/env python3
# SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
"""critpath store (docs/store.md): the demo (frontend + kvstore, the
cache-maint thread holding the lock) recorded with --probe, stored into a
private ClickHouse; what the tables hold must be what `report --format json`
says of the same recording: one row per request and per segment, the
profile's per-step totals from `steps`, the contention table from `blame`.
Then what the store refuses: another schema version (named), a bad URL
(exit 2), a server not there, a wrong password (never printed)."""
import json
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import chlib  # noqa: E402
import kpathlib as K  # noqa: E402
from tap import BUILD, CRITPATH, Tap  # noqa: E402

DEMO = os.path.join(BUILD, "demo")
CAT = ["cpu", "runqueue", "lock", "network", "disk", "sleep", "span", "unexplained"]


def store(args, env=None, timeout=300):
    return subprocess.run([CRITPATH, "store", *args], capture_output=True, text=True,
                          timeout=timeout, env=env)


def record_demo(tap):
    port, kv_port = K.free_port(), K.free_port()
    kv = K.spawn([os.path.join(DEMO, "kvstore"), "--port", str(kv_port)],
                 stderr=subprocess.DEVNULL)
    K.wait_port(kv_port, kv)
    front = K.spawn([os.path.join(DEMO, "frontend"), "--port", str(port), "--kv-port",
                     str(kv_port)], stderr=subprocess.DEVNULL)
    K.wait_port(port, front)

    def drive():
        subprocess.run([os.path.join(DEMO, "loadgen"), "--port", str(port), "-c", "4",
                        "-d", "3", "--think-ms", "2"], capture_output=True, timeout=60,
                       check=True)
    probes = ["--probe", "lookup", "--probe", "kv_get", "--probe", "price_cart"]
    rep, path = K.record_workload(tap, "store", [front.pid, kv.pid], drive, seconds=6,
                                  extra=probes)
    # the front end alone: its calls to kvstore are not followed into it
    fe = K.record_workload(tap, "store-fe", [front.pid], drive, seconds=6)[1] if rep else None
    K.stop(front)
    K.stop(kv)
    return rep, path, fe


def dump_requests(path):
    r = subprocess.run([CRITPATH, "dump", "--requests", path], capture_output=True, text=True,
                       timeout=300)
    return [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]


def check_wire(tap, ch, db, path):
    """Byte ranges and calls as `dump --requests` gives them"""
    want = {q["id"]: q for q in dump_requests(path)}
    got = {row[0]: row[1:] for row in ch.query(
        f"SELECT id, rx_seq, rx_len, tx_seq, tx_len, client_addr FROM {db}.requests")}
    diff = [f"{i}: stored {got.get(i)}" for i, q in want.items()
            if got.get(i) != [str(q.get("rx_seq", 0)), str(q.get("rx_len", 0)),
                              str(q.get("tx_seq", 0)), str(q.get("tx_len", 0)),
                              q.get("client_addr") or ""]]
    seqs = sum(1 for q in want.values() if q.get("rx_seq"))
    tap.ok(f"store {db}: TCP byte ranges of {len(want)} requests as dump --requests "
           f"({seqs} with sequence numbers)", want and seqs and not diff, "\n".join(diff[:5]))
    calls = sorted((q["id"], c["local_addr"], c["remote_addr"], c["tx_seq"],
                    c["end_ns"] - c["start_ns"], c["category"], tuple(c["frames"]),
                    bool(c.get("interference")))
                   for q in want.values() for c in q.get("calls") or [] if not c["stitched"])
    stored = sorted((i, la, ra, int(seq), int(e) - int(s), CAT[int(cat)],
                     tuple(re.findall(r"'((?:[^'\\]|\\.)*)'", fr)), itf == "1")
                    for i, la, ra, seq, s, e, cat, fr, itf in ch.query(
                        f"SELECT r.id, local_addr, remote_addr, tx_seq, call_start_ns, call_end_ns, "
                        f"category, frames, interference FROM {db}.calls ANY INNER JOIN "
                        f"(SELECT rid, id FROM {db}.requests) AS r USING (rid)"))
    return calls, stored


def key(frames, cat):
    return (tuple(frames), cat)


def check_tables(tap, ch, db, rep):
    reqs = rep["requests"]
    nseg = sum(len(q.get("critical_path") or []) for q in reqs)
    n = int(ch.scalar(f"SELECT count() FROM {db}.requests"))
    tap.ok(f"store: {n} request rows, report has {len(reqs)}", n == len(reqs))
    s = int(ch.scalar(f"SELECT count() FROM {db}.segments"))
    tap.ok(f"store: {s} segment rows, report has {nseg}", s == nseg)
    u = int(ch.scalar(f"SELECT uniqExact(rid) FROM {db}.requests"))
    tap.ok("store: every request has a rid of its own", u == n, f"{u} distinct of {n}")
    bad_day = int(ch.scalar(f"SELECT count() FROM {db}.requests WHERE day != "
                            f"toDate(toDateTime(intDiv(start_ns, 1000000000)))"))
    tap.ok("store: day is the request's start (UTC)", bad_day == 0, f"{bad_day} rows off")
    # a few requests, field by field
    mism = []
    by_id = {q["id"]: q for q in reqs}
    rows = ch.query(f"SELECT id, service, name, latency_ns, nsegs, partial, downstream, "
                    f"protocol, status FROM {db}.requests ORDER BY latency_ns DESC LIMIT 20")
    for rid, svc, name, lat, nsegs, partial, down, proto, status in rows:
        q = by_id.get(rid)
        want = q and (q["service"], q["name"], q["latency_ns"], len(q["critical_path"]),
                      bool(q.get("partial")), bool(q.get("downstream")))
        got = (svc, name, int(lat), int(nsegs), partial == "1", down == "1")
        if want != got:
            mism.append(f"{rid}: stored {got}, report {want}")
        elif svc.startswith("frontend") and (proto != "http" or status != "200"):
            mism.append(f"{rid}: protocol {proto} status {status}")
    tap.ok("store: the 20 slowest requests' rows are the report's", rows and not mism,
           "\n".join(mism[:10]))
    # one request's path, segment by segment
    q = max(reqs, key=lambda q: len(q["critical_path"]))
    segs = ch.query(f"SELECT seq, dur_ns, category, frames, pid, tid, comm, interference, "
                    f"culprit_comm FROM {db}.segments WHERE rid = (SELECT any(rid) FROM "
                    f"{db}.requests WHERE id = '{q['id']}') ORDER BY seq")
    want = [(i, g["end_ns"] - g["start_ns"], g["category"], g.get("frames"), g.get("pid"),
             g.get("tid")) for i, g in enumerate(q["critical_path"])]
    got = []
    for seq, d, cat, frames, pid, tid, *_ in segs:
        items, p = [], frames
        got.append((int(seq), int(d), CAT[int(cat)],
                    re.findall(r"'((?:[^'\\]|\\.)*)'", frames), int(pid), int(tid)))
    tap.ok(f"store: request {q['id']}'s {len(want)} segments as the report's", got == [
        (a, b, c, d, e if e is not None else -1, f if f is not None else -1)
        for a, b, c, d, e, f in want], f"stored {got[:3]}\nreport {want[:3]}")
    # the profile from steps (the report counts a downstream request in its
    # caller's path only)
    prof = {key(p["frames"], p["category"]): (p["total_ns"], p["requests"])
            for p in rep["profile"]}
    stored = {}
    for frames, cat, total, nreq in ch.query(
            f"SELECT frames, category, sum(ns) AS t, uniqExact(rid) FROM {db}.steps "
            f"WHERE downstream = 0 GROUP BY frames, category"):
        stored[key(re.findall(r"'((?:[^'\\]|\\.)*)'", frames), CAT[int(cat)])] = (
            int(total), int(nreq))
    diff = [f"{k}: stored {stored.get(k)}, report {v}" for k, v in prof.items()
            if stored.get(k) != v]
    diff += [f"{k}: stored only" for k in stored if k not in prof]
    tap.ok(f"store: steps give the report's profile ({len(prof)} steps: total, requests)",
           prof and not diff, "\n".join(diff[:10]))
    # the contention table from blame
    cont = {(c["pid"], c["tid"], c["comm"], c["category"]): (c["ns"], c["requests"])
            for c in rep["contention"]}
    blame = {}
    for pid, tid, comm, cat, ns, nreq in ch.query(
            f"SELECT pid, tid, comm, category, sum(ns) AS t, uniqExact(rid) FROM {db}.blame "
            f"WHERE downstream = 0 GROUP BY pid, tid, comm, category"):
        blame[(int(pid), int(tid), comm, CAT[int(cat)])] = (int(ns), int(nreq))
    diff = [f"{k}: stored {blame.get(k)}, report {v}" for k, v in cont.items()
            if blame.get(k) != v]
    tap.ok(f"store: blame gives the report's contention table ({len(cont)} culprits)",
           cont and not diff and len(blame) == len(cont), "\n".join(diff[:10]))
    top = ch.query(f"SELECT comm, sum(ns) AS t FROM {db}.blame WHERE category = 2 "
                   f"GROUP BY comm ORDER BY t DESC LIMIT 1")
    tap.ok("store: cache-maint is the lock's top culprit", top and top[0][0] == "cache-maint",
           f"{top}")
    host = ch.query(f"SELECT DISTINCT host, boot FROM {db}.requests")
    with open("/proc/sys/kernel/random/boot_id") as f:
        boot = f.read().strip()
    tap.ok("store: host and boot id are the recording's", len(host) == 1 and
           host[0][1] == boot and host[0][0] == reqs[0]["host"], f"{host}")


def main():
    tap = Tap()
    if not tap.ok("critpath, the demo and ClickHouse are there", os.access(CRITPATH, os.X_OK)
                  and os.access(os.path.join(DEMO, "frontend"), os.X_OK) and chlib.binary(),
                  f"{CRITPATH}, {DEMO}/frontend, clickhouse-server (make deps)"):
        K.done(tap)
    ch = chlib.Server("store", users={"writer": "s3cret pass"})
    try:
        ch.start()
    except RuntimeError as e:
        tap.ok("ClickHouse starts", False, str(e))
        K.done(tap)
    tap.ok(f"ClickHouse answered /ping after {ch.start_seconds:.2f} s", True)
    rep, path, fe = record_demo(tap)
    if rep is None:
        ch.remove()
        K.done(tap)
    r = store([path, ch.url("cp")])
    m = re.search(r"(\d+) requests \((\d+) segments\) stored into clickhouse://127\.0\.0\.1:"
                  r"\d+/cp in (\d+) batch", r.stderr)
    tap.ok("store: exits 0 and says what it stored", r.returncode == 0 and m,
           f"exit {r.returncode}\n{r.stderr[-2000:]}")
    check_tables(tap, ch, "cp", rep)
    check_wire(tap, ch, "cp", path)
    if fe:
        r = store([fe, ch.url("fe"), "-q"])
        calls, stored = check_wire(tap, ch, "fe", fe)
        tap.ok(f"store: the front end's {len(calls)} calls to kvstore as dump --requests",
               r.returncode == 0 and calls and calls == stored,
               f"{r.stderr}\nstored {stored[:2]}\ndump {calls[:2]}")
    batches = ch.query("SELECT batch, count() FROM cp.requests GROUP BY batch")
    tap.ok(f"store: {len(batches)} batches, as it said", m and len(batches) == int(m[3]),
           f"{batches}")

    # refusals
    ch.query("CREATE DATABASE other")
    ch.query("CREATE TABLE other.critpath_schema (version UInt32) ENGINE = MergeTree "
             "ORDER BY version")
    ch.query("INSERT INTO other.critpath_schema VALUES (7)")
    r = store([path, ch.url("other")])
    tap.ok("store: a schema of another version is refused, the version named",
           r.returncode == 1 and "version 7" in r.stderr, f"exit {r.returncode}: {r.stderr}")
    tables = ch.query("SELECT name FROM system.tables WHERE database = 'other'")
    tap.ok("store: nothing made in a database it refuses", tables == [["critpath_schema"]],
           f"{tables}")
    r = store([path, "clickhouse://127.0.0.1:8123/no-dash"])
    tap.ok("store: a bad database name is a usage error, named",
           r.returncode == 2 and "database name" in r.stderr, f"exit {r.returncode}: {r.stderr}")
    dead = K.free_port()
    r = store([path, f"clickhouse://127.0.0.1:{dead}/cp"])
    tap.ok("store: ClickHouse not there: exit 1, the address and why",
           r.returncode == 1 and f"127.0.0.1:{dead}" in r.stderr and
           re.search(r"(?i)connect|refused", r.stderr), f"exit {r.returncode}: {r.stderr}")
    env = dict(os.environ, CLICKHOUSE_USER="writer", CLICKHOUSE_PASSWORD="wrong one")
    r = store([path, ch.url("cp2")], env=env)
    tap.ok("store: a wrong password: exit 1, the server's reason, the password not shown",
           r.returncode == 1 and "wrong one" not in r.stderr and "HTTP" in r.stderr,
           f"exit {r.returncode}: {r.stderr}")
    env["CLICKHOUSE_PASSWORD"] = "s3cret pass"
    r = store([path, ch.url("cp2"), "-q"], env=env)
    n = ch.scalar("SELECT count() FROM cp2.requests") if r.returncode == 0 else None
    tap.ok("store: user and password from CLICKHOUSE_USER / CLICKHOUSE_PASSWORD",
           r.returncode == 0 and int(n) == len(rep["requests"]) and "s3cret" not in r.stderr,
           f"exit {r.returncode}: {r.stderr}; {n} rows")
    r = store([path, f"clickhouse://writer:s3cret%20pass@127.0.0.1:{ch.http_port}/cp3"])
    tap.ok("store: user and password in the URL, never printed",
           r.returncode == 0 and "s3cret" not in r.stderr and "writer" not in r.stderr,
           f"exit {r.returncode}: {r.stderr}")
    r = store([path, ch.url("cp"), "--host", "renamed", "-q"])
    hosts = sorted(h for (h,) in ch.query("SELECT DISTINCT host FROM cp.requests"))
    tap.ok("store --host: the requests' host renamed", r.returncode == 0 and
           "renamed" in hosts and len(hosts) == 2, f"{hosts} {r.stderr}")
    if tap.failed:
        print(f"# clickhouse log:\n# " + ch.log_tail().replace("\n", "\n# "))
    ch.remove()
    K.done(tap)


if __name__ == "__main__":
    main()
