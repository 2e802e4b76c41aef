#!/usr/bin/env python3
# SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
"""report clickhouse://… (docs/store.md): the demo (frontend + kvstore, its
cache-maint thread holding the lock for ~15 ms every 200 ms) recorded with
--probe, stored with `critpath store` into a private ClickHouse, then
reported from the store and from the recording. The store's report is
aggregated in the database, yet must be the recording's: the text report
byte for byte (but the recording's warnings, which are not stored), the
json's summary, profile, contention and hosts, and every request with its
path; with filters (--service, --name, --min-latency, --from/--to as
times, the same filters in the URL); `diff` of two time ranges of one
store; and one-line answers for a database that is not a store, an empty
store, and a server that is not there."""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import chlib  # noqa: E402
import kpathlib as K  # noqa: E402
from tap import BUILD, CRITPATH, Tap  # noqa: E402

DEMO = os.path.join(BUILD, "demo")


def run(args, timeout=300):
    return subprocess.run([CRITPATH, *args], capture_output=True, text=True, timeout=timeout)


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
                        "-d", "4", "--think-ms", "2"], capture_output=True, timeout=60,
                       check=True)
    probes = ["--probe", "lookup", "--probe", "kv_get", "--probe", "price_cart"]
    rep, path = K.record_workload(tap, "store-report", [front.pid, kv.pid], drive, seconds=7,
                                  extra=probes)
    K.stop(front)
    K.stop(kv)
    return rep, path


def without_warnings(text):
    i = text.find("\nWarnings (")
    return (text if i < 0 else text[:i]).rstrip()


def report(inp, *args, fmt="text"):
    r = run(["report", inp, "-q", "-f", fmt, *args])
    if r.returncode != 0:
        return None, r.stderr
    return (json.loads(r.stdout) if fmt == "json" else r.stdout), r.stderr


def same_requests(a, b):
    """The same requests with the same paths; times differ by each request's
    realtime offset (the store keeps Unix-epoch times)"""
    ra = {r["id"]: r for r in a}
    rb = {r["id"]: r for r in b}
    if set(ra) != set(rb):
        return f"ids: {len(set(ra) - set(rb))} only in the recording's, " \
               f"{len(set(rb) - set(ra))} only in the store's"
    for i, r in ra.items():
        s = rb[i]
        off = s["start_ns"] - r["start_ns"]
        for k in r:
            if k not in ("start_ns", "end_ns", "critical_path") and r[k] != s.get(k):
                return f"request {i}: {k} {r[k]!r} != {s.get(k)!r}"
        if s["end_ns"] - r["end_ns"] != off or len(r["critical_path"]) != len(s["critical_path"]):
            return f"request {i}: latency or path length differ"
        for g, h in zip(r["critical_path"], s["critical_path"]):
            g = dict(g, start_ns=g["start_ns"] + off, end_ns=g["end_ns"] + off)
            if g != h:
                return f"request {i}: segment {g} != {h}"
    return ""


def compare(tap, what, rec_args, store_src, store_args=None):
    store_args = rec_args if store_args is None else store_args
    t1, e1 = report(REC, *rec_args, "--requests", "5", "--top", "100")
    t2, e2 = report(store_src, *store_args, "--requests", "5", "--top", "100")
    ok = t1 is not None and t2 is not None and without_warnings(t1) == without_warnings(t2)
    detail = f"recording: {e1}\nstore: {e2}"
    if t1 is not None and t2 is not None and not ok:
        import difflib
        detail = "".join(list(difflib.unified_diff(t1.splitlines(True), t2.splitlines(True),
                                                   "recording", "store"))[:60])
    tap.ok(f"{what}: the text report from the store is the recording's", ok, detail)
    j1, e1 = report(REC, *rec_args, fmt="json")
    j2, e2 = report(store_src, *store_args, fmt="json")
    if not tap.ok(f"{what}: json from both", j1 is not None and j2 is not None,
                  f"recording: {e1}\nstore: {e2}"):
        return None
    for k in ("summary", "profile", "contention", "hosts"):
        tap.ok(f"{what}: json {k} equal", j1.get(k) == j2.get(k),
               f"recording: {json.dumps(j1.get(k))[:600]}\nstore: {json.dumps(j2.get(k))[:600]}")
    why = same_requests(j1["requests"], j2["requests"])
    tap.ok(f"{what}: json lists the same {len(j1['requests'])} requests with the same paths",
           not why, why)
    return j1


