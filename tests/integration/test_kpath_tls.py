#!/usr/bin/env python3
# SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
"""record's TLS plaintext capture (uprobes on OpenSSL's SSL_read/SSL_write):
kp_tls_server serves HTTPS (libssl, a self-signed certificate made here with
the openssl CLI) to a client using python's ssl module over loopback, CONNS
keep-alive connections of PER_CONN "GET /x" requests, each computing WORK_MS
of CPU. Recorded with -p, report names every one of them "GET /x" (the
socket records carry ciphertext), plus the two handshake exchanges of each
connection; the requests' paths tile them and hold the server's CPU time.
The recording has one tls_read record per request, with the request's
plaintext, and SSL_write's socket writes carry the response's plaintext.
With --ex the server uses SSL_read_ex/SSL_write_ex, recorded as a launched
command (`-- CMD`, attached once it has exec'd). --no-tls gives the
unnamed fallback, and --payload-bytes bounds the plaintext (0: none). A
libssl loaded by dlopen after the recording began, and short-lived forks of
a TLS process, are attached too."""
import os
import re
import shutil
import signal
import socket
import ssl
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kpathlib as K  # noqa: E402
import reclib as R  # noqa: E402
from tap import CRITPATH, WORKLOADS, Tap  # noqa: E402

SERVER = os.path.join(WORKLOADS, "kp_tls_server")
CONNS, PER_CONN = 2, 10
N = CONNS * PER_CONN
WORK_MS = 3
REQUEST = b"GET /x HTTP/1.1\r\nHost: localhost\r\n\r\n"


def make_cert(d):
    """A self-signed certificate and key; None when openssl is missing."""
    kc = K.tls_cert(d)
    return (kc[1], kc[0]) if kc else None


def https_client(port, conns=CONNS, per_conn=PER_CONN):
    """conns connections, per_conn requests each, one at a time."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    for _ in range(conns):
        with ctx.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=10)) as s:
            for _ in range(per_conn):
                s.sendall(REQUEST)
                buf = b""
                while not buf.endswith(b"ok\n"):
                    d = s.recv(4096)
                    if not d:
                        raise RuntimeError(f"server closed after {buf!r}")
                    buf += d
                if not buf.startswith(b"HTTP/1.1 200"):
                    raise RuntimeError(f"unexpected reply {buf!r}")


def names_of(reqs):
    c = {}
    for q in reqs:
        c[q.get("name")] = c.get(q.get("name"), 0) + 1
    return c


def check_named(tap, what, rep, port):
    """Every request named, with the server's CPU on its path."""
    reqs = K.service_requests(rep, port)
    names = names_of(reqs)
    tap.ok(f"{what}: report names the {N} requests 'GET /x' and each connection's 2 "
           f"handshake exchanges 'TLS handshake'",
           names.get("GET /x") == N and names.get("TLS handshake") == 2 * CONNS
           and len(names) == 2, f"names {names}")
    K.check_tiling(tap, what, rep.get("requests", []))
    gets = [q for q in reqs if q.get("name") == "GET /x"]
    if gets:
        cpu = statistics.median(
            K.path_ns(q, lambda g: g.get("category") == "cpu" and g.get("pid") is not None)
            for q in gets)
        mid = sorted(gets, key=lambda q: q["latency_ns"])[len(gets) // 2]
        tap.ok(f"{what}: a request's path holds the server's {WORK_MS} ms of CPU (median "
               f"{K.fmt_ms(cpu)})", WORK_MS * 0.85 * K.MS <= cpu <= (WORK_MS + 2) * K.MS,
               K.describe(mid))
    return reqs


def check_dump(tap, what, path, pid):
    d = R.Dump(path)
    if not tap.ok(f"{what}: dump --json reads the recording", d.ok(), d.problem()):
        return
    reads = d.of("tls_read")
    tap.ok(f"{what}: one tls_read per request, with its plaintext ({len(reads)} records)",
           len(reads) == N and all(r.get("payload", "").startswith("GET /x HTTP/1.1")
                                   and r.get("bytes") == len(REQUEST) for r in reads),
           f"{reads[:3]}")
    writes = [r for r in d.of("sock", pid=pid) if r.get("tls") and r.get("payload")]
    tap.ok(f"{what}: SSL_write's socket writes carry the response's plaintext "
           f"({len(writes)} with a payload)",
           sum(1 for r in writes if r["payload"].startswith("HTTP/1.1 200 OK")) == N,
           f"{writes[:3]}")
    hooks = d.of("hook", name=f"tls pid {pid}")
    tap.ok(f"{what}: the hook list says TLS capture is on in the server",
           len(hooks) == 1 and hooks[0].get("status") == "attached"
           and "libssl" in hooks[0].get("detail", ""), f"{d.of('hook')[-3:]}")
    # Debian's libssl begins SSL_read and SSL_write with `sub $0x18,%rsp`,
    # which a uprobe single-steps (~11 us a hit on these VMs, against 0.6
    # for an emulated push): they are probed at the functions they call
    # (user/record/tls_at.c), and no probe of the library is single-stepped
    detail = hooks[0].get("detail", "") if hooks else ""
    tap.ok(f"{what}: no TLS probe is single-stepped ({detail!r})",
           "SSL_read" in detail and "stepped" not in detail)


def busy(tap, port, pid):
    """Recorded while a client is already busy on its connection: the TLS
    uprobes are on before the other programs, so requests are named from
    the first one (not ~40 ms of ciphertext in), bar one in flight."""
    import threading
    stop = threading.Event()
    done = []

    def loop():
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        with ctx.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=10)) as s:
            while not stop.is_set():
                s.sendall(REQUEST)
                buf = b""
                while not buf.endswith(b"ok\n"):
                    d = s.recv(4096)
                    if not d:
                        return
                    buf += d
                done.append(1)
    th = threading.Thread(target=loop)
    th.start()
    time.sleep(1)
    try:
        rep, path = K.record_workload(tap, "tls-busy", [pid], lambda: time.sleep(1.5),
                                      seconds=8)
    finally:
        stop.set()
        th.join()
    if rep is None:
        return
    names = names_of(K.service_requests(rep, port))
    tap.ok(f"tls-busy: a client busy before the recording: its requests named 'GET /x' "
           f"from the first ({names})", names.get("GET /x", 0) >= 20
           and sum(n for k, n in names.items() if k != "GET /x") <= 2, f"names {names}")



