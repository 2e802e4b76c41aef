# SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
"""Helpers for the recorder's integration tests (test_record_*.py): start the
workloads (tests/workloads/rec_*.c), record them with `critpath record`
(`-p PID` in the background, or `-- CMD` to the end), read the recording back
with `critpath dump FILE --json` (DESIGN.md section 4: a header line, one line
per record in time order, a trailer line) and check what every recording must
satisfy: complete, mode 0600, nothing lost.

Workloads print "READY pid=P key=value ..." and wait for a line on stdin
before doing what the test looks for; Workload.go() sends it once the
recorder has attached, so every call is seen from its beginning."""
import json
import os
import signal
import subprocess
import time

import kpathlib as K
from tap import CRITPATH, WORKLOADS

MS = 1_000_000
workdir = K.workdir
done = K.done
stop = K.stop


def workload(name):
    return os.path.join(WORKLOADS, name)


def _fields(line):
    out = {}
    for kv in line.split()[1:]:
        k, _, v = kv.partition("=")
        try:
            out[k] = int(v, 0)
        except ValueError:
            out[k] = v
    return out


def parse_lines(text, tag):
    """Fields of every "TAG k=v ..." line of a workload's output."""
    return [_fields(ln) for ln in text.splitlines() if ln.split()[:1] == [tag]]


class Workload:
    """A workload started by the test (for `record -p`)."""

    def __init__(self, argv, timeout=10):
        self.argv = [str(a) for a in argv]
        self.proc = K.spawn(self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True)
        line = self.proc.stdout.readline()
        if not line.startswith("READY"):
            K.stop(self.proc)
            raise RuntimeError(f"{' '.join(self.argv)} did not get ready: {line!r}")
        self.ready = _fields(line)
        self.pid = self.ready["pid"]

    def go(self, close=True):
        """Lets it run; close=True also closes its stdin (children see EOF)."""
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()
        if close:
            self.proc.stdin.close()
            self.proc.stdin = None  # communicate() must not flush it

    def finish(self, timeout=60):
        """Waits for it to exit; returns (exit code, rest of its stdout)."""
        try:
            out, _ = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, _ = self.proc.communicate()
        return self.proc.returncode, out


class Recorder:
    """`critpath record ARGS -o PATH` in the background."""

    def __init__(self, args, path, **kw):
        self.path = path
        self.errpath = path + ".stderr"
        self.argv = [CRITPATH, "record", "-o", path, *[str(a) for a in args]]
        self.err = open(self.errpath, "w")
        self.t0 = time.monotonic()
        self.proc = K.spawn(self.argv, stdout=subprocess.DEVNULL, stderr=self.err, **kw)

    def wait_attached(self, timeout=20, settle=0.3):
        """The recorder says "recording N process(es) to FILE" once its hooks
        are in. Returns an error string, or None."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if "critpath record: recording " in self.stderr():
                time.sleep(settle)
                return None
            if self.proc.poll() is not None:
                return f"recorder exited with {self.proc.returncode}: {self.stderr()}"
            time.sleep(0.05)
        return f"recorder not attached after {timeout}s: {self.stderr()}"

    def signal(self, sig=signal.SIGINT):
        self.proc.send_signal(sig)

    def finish(self, timeout=60):
        """Waits for the recorder to end; returns (exit code, stderr)."""
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.elapsed = time.monotonic() - self.t0
        self.err.close()
        return self.proc.returncode, self.stderr()

    def stderr(self):
        try:
            with open(self.errpath) as f:
                return f.read()
        except OSError:
            return ""

    def cmdline(self):
        return " ".join(self.argv)


def record_running(tap, name, w, path, *extra, duration=40):
    """`critpath record -p PID -d DURATION EXTRA` on workload w, attached
    before w is let go: the Recorder, with w running, or None when it did not
    attach (reported as a failure)."""
    rec = Recorder(["-p", w.pid, "-d", duration, *extra], path)
    err = rec.wait_attached()
    if not tap.ok(f"{name}: critpath record -p attaches", err is None, f"{rec.cmdline()}\n{err}"):
        return None
    w.go()
    return rec


class Result:
    def __init__(self, argv, rc, out, err, elapsed):
        self.argv, self.rc, self.out, self.err, self.elapsed = argv, rc, out, err, elapsed

    def cmdline(self):
        return " ".join(self.argv)

    def describe(self):
        return f"{self.cmdline()}\nexit {self.rc} after {self.elapsed:.1f}s\nstderr:\n{self.err}"


def run_record(args, timeout=60, **kw):
    """`critpath record ARGS` to its end, stdin closed (a launched workload
    goes at once). stdout is the launched command's."""
    return run([CRITPATH, "record", *[str(a) for a in args]], timeout, **kw)