REC = None


def main():
    global REC
    tap = Tap()
    if not tap.ok("critpath, the demo and ClickHouse are there",
                  os.access(CRITPATH, os.X_OK) and os.access(os.path.join(DEMO, "frontend"),
                                                             os.X_OK)
                  and chlib.binary() is not None, "build first; make deps installs ClickHouse"):
        K.done(tap)
    ch = chlib.Server("report")
    try:
        ch.start()
    except (RuntimeError, OSError) as e:
        tap.ok("a private ClickHouse starts", False, str(e))
        K.done(tap)
    rep, REC = record_demo(tap)
    if rep is None:
        K.done(tap)
    url = ch.url("fleet")
    r = run(["store", REC, url])
    if not tap.ok("critpath store loads the recording", r.returncode == 0,
                  r.stdout + r.stderr):
        K.done(tap)
    culprits = {c["comm"] for c in rep.get("contention", []) if c["category"] == "lock"}
    tap.ok("the recording names cache-maint as the lock holder", "cache-maint" in culprits,
           str(culprits))
    j = compare(tap, "whole", [], url)

    # filters: the report's options, and the same in the URL
    front = next((p["frames"][0] for p in rep["profile"] if p["frames"]), "")
    kv = next((r["service"] for r in rep["requests"] if r.get("downstream")), "")
    compare(tap, "--service (the front end)", ["--service", front], url)
    compare(tap, "--service (kvstore, served to the front end)", ["--service", kv], url)
    compare(tap, "--name and --min-latency", ["--name", "GET /cart", "--min-latency", "1ms"],
            url)
    compare(tap, "URL filters", ["--name", "GET /cart", "--min-latency", "1ms"],
            url + "?name=GET%20/cart&min-latency=1ms", [])
    if j:
        starts = sorted(ch.query("SELECT start_ns FROM fleet.requests ORDER BY start_ns"))
        cut = int(starts[len(starts) // 2][0]) if starts else 0
        t = f"{cut / 1e9:.6f}"
        compare(tap, "--from (a time)", ["--from", t], url)
        compare(tap, "--to (a time)", ["--to", t], url)
        d = run(["diff", url + f"?to={t}", url + f"?from={t}"])
        tap.ok("diff of two time ranges of one store", d.returncode == 0 and "GET" in d.stdout,
               d.stdout[-800:] + d.stderr)

    # the one-line answers
    ch.query("CREATE DATABASE IF NOT EXISTS notastore")
    r = run(["report", ch.url("notastore")])
    tap.ok("a database that is not a store: said in one line",
           r.returncode == 1 and "no critpath store" in r.stderr
           and len(r.stderr.strip().splitlines()) == 1, r.stderr)
    r = run(["store", "--help"])
    empty = ch.url("emptystore")
    ch.query("CREATE DATABASE IF NOT EXISTS emptystore")
    # a store with its tables and no rows: what an agent makes before its first batch
    s = run(["store", os.devnull, empty])
    r = run(["report", empty])
    tap.ok("an empty store: said in one line",
           r.returncode == 1 and ("no requests" in r.stderr or "no critpath store" in r.stderr)
           and len(r.stderr.strip().splitlines()) == 1, s.stderr + r.stderr)
    port = chlib.free_port()
    r = run(["report", f"clickhouse://127.0.0.1:{port}/fleet"])
    tap.ok("no server there: said in one line, naming it",
           r.returncode == 1 and f"127.0.0.1:{port}" in r.stderr
           and len(r.stderr.strip().splitlines()) == 1, r.stderr)
    ch.stop()
    K.done(tap)


if __name__ == "__main__":
    main()
