# SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
"""Helpers for the kernel-path integration tests (test_kpath_*.py): start the
workloads (tests/workloads/kp_*.c) and third-party servers, record them with
`critpath record`, read `critpath report --format json` (DESIGN.md section 6)
and check what every request's critical path must satisfy.

Expected values come from how the workloads were built; tolerances are wide
enough for a loaded 2-core machine (medians over the requests, +-30% or a few
milliseconds absolute)."""
import atexit
import http.client
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

from tap import CRITPATH, WORKLOADS

MS = 1_000_000
_procs = []


def _cleanup():
    for p in reversed(_procs):
        if p.poll() is None:
            try:
                p.kill()
                p.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                pass


atexit.register(_cleanup)
# run.sh kills with SIGTERM on timeout: still stop what we started
signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))


_dirs = []


def workdir(name):
    """A directory for this test's recordings; see done()."""
    d = tempfile.mkdtemp(prefix=f"critpath-{name}-")
    _dirs.append(d)
    return d


def done(tap):
    """Ends the test: stops what it started, removes its recordings unless a
    check failed or KPATH_KEEP is set (then says where they are)."""
    _cleanup()
    if tap.failed or os.environ.get("KPATH_KEEP"):
        for d in _dirs:
            print(f"# recordings kept in {d}", flush=True)
    else:
        for d in _dirs:
            shutil.rmtree(d, ignore_errors=True)
    tap.done()


def spawn(argv, **kw):
    p = subprocess.Popen(argv, **kw)
    _procs.append(p)
    return p


def stop(p, sig=signal.SIGTERM):
    if p.poll() is None:
        p.send_signal(sig)
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def start_ready(argv, timeout=10):
    """Starts a workload that prints 'READY k=v ...'; returns (proc, fields)."""
    p = spawn(argv, stdout=subprocess.PIPE, text=True)
    deadline = time.time() + timeout
    line = p.stdout.readline()
    if not line.startswith("READY") or time.time() > deadline:
        stop(p)
        raise RuntimeError(f"{argv[0]} did not get ready: {line!r}")
    fields = dict(kv.split("=", 1) for kv in line.split()[1:])
    return p, {k: int(v) for k, v in fields.items()}


def tls_cert(d):
    """A self-signed key and certificate for localhost in d: (key, cert), or
    None when openssl failed."""
    key, cert = os.path.join(d, "key.pem"), os.path.join(d, "cert.pem")
    r = subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout",
                        key, "-out", cert, "-days", "1", "-subj", "/CN=localhost"],
                       capture_output=True, text=True, timeout=60)
    return (key, cert) if r.returncode == 0 else None


def go_build(tap, tag, src, extra=()):
    """go build of src (one file, GOPATH mode, no cgo; extra: more options)
    into a directory of the test's, with a cache of its own; the binary's
    path, or None after reporting why."""
    name = os.path.splitext(os.path.basename(src))[0]
    d = workdir(f"{tag}_build")
    out = os.path.join(d, name)
    env = dict(os.environ, HOME=d, GOCACHE=os.path.join(d, "gocache"), GO111MODULE="off",
               GOPATH=os.path.join(d, "gopath"), GOFLAGS="", CGO_ENABLED="0")
    try:
        r = subprocess.run(["go", "build", "-o", out] + list(extra) + [src], env=env,
                           capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired:
        tap.ok(f"{tag}: {name} builds", False, "go build timed out")
        return None
    if not tap.ok(f"{tag}: {name} builds", r.returncode == 0, r.stderr[-2000:]):
        return None
    return out


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, proc, timeout=10):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode} before listening")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"nothing listens on 127.0.0.1:{port} after {timeout}s")


# A back end with a thread per connection (Python's ThreadingHTTPServer):
# /sleep sleeps 20 ms, anything else answers at once with its path.
THREADED_BACKEND = '''\
import http.server
import sys
import time


class Handler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_GET(self):
        if self.path == "/sleep":
            time.sleep(0.020)
        body = (self.path + "\\n").encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(body)


http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
'''


