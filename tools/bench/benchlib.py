# SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
"""What the recorder benchmarks (tools/bench/bench_record_*) share: paths,
child processes that are always cleaned up, and `critpath record` runs whose
attach point, summary line and CPU time are read back."""
import os
import re
import signal
import socket
import subprocess
import sys
import time

BUILD = os.path.abspath(os.environ.get("CRITPATH_BUILD", "build"))
CRITPATH = os.path.join(BUILD, "critpath")
BENCH = os.path.join(BUILD, "bench")
NAME = os.path.basename(sys.argv[0])
procs = []


def die(msg):
    print(f"{NAME}: {msg}", file=sys.stderr)
    sys.exit(1)


def need(*paths):
    for b in paths:
        if not os.access(b, os.X_OK):
            die(f"{b} missing: build with make BUILD={BUILD}")
    if os.geteuid() != 0:
        die("needs root (critpath record loads BPF programs)")


def spawn(args, **kw):
    p = subprocess.Popen(args, **kw)
    procs.append(p)
    return p


def cleanup():
    for p in procs:
        if p.poll() is None:
            p.kill()
            p.wait()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, proc):
    for _ in range(200):
        if proc.poll() is not None:
            die(f"{proc.args[0]} exited with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    die(f"nothing listens on 127.0.0.1:{port}")


def cpu_seconds(pid):
    """utime + stime of a running process, from /proc/PID/stat."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Recorder:
    """`critpath record ARGS -o FILE`, started and waited for until its
    probes are attached (its "recording ..." line)."""

    SUMMARY = re.compile(r"critpath record: ([\d.]+) s, (\d+) events, (\d+) metadata records, "
                         r"(\d+) bytes written \(([\d.]+) bytes/event\), (\d+) lost events")

    def __init__(self, args, out, what="critpath record"):
        self.out = out
        self.what = what
        self.errpath = out + ".stderr"
        self.err = open(self.errpath, "w")
        self.proc = spawn([CRITPATH, "record"] + args + ["-o", out], stdout=self.err,
                          stderr=self.err)
        for _ in range(600):
            if self.proc.poll() is not None:
                die(f"{what} exited with {self.proc.returncode}: {self.stderr()[-1000:]}")
            if "critpath record: recording " in self.stderr():
                break
            time.sleep(0.05)
        else:
            die(f"{what} did not attach within 30 s")
        self.cpu_at_attach = cpu_seconds(self.proc.pid)
        self.attached = time.monotonic()

    def stderr(self):
        with open(self.errpath) as f:
            return f.read()

    def stop(self, sig=signal.SIGINT, timeout=120):
        """Stops it (or waits for -d to end it) and returns its summary:
        secs, events, metadata, bytes, lost, and cpu (CPU seconds spent
        after attaching)."""
        if sig is not None and self.proc.poll() is None:
            self.proc.send_signal(sig)
        deadline = time.monotonic() + timeout
        while True:
            pid, status, ru = os.wait4(self.proc.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > deadline:
                self.proc.kill()
                die(f"{self.what} did not stop within {timeout} s")
            time.sleep(0.02)
        self.proc.returncode = os.waitstatus_to_exitcode(status)
        self.err.close()
        text = self.stderr()
        if self.proc.returncode != 0:
            die(f"{self.what} exited with {self.proc.returncode}: {text[-1000:]}")
        m = self.SUMMARY.search(text)
        if not m:
            die(f"{self.what}: no summary line in: {text[-1000:]}")
        os.unlink(self.errpath)
        return {"secs": float(m[1]), "events": int(m[2]), "metadata": int(m[3]),
                "bytes": int(m[4]), "lost": int(m[6]),
                "cpu": ru.ru_utime + ru.ru_stime - self.cpu_at_attach}


def bpf_prog_ids(pid):
    """Ids of the BPF programs a process holds open (its fdinfo)."""
    ids = set()
    for fd in os.listdir(f"/proc/{pid}/fdinfo"):
        try:
            with open(f"/proc/{pid}/fdinfo/{fd}") as f:
                for line in f:
                    if line.startswith("prog_id:"):
                        ids.add(int(line.split()[1]))
        except OSError:
            pass
    return ids


def bpf_prog_stats(pid):
    """name -> (run_time_ns, run_cnt) of a process's BPF programs (counted
    while kernel.bpf_stats_enabled is 1)."""
    import json
    ids = bpf_prog_ids(pid)
    r = subprocess.run(["bpftool", "prog", "show", "--json"], capture_output=True, text=True)
    if r.returncode != 0:
        return {}
    return {p["name"]: (p.get("run_time_ns", 0), p.get("run_cnt", 0))
            for p in json.loads(r.stdout) if p["id"] in ids}


class BpfStats:
    """kernel.bpf_stats_enabled=1 for a while, restored after."""
    PATH = "/proc/sys/kernel/bpf_stats_enabled"

    def __enter__(self):
        with open(self.PATH) as f:
            self.old = f.read().strip()
        with open(self.PATH, "w") as f:
            f.write("1")
        return self

    def __exit__(self, *exc):
        with open(self.PATH, "w") as f:
            f.write(self.old)


TRAILER = re.compile(r"# end: monotonic \d+ ns, (\d+) events, (\d+) metadata records, "
                     r"(\d+) events lost")


def trailer(path):
    """events, metadata, lost from the recording's trailer (critpath dump)."""
    d = subprocess.Popen([CRITPATH, "dump", "--file-order", path], stdout=subprocess.PIPE,
                         text=True)
    last = ""
    for line in d.stdout:
        if line.startswith("# end:"):
            last = line
    d.wait()
    m = TRAILER.search(last)
    if d.returncode != 0 or not m:
        die(f"critpath dump {path}: no trailer (exit {d.returncode})")
    return {"events": int(m[1]), "metadata": int(m[2]), "lost": int(m[3])}