def run(argv, timeout=60, **kw):
    """Any command (setpriv/unshare around the recorder) to its end."""
    argv = [str(a) for a in argv]
    t0 = time.monotonic()
    try:
        r = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                           timeout=timeout, **kw)
        rc, out, err = r.returncode, r.stdout, r.stderr
    except subprocess.TimeoutExpired as e:
        rc, out, err = None, e.stdout or "", (e.stderr or "") + f"\n(timed out after {timeout}s)"
        out = out.decode() if isinstance(out, bytes) else out
        err = err.decode() if isinstance(err, bytes) else err
    return Result(argv, rc, out, err, time.monotonic() - t0)


def record_cmd(path, cmd, extra=(), timeout=60):
    """`critpath record -o PATH EXTRA -- CMD` to its end."""
    return run_record(["-o", path, *extra, "--", *cmd], timeout=timeout)


class Dump:
    """`critpath dump PATH --json`: header, records, trailer."""

    def __init__(self, path):
        self.path = path
        self.argv = [CRITPATH, "dump", path, "--json"]
        r = subprocess.run(self.argv, capture_output=True, text=True, timeout=120)
        self.rc, self.stderr = r.returncode, r.stderr
        self.error = None
        lines = []
        for i, ln in enumerate(r.stdout.splitlines()):
            try:
                lines.append(json.loads(ln))
            except ValueError as e:
                self.error = f"line {i + 1} is not JSON ({e}): {ln[:200]!r}"
                break
        self.header = lines[0] if lines and lines[0].get("type") == "header" else None
        self.trailer = lines[-1] if lines and lines[-1].get("type") == "trailer" else None
        self.records = lines[1 if self.header else 0:-1 if self.trailer else None]

    def ok(self):
        """The reader read the whole file: exit 0, header and trailer, all JSON."""
        return (self.rc == 0 and self.header is not None and self.trailer is not None
                and self.error is None)

    def problem(self):
        return (f"{' '.join(self.argv)}: exit {self.rc}, header {self.header is not None}, "
                f"trailer {self.trailer is not None}, {self.error or ''}\n{self.stderr[-1500:]}")

    def of(self, rtype, **eq):
        """Records of a type whose fields equal eq."""
        return [r for r in self.records if r.get("type") == rtype
                and all(r.get(k) == v for k, v in eq.items())]

    def count_types(self):
        c = {}
        for r in self.records:
            c[r["type"]] = c.get(r["type"], 0) + 1
        return c


def check_complete(tap, name, rec_rc, rec_err, path, rec_desc=""):
    """The recorder exited 0, the file is 0600 and reads back whole, nothing
    was lost (trailer, loss records, the summary line). Returns the Dump, or
    None when there is nothing to look at."""
    if not tap.ok(f"{name}: critpath record exits 0", rec_rc == 0,
                  f"{rec_desc}\nexit {rec_rc}\n{rec_err[-2000:]}"):
        if not os.path.exists(path):
            return None
    mode = os.stat(path).st_mode & 0o777 if os.path.exists(path) else None
    tap.ok(f"{name}: recording created with mode 0600", mode == 0o600,
           f"mode {oct(mode) if mode is not None else 'missing'}")
    d = Dump(path)
    if not tap.ok(f"{name}: dump --json reads the whole recording (header ... trailer, exit 0)",
                  d.ok(), d.problem()):
        return d if d.records else None
    check_no_drops(tap, name, d, rec_err)
    return d


def check_no_drops(tap, name, d, rec_err):
    losses = d.of("loss")
    lost = (d.trailer or {}).get("lost")
    summary = [ln for ln in rec_err.splitlines() if " lost events" in ln]
    tap.ok(f"{name}: zero drops (trailer lost=0, no loss records, summary says 0 lost)",
           lost == 0 and not losses and summary and " 0 lost events" in summary[-1],
           f"trailer {d.trailer}\nloss records {losses[:5]}\nsummary {summary}")


def unseen_allowance(n):
    """How many of n wakeups a check lets go unrecorded. This VM's kernel
    runs no tracepoint program for the events whose current task is one of
    its init's (pid 1, "tokio-rt-worker") threads: a switch out of one (0 of
    ~10^5 reported, the switches into them all are; the recorder infers the
    switch-ins this hides, test_record_switches.py), and a wakeup from an
    interrupt that lands while one runs -- about 0.1-0.5% of a timer-woken
    thread's wakeups, in bursts of a few milliseconds. The programs' run
    counts do not include them and recursion_misses stays 0; a wakeup has no
    trace left to infer it from. Everything recorded must still be right."""
    return max(2, n // 50)


def waking_in(d, tid, start, end):
    """sched_waking records of wakee tid with start <= ts_ns <= end."""
    return [w for w in d.of("sched_waking", wakee_tid=tid) if start <= w["ts_ns"] <= end]


def pid_not_running():
    """A pid no process has now: a child's, after it was reaped."""
    p = subprocess.Popen(["true"])
    p.wait()
    for cand in (p.pid, p.pid + 1, p.pid + 7):
        if not os.path.exists(f"/proc/{cand}"):
            return cand
    raise RuntimeError("no free pid found near the last child's")
