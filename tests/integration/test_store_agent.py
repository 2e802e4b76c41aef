#!/usr/bin/env python3
# SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
"""critpath agent --store: the demo under load, every request stored into a
private ClickHouse, which is killed (SIGKILL, as a crash) mid-run and
started again on its data. The agent keeps running, says the store is
failing and then writing again, counts what its 1 MiB buffer could not
keep, and accounts for every request (stored + dropped + failed = seen);
what ClickHouse holds is what the agent says it stored, requests from after
the restart arrive, and no batch is stored twice (a row per rid and segment
index). Then: a store of another schema version stops the agent at start."""
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import chlib  # noqa: E402
import kpathlib as K  # noqa: E402
from tap import BUILD, CRITPATH, Tap, sanitizer_report  # noqa: E402

DEMO = os.path.join(BUILD, "demo")
RUN_S = 22


def wait_for(pred, timeout):
    t0 = time.time()
    while time.time() - t0 < timeout:
        if pred():
            return True
        time.sleep(0.1)
    return False


def read(path):
    with open(path, errors="replace") as f:
        return f.read()


def main():
    tap = Tap()
    if not tap.ok("critpath, the demo and ClickHouse are there", os.access(CRITPATH, os.X_OK)
                  and os.access(os.path.join(DEMO, "frontend"), os.X_OK) and chlib.binary(),
                  f"{CRITPATH}, {DEMO}/frontend, clickhouse-server (make deps)"):
        K.done(tap)
    d = K.workdir("store-agent")
    ch = chlib.Server("agent")
    try:
        ch.start()
    except RuntimeError as e:
        tap.ok("ClickHouse starts", False, str(e))
        K.done(tap)
    port, kv_port = K.free_port(), K.free_port()
    kv = K.spawn([os.path.join(DEMO, "kvstore"), "--port", str(kv_port)],
                 stderr=subprocess.DEVNULL)
    K.wait_port(kv_port, kv)
    front = K.spawn([os.path.join(DEMO, "frontend"), "--port", str(port), "--kv-port",
                     str(kv_port)], stderr=subprocess.DEVNULL)
    K.wait_port(port, front)
    errpath = os.path.join(d, "agent.stderr")
    err = open(errpath, "w")
    agent = K.spawn([CRITPATH, "agent", "-p", f"{front.pid},{kv.pid}", "-d", str(RUN_S),
                     "--store", ch.url("fleet"), "--store-buffer-mb", "1",
                     "--status-every", "1s"], stdout=err, stderr=subprocess.STDOUT)
    if not tap.ok("agent starts", wait_for(lambda: "following" in read(errpath), 30),
                  read(errpath)):
        K.done(tap)
    t_start = time.time()
    load = K.spawn([os.path.join(DEMO, "loadgen"), "--port", str(port), "-c", "4", "-d",
                    str(RUN_S - 6), "--think-ms", "2"], stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    before = wait_for(lambda: int(ch.scalar("SELECT count() FROM fleet.requests") or 0) > 0,
                      10)
    tap.ok("requests stored while ClickHouse runs", before)
    ch.stop(kill=True)
    down_s = time.time() - t_start
    time.sleep(5)
    restart_ns = time.time_ns()
    ch.start()
    tap.ok(f"ClickHouse killed {down_s:.1f} s in, started again 5 s later "
           f"(/ping after {ch.start_seconds:.2f} s)", True)
    rc = agent.wait(timeout=RUN_S + 60)
    load.wait(timeout=30)
    err.close()
    text = read(errpath)
    san = sanitizer_report(text)
    tap.ok("agent survives the outage and exits 0", rc == 0 and not san,
           f"exit {rc}\n{san or text[-3000:]}")
    tap.ok("agent says the store is failing, with why", re.search(
        r"store failing \(retrying, \d+ KiB waiting\): clickhouse://127\.0\.0\.1:\d+/fleet: ",
        text), text[-3000:])
    tap.ok("agent says the store writes again", "store: writing again" in text, text[-3000:])
    tap.ok("the status lines show the store failing while it is down",
           re.search(r"status: .*store: .* failed, failing: ", text), text[-3000:])
    m = re.search(r"store: (\d+) requests \((\d+) segments\) stored in (\d+) batches; not "
                  r"stored: (\d+) requests \((\d+) segments\) dropped .*?, (\d+) \((\d+) "
                  r"segments\) failed", text)
    seen = re.search(r"total: (\d+) requests", text)
    if not tap.ok("agent's exit summary of the store", m and seen, text[-3000:]):
        ch.remove()
        K.done(tap)
    stored, segs, batches, dropped, dsegs, failed = (int(x) for x in m.groups()[:6])
    tap.ok(f"the loss is counted: {dropped} requests ({dsegs} segments) dropped, "
           f"{failed} failed", dropped + failed > 0, text[-2000:])
    tap.ok(f"every request accounted for: {stored} stored + {dropped} dropped + {failed} "
           f"failed = {seen[1]} seen", stored + dropped + failed == int(seen[1]), "")
    n = int(ch.scalar("SELECT count() FROM fleet.requests"))
    s = int(ch.scalar("SELECT count() FROM fleet.segments"))
    tap.ok(f"ClickHouse holds what the agent stored: {n} requests, {s} segments",
           n == stored and s == segs, f"agent said {stored} requests, {segs} segments")
    nb = int(ch.scalar("SELECT uniqExact(batch) FROM fleet.requests"))
    tap.ok(f"{nb} batches, as the agent said", nb == batches, f"agent said {batches}")
    dup = ch.query("SELECT count(), uniqExact(rid) FROM fleet.requests")
    dseg = ch.query("SELECT count(), uniqExact(rid, seq) FROM fleet.segments")
    dsteps = ch.query("SELECT count(), uniqExact(rid, frames, category, sku) FROM fleet.steps")
    tap.ok("no batch stored twice: one row per request, per segment, per step",
           dup[0][0] == dup[0][1] and dseg[0][0] == dseg[0][1] and
           dsteps[0][0] == dsteps[0][1], f"requests {dup}, segments {dseg}, steps {dsteps}")
    late = int(ch.scalar(f"SELECT count() FROM fleet.requests WHERE start_ns > {restart_ns}"))
    tap.ok(f"requests from after the restart arrive ({late})", late > 0, "")
    found = re.search(r"(\d+) inserts whose answer was lost were found stored", text)
    if found:
        tap.ok(f"{found[1]} inserts in flight at the kill found stored, not resent", True)

    # a schema of another version stops the agent before it attaches
    ch.query("CREATE DATABASE other")
    ch.query("CREATE TABLE other.critpath_schema (version UInt32) ENGINE = MergeTree "
             "ORDER BY version")
    ch.query("INSERT INTO other.critpath_schema VALUES (9)")
    r = subprocess.run([CRITPATH, "agent", "-p", str(kv.pid), "-d", "2", "--store",
                        ch.url("other")], capture_output=True, text=True, timeout=60)
    tap.ok("agent --store on a schema of another version: exit 1, the version named",
           r.returncode == 1 and "version 9" in r.stderr, f"exit {r.returncode}: {r.stderr}")
    r = subprocess.run([CRITPATH, "agent", "-p", str(kv.pid), "--store", "http://x/db"],
                       capture_output=True, text=True, timeout=60)
    tap.ok("agent --store with a URL not clickhouse://: exit 2, said",
           r.returncode == 2 and "--store" in r.stderr, f"exit {r.returncode}: {r.stderr}")
    K.stop(front)
    K.stop(kv)
    if tap.failed:
        print("# clickhouse log:\n# " + ch.log_tail().replace("\n", "\n# "))
    ch.remove()
    K.done(tap)


if __name__ == "__main__":
    main()
