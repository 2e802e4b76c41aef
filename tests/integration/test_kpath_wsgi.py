#!/usr/bin/env python3
# SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
"""A threaded, pre-forked Python WSGI server: Debian's gunicorn, 2 worker
processes of the gthread kind with 4 threads each, serving a small WSGI app
this test writes into its work dir:
  /sleep  time.sleep(20 ms)
  /cpu    ~10 ms of CPU (by time.thread_time) in a pure-Python loop, GIL-bound
  /lock   time.sleep(10 ms) holding a module-level threading.Lock
  /fast   returns at once
In a gthread worker the main thread polls the listening socket and the idle
keep-alive connections and hands a connection with data to a pool thread,
which reads the request, runs the app and writes the response: so the thread
that wrote a response (the last segment of the request's path) is the thread
that ran its handler, and slept in it. Every thread of a worker takes the
GIL back after a sleep: the futex waits on the GIL are interference
(SCENARIOS.md kernel case 8), which the walk follows only back to when the
thread began to wait, never into the GIL holder's own request.

6 clients, each on a keep-alive connection, send the four paths in turn
(102 of each in all). A worker never has more connections than threads (the
clients reconnect until it is so), so no request waits in a worker's queue
behind another one's sleep. Recorded by the pids of gunicorn's master and
its workers. Checked: every request found under its name and tiled exactly;
a /sleep request has its 20 ms sleep on its own thread as its own work; a
/cpu request its ~10 ms of CPU; a /fast request no sleep of another thread as
its own, and no other request's sleep at all."""
import collections
import http.client
import os
import shutil
import signal
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kpathlib as K  # noqa: E402
from tap import CRITPATH, Tap  # noqa: E402

MS = K.MS
WORKERS, THREADS = 2, 4
CLIENTS, ROUNDS = 6, 17  # each client sends ROUNDS of each path: 102 of each
PATHS = ("/sleep", "/cpu", "/lock", "/fast")
HELLO = "/hello"  # the first request on a connection: which worker took it
APP = '''\
"""WSGI app of test_kpath_wsgi.py / test_kpath_proxy.py."""
import os
import threading
import time

LOCK = threading.Lock()


def burn(seconds):
    """Pure-Python work (holds the GIL) until this thread has used `seconds`
    of CPU time."""
    t0, x = time.thread_time(), 0
    while time.thread_time() - t0 < seconds:
        for _ in range(1000):
            x += 1
    return x


def application(environ, start_response):
    path = environ.get("PATH_INFO", "")
    if path == "/sleep":
        time.sleep(0.020)
    elif path == "/cpu":
        burn(0.010)
    elif path == "/lock":
        with LOCK:
            time.sleep(0.010)
    body = f"{path} {os.getpid()} {threading.get_native_id()}\\n".encode()
    start_response("200 OK", [("Content-Type", "text/plain"),
                              ("Content-Length", str(len(body))),
                              ("X-Worker", str(os.getpid()))])
    return [body]
'''


def children(pid):
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(p) for p in f.read().split()]
    except OSError:
        return []


def start_gunicorn(d, port):
    """gunicorn with the app in d; (master process, worker pids) once both
    workers answer, or raises RuntimeError."""
    with open(os.path.join(d, "critpath_wsgi_app.py"), "w") as f:
        f.write(APP)
    master = K.spawn(["gunicorn", "--workers", str(WORKERS), "--threads", str(THREADS),
                      "--worker-class", "gthread", "--bind", f"127.0.0.1:{port}",
                      "--keep-alive", "10", "--chdir", d, "--log-level", "warning",
                      "--error-logfile", os.path.join(d, "gunicorn.log"),
                      "--worker-tmp-dir", d, "critpath_wsgi_app:application"])
    K.wait_port(port, master, timeout=20)
    deadline, seen = time.time() + 30, set()
    while time.time() < deadline:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        try:
            c.request("GET", HELLO)
            r = c.getresponse()
            r.read()
            seen.add(int(r.getheader("X-Worker")))
        finally:
            c.close()
        workers = children(master.pid)
        if len(workers) == WORKERS and seen == set(workers):
            return master, workers
        time.sleep(0.05)
    raise RuntimeError(f"gunicorn: workers {children(master.pid)}, answered {sorted(seen)}")