def threaded_backend(d, port):
    """THREADED_BACKEND on port, its script in d; the process once it
    listens (RuntimeError if it does not)."""
    app = os.path.join(d, "backend.py")
    with open(app, "w") as f:
        f.write(THREADED_BACKEND)
    p = spawn([sys.executable, app, str(port)])
    wait_port(port, p)
    return p


def http_load(port, paths, clients, rounds, sent, keepalive=True):
    """clients threads each send paths in turn, rounds times, to a server
    that answers a path with "PATH\\n"; keep-alive connections, or a new
    one per request. Counts what was answered in sent (a Counter)."""
    lock = threading.Lock()

    def get(c, p):
        c.request("GET", p)
        r = c.getresponse()
        body = r.read()
        if r.status != 200 or body != (p + "\n").encode():
            raise RuntimeError(f"GET {p}: {r.status} {body[:80]!r}")
        with lock:
            sent[p] += 1

    def client(i):
        c = None
        try:
            for k in range(rounds * len(paths)):
                if c is None:
                    c = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
                get(c, paths[(i + k) % len(paths)])
                if not keepalive:
                    c.close()
                    c = None
        finally:
            if c is not None:
                c.close()
    in_parallel([lambda i=i: client(i) for i in range(clients)])


def by_name(rep, port):
    """The requests of the service on port, by name"""
    by = {}
    for q in service_requests(rep, port):
        by.setdefault(q.get("name"), []).append(q)
    return by