def launched(tap, cert, key):
    """--ex, as `record -- CMD`: attached once the server has exec'd."""
    d = K.workdir("tls")
    path, errpath = os.path.join(d, "launched.rec"), os.path.join(d, "launched.stderr")
    port = K.free_port()
    argv = [CRITPATH, "record", "-o", path, "--", SERVER, "--cert", cert, "--key", key,
            "--port", str(port), "--work-ms", str(WORK_MS), "--ex"]
    with open(errpath, "w") as err:
        p = K.spawn(argv, stdout=subprocess.DEVNULL, stderr=err)
    deadline, text = time.time() + 30, ""
    while time.time() < deadline and p.poll() is None:
        with open(errpath) as f:
            text = f.read()
        if "TLS plaintext from" in text:
            break
        time.sleep(0.05)
    if not tap.ok("tls -- CMD: the recorder attaches in the launched server once it has "
                  "exec'd", "TLS plaintext from" in text, f"{' '.join(argv)}\n{text[-1500:]}"):
        K.stop(p, signal.SIGINT)
        return
    try:
        K.wait_port(port, p)
        https_client(port)
    except (RuntimeError, OSError) as e:
        tap.ok("tls -- CMD: load ran", False, str(e))
    time.sleep(0.2)
    p.send_signal(signal.SIGINT)
    p.wait(timeout=60)
    with open(errpath) as f:
        text = f.read()
    tap.ok("tls -- CMD: the summary lists the process with TLS capture",
           p.returncode == 0 and "TLS plaintext captured in 1 process" in text,
           f"exit {p.returncode}\n{text[-1500:]}")
    rep, err = K.report_json(path)
    if tap.ok("tls -- CMD: report reads the recording", rep is not None, err):
        check_named(tap, "tls -- CMD (SSL_read_ex/SSL_write_ex)", rep, port)