OFFCPUTIME = "/usr/sbin/offcputime"
BPFTRACE = "/usr/bin/bpftrace"
HOOKS_BT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "critpath_hooks.bt")


class Peer:
    """A tracer of the target other than ours (offcputime, bpftrace, perf),
    started and given `ready` seconds to attach (after `banner` appears in
    its output, when given), then stopped by SIGINT; its output is kept."""

    def __init__(self, args, ready, tmp, name, banner=None):
        self.name = name
        self.errpath = os.path.join(tmp, name + ".out")
        self.err = open(self.errpath, "w")
        self.proc = spawn(args, stdout=self.err, stderr=self.err, cwd=tmp)
        for _ in range(1200 if banner else 0):
            if self.proc.poll() is not None or banner in self.text():
                break
            time.sleep(0.05)
        time.sleep(ready)
        if self.proc.poll() is not None:
            die(f"{name} exited with {self.proc.returncode}: {self.text()[-800:]}")

    def text(self):
        with open(self.errpath) as f:
            return f.read()

    def stop(self):
        """Stops it; returns its output (the file is removed)."""
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.err.close()
        text = self.text()
        os.unlink(self.errpath)
        return text


def offcputime_peer(pid, tmp, name="offcputime"):
    return Peer([OFFCPUTIME, "-p", str(pid)], 2.0, tmp, name)


def bpftrace_peer(pids, tmp):
    """tools/bench/critpath_hooks.bt (the default capture's tracepoints,
    counted in maps) on one or two processes."""
    return Peer([BPFTRACE, HOOKS_BT, *(str(p) for p in pids)], 1.0, tmp, "bpftrace",
                banner="Attaching ")


def bpftrace_counts(text):
    """{hook: count} from critpath_hooks.bt's maps, printed when it stops."""
    return {m[1]: int(m[2]) for m in re.finditer(r"^@(\w+): (\d+)$", text, re.M)}


def peers_missing():
    """Notes on the peers that cannot run here."""
    out = []
    if not os.access(OFFCPUTIME, os.X_OK):
        out.append(f"offcputime: not run ({OFFCPUTIME} missing: Debian package libbpf-tools)")
    if not os.access(BPFTRACE, os.X_OK):
        out.append(f"bpftrace: not run ({BPFTRACE} missing: Debian package bpftrace, "
                   "make deps installs it)")
    return out
