#!/usr/bin/env python3
# SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
"""A real third-party server over a Unix-domain socket: redis-server (Debian)
with --unixsocket and no TCP port, traced by PID, under redis-benchmark -s
-n 2000 -c 4 -t get,set. Unix-domain connections have no 4-tuple: they are
known by descriptor. Every request must be found (2000 GET and 2000 SET),
named by its RESP command, with service "redis-server:unix", tiled exactly,
and none partial (no loss at this load).

Then a connection open before the recording, both ends in the traced
process: its client end has an autobind address (SO_PASSCRED, as D-Bus's
clients do), its server end its listener's. Only the server end's
exchanges are requests, each found."""
import os
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kpathlib as K  # noqa: E402
from tap import CRITPATH, Tap  # noqa: E402

N = 2000


def main():
    tap = Tap()
    if not shutil.which("redis-server") or not shutil.which("redis-benchmark"):
        tap.skip("unix", "redis-server / redis-benchmark not installed (apt-get install "
                 "redis-server redis-tools)")
        K.done(tap)
    if not tap.ok("critpath is built", os.access(CRITPATH, os.X_OK), f"{CRITPATH} missing"):
        K.done(tap)
    d = K.workdir("unix")
    sock = os.path.join(d, "redis.sock")
    server = K.spawn(["redis-server", "--port", "0", "--unixsocket", sock,
                      "--save", "", "--appendonly", "no", "--daemonize", "no",
                      "--dir", d, "--logfile", os.path.join(d, "redis.log")],
                     stdout=subprocess.DEVNULL)
    deadline = time.time() + 10
    while not os.path.exists(sock) and time.time() < deadline and server.poll() is None:
        time.sleep(0.1)
    if not tap.ok("unix: redis-server listens on its Unix socket", os.path.exists(sock),
                  f"no {sock} after 10 s"):
        K.done(tap)
    bench = []

    def drive():
        r = subprocess.run(["redis-benchmark", "-s", sock, "-n", str(N), "-c", "4",
                            "-t", "get,set", "-q"],
                           capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            raise RuntimeError(f"redis-benchmark: exit {r.returncode}: {r.stderr[-500:]}")
        bench.append(r.stdout.strip().replace("\r", "\n"))
    rep, path = K.record_workload(tap, "unix", [server.pid], drive, seconds=10)
    K.stop(server)
    if rep is None:
        K.done(tap)
    reqs = [q for q in rep.get("requests", []) if q.get("service") == "redis-server:unix"]
    K.check_tiling(tap, "unix", rep.get("requests", []))
    by_name = {}
    for q in reqs:
        by_name[q.get("name")] = by_name.get(q.get("name"), 0) + 1
    for cmd in ("GET", "SET"):
        n = by_name.get(cmd, 0)
        tap.ok(f"unix: {n} {cmd} requests of redis-server:unix found, {N} sent",
               N * 0.99 <= n <= N + 2,
               f"requests by name: {by_name}\nservices: "
               f"{sorted({q.get('service') for q in rep.get('requests', [])})}\n"
               f"redis-benchmark: {bench}\nrecording {path}")
    partial = sum(1 for q in reqs if q.get("partial"))
    tap.ok("unix: no request partial (no loss at this load)", partial == 0,
           f"{partial} partial; warnings: {(rep.get('warnings') or [])[:5]}")
    slow = [q for q in reqs if q["latency_ns"] > 50 * K.MS]
    tap.ok("unix: request latencies are plausible (none over 50 ms)", not slow,
           "\n".join(K.describe(q) for q in slow[:3]))
    both_ends(tap)
    K.done(tap)


BOTH_ENDS = """
import os, socket, sys, threading, time
path = sys.argv[1]
srv = socket.socket(socket.AF_UNIX)
srv.bind(path)
srv.listen(4)
def serve():
    c, _ = srv.accept()
    while True:
        d = c.recv(100)
        if not d:
            break
        c.sendall(b"+OK\\r\\n")
threading.Thread(target=serve, daemon=True).start()
cl = socket.socket(socket.AF_UNIX)
cl.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
cl.connect(path)
print("READY", flush=True)
sys.stdin.readline()
n = 0
end = time.time() + 1.0
while time.time() < end:
    cl.sendall(b"PING\\r\\n")
    cl.recv(100)
    n += 1
    time.sleep(0.001)
print("DONE", n, flush=True)
sys.stdin.readline()
"""


def both_ends(tap):
    d = K.workdir("unix-both")
    p = subprocess.Popen([sys.executable, "-c", BOTH_ENDS, os.path.join(d, "s.sock")],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    p.stdout.readline()
    out = []

    def drive():
        p.stdin.write("go\n")
        p.stdin.flush()
        out.append(p.stdout.readline())
    rep, path = K.record_workload(tap, "unix-both", [p.pid], drive, seconds=5)
    p.stdin.write("end\n")
    p.stdin.flush()
    p.wait(timeout=10)
    if rep is None:
        return
    sent = int(out[0].split()[1]) if out and out[0].startswith("DONE") else 0
    got = {}
    for q in rep.get("requests", []):
        got[(q.get("service"), q.get("name"))] = got.get((q.get("service"), q.get("name")), 0) + 1
    tap.ok(f"unix-both: {sent} PINGs sent over a connection open before the recording: "
           f"the server end's requests found, none on the client end ({got})",
           sent > 50 and got.get(("python3:unix", "PING"), 0) >= sent - 1 and len(got) == 1,
           f"{got}")


if __name__ == "__main__":
    main()