# python3 loads libssl with dlopen when ssl is imported, 0.3 s after it
# started: the recorder looks at a process the tick after its exec, then 1 s
# and 3 s after that, so the look 1 s in finds libssl and the one 3 s in
# would too on a machine slow to start python. Then it forks KIDS children.
# A fork is looked at as soon as the recorder reads it (the ring wakes it for
# a fork), but the first uprobe attached after a quiet spell waits out an RCU
# grace period in the kernel (uprobe registration takes dup_mmap_sem for
# writing), 5-25 ms here and more on a loaded machine: the children live
# 300 ms, so that this is not a race.
LATE_SSL = """import os, sys, time
time.sleep(0.3)
import ssl
time.sleep(3.0)
kids = []
for i in range(%d):
    pid = os.fork()
    if pid == 0:
        time.sleep(%s)
        os._exit(0)
    kids.append(pid)
for k in kids:
    os.waitpid(k, 0)
print(" ".join(map(str, kids)), flush=True)
"""
KIDS = 5


def late_and_forked(tap):
    """A libssl loaded by dlopen after the recording began is found by the
    tick's later looks; a fork of a TLS process is attached when its fork is
    read, from its first requests (a pre-fork server's workers)."""
    path = os.path.join(K.workdir("tls"), "late.rec")
    r = R.run([CRITPATH, "record", "-q", "-o", path, "--", sys.executable, "-c",
               LATE_SSL % (KIDS, 0.3)], timeout=60)
    kids = [int(x) for x in r.out.split()] if r.rc == 0 else []
    d = R.Dump(path)
    hooks = {h.get("name"): h.get("status") for h in d.of("hook")}
    # a process looked at on its fork has its hook record stamped with the
    # fork's time; one left to the tick, with the tick's
    hook_ts = {h.get("name"): h.get("ts_ns") for h in d.of("hook")}
    fork_ts = {x["child_pid"]: x["ts_ns"] for x in d.of("process_fork")}
    parent = [x["pid"] for x in d.of("process_exec") if x["pid"] not in kids]
    tap.ok(f"tls late: the launched python, which imports ssl 0.3 s in, is attached "
           f"({parent})", r.rc == 0 and parent and hooks.get(f"tls pid {parent[0]}") ==
           "attached", f"{r.describe()}\nhooks {hooks}")
    tap.ok(f"tls late: its {KIDS} children are attached, each when its fork was read",
           len(kids) == KIDS and all(hooks.get(f"tls pid {k}") == "attached" and
                                     hook_ts.get(f"tls pid {k}") == fork_ts.get(k)
                                     for k in kids),
           f"children {kids}\nhooks {hooks}\nhook ts {hook_ts}\nfork ts {fork_ts}")
    tap.ok(f"tls late: the summary counts {KIDS + 1} processes",
           f"TLS plaintext captured in {KIDS + 1} processes" in r.err, r.err[-1500:])



def fast_forks(tap):
    """Children that exit at once, before the recorder can attach in them:
    each is either attached when its fork was read or said to be missed,
    in its hook record, the summary and report's warnings; none is
    silent."""
    path = os.path.join(K.workdir("tls"), "fast.rec")
    r = R.run([CRITPATH, "record", "-q", "-o", path, "--", sys.executable, "-c",
               LATE_SSL % (KIDS, 0)], timeout=60)
    kids = [int(x) for x in r.out.split()] if r.rc == 0 else []
    d = R.Dump(path)
    hooks = {h.get("name"): h for h in d.of("hook")}
    fork_ts = {x["child_pid"]: x["ts_ns"] for x in d.of("process_fork")}
    attached = [k for k in kids if hooks.get(f"tls pid {k}", {}).get("status") == "attached"
                and hooks[f"tls pid {k}"].get("ts_ns") == fork_ts.get(k)]
    missed = [k for k in kids if hooks.get(f"tls pid {k}", {}).get("status") == "unavailable"
              and re.fullmatch(r"no TLS plaintext: exited [0-9.]+ ms after its fork, before "
                               r"its uprobes were attached",
                               hooks[f"tls pid {k}"].get("detail", ""))]
    tap.ok(f"tls fast forks: each of {KIDS} children that exit at once is attached from its "
           f"fork or said to be missed ({len(attached)} attached, {len(missed)} missed)",
           len(kids) == KIDS and len(attached) + len(missed) == KIDS,
           f"{r.describe()}\nchildren {kids}\nhooks {hooks}")
    said = re.search(r"(\d+) forks? of them exited before (its|their) uprobes were attached",
                     r.err)
    tap.ok(f"tls fast forks: the summary counts {len(missed)} missed and "
           f"{1 + len(attached)} captured",
           (int(said.group(1)) if said else 0) == len(missed) and
           f"TLS plaintext captured in {1 + len(attached)} process" in r.err, r.err[-1500:])
    rep, err = K.report_json(path)
    warned = [w for w in (rep or {}).get("warnings") or []
              if w.startswith(f"TLS plaintext was not captured in {len(missed)} process")]
    tap.ok("tls fast forks: report warns of the missed ones", rep is not None and
           (bool(warned) == bool(missed)), f"{err}\nwarnings {(rep or {}).get('warnings')}")