def stop_gunicorn(master, workers):
    """SIGINT: gunicorn's quick shutdown (SIGTERM waits for keep-alive
    connections); then whatever worker is left is killed."""
    K.stop(master, signal.SIGINT)
    for w in workers:
        try:
            os.kill(w, signal.SIGKILL)
        except OSError:
            pass


class Load:
    """CLIENTS threads, each on a keep-alive connection to `port`, sending
    `paths` in turn `rounds` times; counts what was answered, by path."""

    def __init__(self, port, paths, rounds, per_worker=None):
        self.port, self.paths, self.rounds = port, paths, rounds
        self.per_worker = per_worker  # at most this many connections a worker
        self.sent = collections.Counter()
        self.conns = collections.Counter()
        self.lock = threading.Lock()

    def get(self, c, path):
        c.request("GET", path)
        r = c.getresponse()
        body = r.read()
        if r.status != 200 or not body.startswith(path.encode() + b" "):
            raise RuntimeError(f"GET {path}: {r.status} {body[:80]!r}")
        with self.lock:
            self.sent[path] += 1
        return r

    def connect(self):
        for _ in range(50):
            c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=20)
            w = self.get(c, HELLO).getheader("X-Worker")
            with self.lock:
                if self.per_worker is None or self.conns[w] < self.per_worker:
                    self.conns[w] += 1
                    return c
            c.close()
        raise RuntimeError(f"no worker with a free thread after 50 connections: {self.conns}")

    def client(self, i):
        c = self.connect()
        try:
            for k in range(self.rounds * len(self.paths)):
                self.get(c, self.paths[(i + k) % len(self.paths)])
        finally:
            c.close()

    def run(self):
        t0 = time.time()
        K.in_parallel([lambda i=i: self.client(i) for i in range(CLIENTS)])
        self.seconds = time.time() - t0


def writer_tid(q):
    """The thread that wrote the response: where the walk began."""
    segs = q.get("critical_path") or []
    return segs[-1].get("tid") if segs else None


def own_sleep_ns(q, tid):
    """The longest sleep of thread tid that is q's own work."""
    return max([K.dur(g) for g in q.get("critical_path") or []
                if g.get("category") == "sleep" and g.get("tid") == tid and K.own(g)],
               default=0)