def check_found(tap, what, by, sent, detail=""):
    """Each path sent is found as 'GET path' as often (a few lost at most)"""
    for p, n in sorted(sent.items()):
        found = len(by.get(f"GET {p}", []))
        tap.ok(f"{what}: {found} 'GET {p}' requests found, {n} sent",
               n - max(1, n // 50) <= found <= n,
               f"by name { {k: len(v) for k, v in by.items()} }\n{detail}")


class Recording:
    """`critpath record -p PIDS -d SECONDS -o FILE`, started in the background."""

    def __init__(self, pids, seconds, path, extra=()):
        self.path = path
        self.errpath = path + ".stderr"
        # CRITPATH_RECORD_ARGS: options for every recording (a test run on
        # the --all-syscalls capture, test_kpath_cpt_all_syscalls.py)
        self.argv = [CRITPATH, "record", "-p", ",".join(str(p) for p in pids),
                     "-d", str(seconds), "-o", path,
                     *extra, *os.environ.get("CRITPATH_RECORD_ARGS", "").split()]
        self.err = open(self.errpath, "w")
        self.t0 = time.time()
        self.proc = spawn(self.argv, stdout=self.err, stderr=subprocess.STDOUT)
        self.seconds = seconds

    def wait_attached(self, settle=0.3, timeout=30.0):
        """The recorder says "recording N process(es) to FILE" once its
        hooks are in (loading the programs takes ~1 s, more on a loaded
        machine). Returns an error string, or None."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                return f"recorder exited with {self.proc.returncode}: {self.stderr()}"
            if "critpath record: recording " in self.stderr():
                time.sleep(settle)
                return None
            time.sleep(0.05)
        return f"recorder not attached after {timeout}s: {self.stderr()}"

    def finish(self):
        """Waits for -d to run out. Returns (returncode, stderr text)."""
        try:
            self.proc.wait(timeout=self.seconds + 30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.err.close()
        return self.proc.returncode, self.stderr()

    def stderr(self):
        try:
            with open(self.errpath) as f:
                return f.read()[-3000:]
        except OSError:
            return ""

    def cmdline(self):
        return " ".join(self.argv)


def report_json(path, extra=()):
    """Returns (report dict or None, error string); extra: more report
    options (["--tag", "http.status=200"])."""
    argv = [CRITPATH, "report", path, "--format", "json"] + list(extra)
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired:
        return None, f"{' '.join(argv)}: timed out"
    if r.returncode != 0:
        return None, f"{' '.join(argv)}: exit {r.returncode}: {r.stderr[-2000:]}"
    try:
        rep = json.loads(r.stdout)
    except ValueError as e:
        return None, f"{' '.join(argv)}: not JSON ({e}): {r.stdout[:500]!r}"
    if not isinstance(rep, dict) or rep.get("critpath_report") != 1:
        return None, f"{' '.join(argv)}: no \"critpath_report\": 1 in {r.stdout[:300]!r}"
    return rep, ""


def recording_digest(path, rep=None):
    """What a failed check needs to be explained after the run's files are
    gone: the recorder's summary, the records by type and by process, and
    every warning of the report."""
    out = []
    try:
        with open(path + ".stderr") as f:
            out.append("recorder: " + " | ".join(f.read().strip().splitlines()[-4:]))
    except OSError:
        pass
    types, pids = {}, {}
    try:
        r = subprocess.run([CRITPATH, "dump", "--json", path], capture_output=True, text=True,
                           timeout=120)
        for line in r.stdout.splitlines():
            try:
                d = json.loads(line)
            except ValueError:
                continue
            t = d.get("type", "?")
            types[t] = types.get(t, 0) + 1
            if t not in ("hook", "header", "trailer", "process", "thread"):
                pids[d.get("pid")] = pids.get(d.get("pid"), 0) + 1
        out.append(f"records by type {types}; by pid {pids}")
    except (subprocess.SubprocessError, OSError) as e:
        out.append(f"dump: {e}")
    if rep is not None:
        out.append(f"report warnings {rep.get('warnings')}")
    return "\n".join(out)


def service_requests(rep, port):
    """The requests a service listening on `port` served ("comm:port")."""
    return [q for q in rep.get("requests", [])
            if str(q.get("service", "")).rsplit(":", 1)[-1] == str(port)]


def served(tap, what, rep, port, n, path, service="kp_server", slack=1):
    """The requests the service on `port` served, by latency, and the median
    one ({} for none), after checking every request's tiling and that n were
    found (n - slack at least)."""
    reqs = sorted(service_requests(rep, port), key=lambda q: q["latency_ns"])
    check_tiling(tap, what, rep.get("requests", []))
    tap.ok(f"{what}: {len(reqs)} requests of {service}:{port} found, {n} sent",
           n - slack <= len(reqs) <= n,
           f"services: {sorted({q.get('service') for q in rep.get('requests', [])})}\n"
           f"recording {path}")
    return reqs, reqs[len(reqs) // 2] if reqs else {}


def tiling_errors(req):
    """DESIGN.md section 5: segments tile [start_ns, end_ns] exactly, none of them
    empty (a zero-length step is not a step of the path)."""
    errs = []
    segs = req.get("critical_path") or []
    s, e, lat = req.get("start_ns"), req.get("end_ns"), req.get("latency_ns")
    rid = req.get("id")
    if not all(isinstance(v, int) for v in (s, e, lat)):
        return [f"{rid}: start_ns/end_ns/latency_ns not integers"]
    if e - s != lat:
        errs.append(f"{rid}: latency_ns {lat} != end_ns - start_ns {e - s}")
    if not segs:
        return errs + [f"{rid}: empty critical_path"]
    if segs[0].get("start_ns") != s:
        errs.append(f"{rid}: first segment starts at {segs[0].get('start_ns')}, request at {s}")
    if segs[-1].get("end_ns") != e:
        errs.append(f"{rid}: last segment ends at {segs[-1].get('end_ns')}, request at {e}")
    total = 0
    for i, g in enumerate(segs):
        gs, ge = g.get("start_ns"), g.get("end_ns")
        if not isinstance(gs, int) or not isinstance(ge, int) or ge < gs:
            errs.append(f"{rid}: segment {i} [{gs}, {ge}] is not an interval")
            continue
        if ge == gs:
            errs.append(f"{rid}: segment {i} [{gs}, {ge}] has no duration")
        if i and gs != segs[i - 1].get("end_ns"):
            kind = "overlaps" if gs < segs[i - 1]["end_ns"] else "leaves a gap after"
            errs.append(f"{rid}: segment {i} starts at {gs}, {kind} segment {i - 1} "
                        f"(ends {segs[i - 1]['end_ns']})")
        if g.get("category") not in ("cpu", "runqueue", "lock", "network", "disk", "sleep",
                                     "span", "unexplained"):
            errs.append(f"{rid}: segment {i} has category {g.get('category')!r}")
        total += ge - gs
    if total != lat:
        errs.append(f"{rid}: segments sum to {total}, latency_ns is {lat}")
    return errs


def check_tiling(tap, what, reqs):
    errs = []
    for q in reqs:
        errs += tiling_errors(q)
    tap.ok(f"{what}: every request's segments tile [start, end] exactly, no overlap "
           f"({len(reqs)} requests)", reqs and not errs,
           "\n".join(errs[:15]) if errs else "no requests")


def dur(g):
    return g["end_ns"] - g["start_ns"]


def path_ns(req, pred):
    return sum(dur(g) for g in req.get("critical_path") or [] if pred(g))


def median_ns(reqs, pred):
    if not reqs:
        return 0
    return statistics.median(path_ns(q, pred) for q in reqs)


def own(g):
    """A segment that is the request's own work (DESIGN.md section 5)."""
    return not g.get("interference")


def sleep_stretch_ns(req, pid):
    """The longest own sleep of a thread of pid on req's path, with the
    CPU waits and CPU of that thread right before it: a sleep's deadline
    is set before the thread blocks (Python's time.sleep), so a thread that
    waits for a CPU first sleeps less by as much."""
    best, segs = 0, req.get("critical_path") or []
    for i, g in enumerate(segs):
        if g.get("category") != "sleep" or not own(g) or g.get("pid") != pid:
            continue
        ns, j = dur(g), i - 1
        while j >= 0 and segs[j].get("tid") == g.get("tid") and \
                segs[j].get("category") in ("runqueue", "cpu"):
            ns += dur(segs[j])
            j -= 1
        best = max(best, ns)
    return best


def median_own_latency(reqs):
    """Latency without the interference on the path: what the request's own
    work took. Other load on the machine (a loaded 2-core CI box) shows up as
    run-queue interference, not here."""
    if not reqs:
        return 0
    return statistics.median(q["latency_ns"] - path_ns(q, lambda g: not own(g)) for q in reqs)


def interference_errors(reqs, own_pids, own_limit_ns):
    """A run-queue wait that is interference names its culprits. Interference
    caused by the workload's own processes alone (a waker finishing its slice)
    is at most own_limit_ns in the median request (None: not checked, for
    workloads whose threads compute at the same time by design); whatever else
    runs on the machine may cost what it costs."""
    errs, mine, bare, bare_ids = [], [], [], set()
    for q in reqs:
        m = 0
        for g in q.get("critical_path") or []:
            if own(g):
                continue
            cul = g.get("culprits") or []
            if g.get("category") == "runqueue" and not cul:
                bare.append(f"{q.get('id')}: run-queue interference {fmt_ms(dur(g))} "
                            "without culprits")
                bare_ids.add(q.get("id"))
            if cul and all(c.get("pid") in own_pids for c in cul):
                m += dur(g)
        mine.append(m)
    # a wait of a thread the request does not own (the first request on a
    # connection opened just as the recording began) may have no culprits
    # recorded; more than a few such requests is a bug
    if len(bare_ids) > max(1, len(reqs) // 10):
        errs += bare
    if own_limit_ns is not None and mine and statistics.median(mine) > own_limit_ns:
        errs.append(f"median request: {fmt_ms(statistics.median(mine))} of interference "
                    "by the workload itself")
    return errs


def median_latency(reqs):
    return statistics.median(q["latency_ns"] for q in reqs) if reqs else 0


def near(value_ns, expect_ms, rel=0.30, abs_ms=3.0):
    """Within +-rel of the expectation or +-abs_ms, whichever is wider."""
    tol = max(expect_ms * rel, abs_ms) * MS
    return abs(value_ns - expect_ms * MS) <= tol


def fmt_ms(ns):
    return f"{ns / MS:.2f} ms"


def describe(req, limit=20):
    """One request's path, for failure details."""
    out = [f"request {req.get('id')} {req.get('service')} {req.get('name')!r} "
           f"latency {fmt_ms(req.get('latency_ns', 0))}"]
    segs = req.get("critical_path") or []
    t0 = req.get("start_ns", 0)
    for g in segs[:limit]:
        cul = ",".join(f"{c.get('comm')}/{c.get('tid')}:{fmt_ms(c.get('ns', 0))}"
                       for c in g.get("culprits") or [])
        out.append(f"  +{(g['start_ns'] - t0) / MS:8.3f} {fmt_ms(dur(g)):>10} "
                   f"{g.get('category'):11} {g.get('comm')}/{g.get('pid')}/{g.get('tid')} "
                   f"cpu{g.get('cpu')} interf={g.get('interference')} "
                   f"{('peer=' + g['peer']) if g.get('peer') else ''} {cul}")
    if len(segs) > limit:
        out.append(f"  ... {len(segs) - limit} more segments")
    return "\n".join(out)


def run_counted(argv, pattern, timeout=60):
    """Runs a load generator to its end; returns the count its output's
    pattern (one group) says. RuntimeError when it failed or did not say."""
    r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    m = re.search(pattern, r.stdout)
    if r.returncode != 0 or not m:
        raise RuntimeError(f"{os.path.basename(argv[0])}: exit {r.returncode}: "
                           f"{r.stdout[-500:]} {r.stderr[-500:]}")
    return int(m.group(1))


def run_client(port, n, extra=(), timeout=120):
    argv = [os.path.join(WORKLOADS, "kp_client"), "--port", str(port), "--n", str(n), *extra]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    m = re.search(r"DONE n=(\d+) p50_ms=([\d.]+)", r.stdout)
    if r.returncode != 0 or not m:
        raise RuntimeError(f"{' '.join(argv)}: exit {r.returncode}: {r.stderr[-500:]}")
    return float(m.group(2))


def in_parallel(fns):
    """Runs the functions at once, a thread each (clients of a server under
    test); raises RuntimeError naming every one that failed."""
    errors = []

    def one(i, fn):
        try:
            fn()
        except (OSError, RuntimeError, subprocess.SubprocessError) as e:
            errors.append(f"client {i}: {e}")
    ts = [threading.Thread(target=one, args=(i, fn)) for i, fn in enumerate(fns)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    if errors:
        raise RuntimeError("; ".join(errors))


def record_workload(tap, name, pids, drive, seconds=10, extra=()):
    """Records pids while drive() runs (extra: more record options); returns
    (report, recording path) or (None, path) after reporting the failure."""
    d = workdir(name)
    path = os.path.join(d, f"{name}.rec")
    rec = Recording(pids, seconds, path, extra)
    err = rec.wait_attached()
    if err:
        tap.ok(f"{name}: critpath record attaches", False, f"{rec.cmdline()}\n{err}")
        return None, path
    try:
        drive()
    except (RuntimeError, subprocess.SubprocessError, OSError) as e:
        tap.ok(f"{name}: load ran", False, str(e))
        rec.finish()
        return None, path
    rc, text = rec.finish()
    if not tap.ok(f"{name}: critpath record exits 0", rc == 0,
                  f"{rec.cmdline()}\nexit {rc}\n{text}"):
        return None, path
    rep, err = report_json(path)
    if not tap.ok(f"{name}: critpath report --format json reads the recording", rep is not None,
                  err + f"\nrecording kept at {path}"):
        return None, path
    return rep, path