def main():
    tap = Tap()
    if not tap.ok("critpath and kp_tls_server are built",
                  os.access(CRITPATH, os.X_OK) and os.access(SERVER, os.X_OK),
                  f"{CRITPATH} or {SERVER} missing"):
        K.done(tap)
    if not shutil.which("openssl"):
        tap.skip("tls", "no openssl command (tools/deps.sh installs it)")
        K.done(tap)
    pair = make_cert(K.workdir("tls"))
    if not tap.ok("a self-signed certificate made with openssl", pair, "openssl req failed"):
        K.done(tap)
    cert, key = pair
    server, sf = K.start_ready([SERVER, "--cert", cert, "--key", key,
                                "--work-ms", str(WORK_MS)])
    port, pid = sf["port"], sf["pid"]

    rep, path = K.record_workload(tap, "tls", [pid], lambda: https_client(port), seconds=8)
    if rep is not None:
        check_named(tap, "tls", rep, port)
        check_dump(tap, "tls", path, pid)

    busy(tap, port, pid)

    # --no-tls: the same requests, framed on their ciphertext
    rep, path = K.record_workload(tap, "tls-off", [pid], lambda: https_client(port), seconds=8,
                                  extra=["--no-tls"])
    if rep is not None:
        names = names_of(K.service_requests(rep, port))
        tap.ok("tls --no-tls: the requests are unnamed ('request'), the handshakes still "
               "named", names.get("request") == N and names.get("TLS handshake") == 2 * CONNS
               and "GET /x" not in names, f"names {names}")
        K.check_tiling(tap, "tls --no-tls", rep.get("requests", []))
        d = R.Dump(path)
        off = d.of("hook", name="tls")
        tap.ok("tls --no-tls: no plaintext recorded, the hook list says capture was off",
               d.ok() and not d.of("tls_read") and not any(r.get("tls") for r in d.of("sock"))
               and len(off) == 1 and off[0].get("status") == "unavailable",
               f"{off} {d.count_types()}")

    # --payload-bytes: the plaintext keeps to it (the larger reservation of
    # a prefix over 128 bytes is a program path of its own), 0 = none
    rep, path = K.record_workload(tap, "tls-300", [pid], lambda: https_client(port, 1),
                                  seconds=6, extra=["--payload-bytes", "300"])
    if rep is not None:
        names = names_of(K.service_requests(rep, port))
        reads = R.Dump(path).of("tls_read")
        tap.ok("tls --payload-bytes 300: requests named, the whole request in each tls_read",
               names.get("GET /x") == PER_CONN and len(reads) == PER_CONN
               and all(r.get("payload", "").encode() == REQUEST for r in reads),
               f"names {names}, {reads[:2]}")
    rep, path = K.record_workload(tap, "tls-0", [pid], lambda: https_client(port, 1),
                                  seconds=6, extra=["--payload-bytes", "0"])
    if rep is not None:
        names = names_of(K.service_requests(rep, port))
        d = R.Dump(path)
        tap.ok("tls --payload-bytes 0: no plaintext kept, the requests unnamed",
               names.get("request") == PER_CONN + 2 and not d.of("tls_read")
               and not any(r.get("payload") for r in d.of("sock")), f"names {names}")
    K.stop(server)

    launched(tap, cert, key)
    late_and_forked(tap)
    fast_forks(tap)
    K.done(tap)


if __name__ == "__main__":
    main()