def summary(q, limit=24):
    """q's path with consecutive segments of one thread, category and
    interference merged: 'tid category ms [i]' (i: interference; network
    names the peer), to see where a path goes."""
    runs = []
    for g in q.get("critical_path") or []:
        key = (g.get("tid") or ("peer " + str(g.get("peer"))), g.get("category"),
               bool(g.get("interference")))
        if runs and runs[-1][0] == key:
            runs[-1][1] += K.dur(g)
        else:
            runs.append([key, K.dur(g), g["start_ns"] - q["start_ns"]])
    parts = [f"@{t0 / MS:.1f} {k[0]} {k[1]} {ns / MS:.2f}{' i' if k[2] else ''}"
             for k, ns, t0 in runs]
    if len(parts) > limit:
        parts = parts[:limit // 2] + [f"... {len(parts) - limit} more ..."] + parts[-limit // 2:]
    return (f"{q.get('id')} {q.get('name')!r} {K.fmt_ms(q.get('latency_ns', 0))}, "
            f"{len(q.get('critical_path') or [])} segments, writer {writer_tid(q)}:\n  "
            + " | ".join(parts))


def examples(reqs, n=3):
    return "\n".join(summary(q) for q in reqs[:n])


def main():
    tap = Tap()
    if not shutil.which("gunicorn"):
        tap.skip("wsgi", "gunicorn not installed (apt-get install gunicorn)")
        K.done(tap)
    if not tap.ok("critpath is built", os.access(CRITPATH, os.X_OK), f"{CRITPATH} missing"):
        K.done(tap)
    d = K.workdir("wsgi_app")
    port = K.free_port()
    try:
        master, workers = start_gunicorn(d, port)
    except (RuntimeError, OSError) as e:
        tap.ok("wsgi: gunicorn starts", False, str(e))
        K.done(tap)
    load = Load(port, PATHS, ROUNDS, per_worker=THREADS)
    rep, path = K.record_workload(tap, "wsgi", [master.pid] + workers, load.run, seconds=10)
    stop_gunicorn(master, workers)
    if rep is None:
        K.done(tap)
    print(f"# load: {dict(load.sent)} in {load.seconds:.1f} s, connections by worker "
          f"{dict(load.conns)}", flush=True)
    K.check_tiling(tap, "wsgi", rep.get("requests", []))
    reqs = K.service_requests(rep, port)
    by = collections.defaultdict(list)
    for q in reqs:
        by[q.get("name")].append(q)
    for p in PATHS + (HELLO,):
        n, found = load.sent[p], len(by[f"GET {p}"])
        tap.ok(f"wsgi: {found} 'GET {p}' requests of gunicorn:{port} found, {n} sent",
               n - max(1, n // 50) <= found <= n,
               f"requests by name: { {k: len(v) for k, v in by.items()} }\nrecording {path}")

    sleeps = by["GET /sleep"]
    bad = [q for q in sleeps if own_sleep_ns(q, writer_tid(q)) < 18 * MS]
    tap.ok(f"wsgi: /sleep: {len(sleeps) - len(bad)} of {len(sleeps)} requests have their own "
           "20 ms sleep (>= 18 ms, on the thread that served them, not interference), "
           "expected >= 90%", sleeps and len(bad) <= len(sleeps) * 0.10,
           examples(bad) + ("\n" + K.describe(bad[0], 40) if bad else ""))

    cpu = K.median_ns(by["GET /cpu"], lambda g: g.get("category") == "cpu" and K.own(g))
    tap.ok(f"wsgi: /cpu: median own cpu on the path {K.fmt_ms(cpu)}, expected ~10 ms (>= 8)",
           cpu >= 8 * MS, examples(sorted(by["GET /cpu"], key=lambda q: q["latency_ns"])[
               len(by["GET /cpu"]) // 2:][:1]))

    locks = by["GET /lock"]
    bad = [q for q in locks if own_sleep_ns(q, writer_tid(q)) < 9 * MS]
    tap.ok(f"wsgi: /lock: {len(locks) - len(bad)} of {len(locks)} requests have their own "
           "10 ms sleep under the lock (>= 9 ms, on their thread, not interference), "
           "expected >= 90%", locks and len(bad) <= len(locks) * 0.10, examples(bad))

    fast = by["GET /fast"]
    foreign = [q for q in fast
               if any(g.get("category") == "sleep" and K.own(g)
                      and g.get("tid") != writer_tid(q) for g in q.get("critical_path") or [])]
    tap.gap(f"wsgi: /fast: {len(fast) - len(foreign)} of {len(fast)} requests count no other "
           "thread's sleep as their own, expected >= 98%",
           fast and len(foreign) <= len(fast) * 0.02, examples(foreign))
    slept = [q for q in fast
             if K.path_ns(q, lambda g: g.get("category") == "sleep") >= 15 * MS]
    tap.ok(f"wsgi: /fast: no request's path has >= 15 ms of sleep ({len(slept)} of "
           f"{len(fast)} have: another request's history)", not slept, examples(slept))
    K.done(tap)


if __name__ == "__main__":
    main()
