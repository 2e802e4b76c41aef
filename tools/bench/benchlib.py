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
        seen = []
        for _ in range(1200 if banner else 0):
            if self.proc.poll() is not None:
                break
            m = re.search(banner, self.text())
            if m and not m.groups():
                break
            # bpftrace's "Attaching N probes...": then N perf events open
            # (and its output buffers'), the count still for 0.25 s
            seen.append(self.perf_events() if m else 0)
            if m and len(seen) > 5 and seen[-1] >= int(m[1]) and len(set(seen[-6:])) == 1:
                break
            time.sleep(0.05)
        time.sleep(ready)
        if self.proc.poll() is not None:
            die(f"{name} exited with {self.proc.returncode}: {self.text()[-800:]}")

    def text(self):
        with open(self.errpath) as f:
            return f.read()

    def perf_events(self):
        n = 0
        try:
            for fd in os.listdir(f"/proc/{self.proc.pid}/fd"):
                try:
                    n += os.readlink(f"/proc/{self.proc.pid}/fd/{fd}") == \
                        "anon_inode:[perf_event]"
                except OSError:
                    pass
        except OSError:
            pass
        return n

    def stop(self):
        """Stops it; returns its output (the file is removed)."""
        t0 = time.monotonic()
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.err.close()
        text = self.text()
        if os.environ.get("BENCH_DEBUG_PEERS"):
            print(f"{self.name}: stopped in {time.monotonic() - t0:.1f} s, exit "
                  f"{self.proc.returncode}, output: {text[-1500:]!r}", file=sys.stderr)
        os.unlink(self.errpath)
        return text


def offcputime_peer(pid, tmp, name="offcputime"):
    return Peer([OFFCPUTIME, "-p", str(pid)], 2.0, tmp, name)


def bpftrace_peer(pids, tmp):
    """tools/bench/critpath_hooks.bt (the default capture's tracepoints,
    counted in maps) on one or two processes."""
    return Peer([BPFTRACE, HOOKS_BT, *(str(p) for p in pids)], 0.5, tmp, "bpftrace",
                banner=r"Attaching (\d+) probes")


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


def children_cpu():
    """CPU seconds of this process's reaped children (utime + stime)."""
    import resource
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def tree_pids(pid):
    """pid and its descendants (nginx's master and workers)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            for t in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{t}/children") as f:
                    todo.extend(int(c) for c in f.read().split())
        except OSError:
            pass
    return out


def tree_cpu(pid):
    total = 0.0
    for p in tree_pids(pid):
        try:
            total += cpu_seconds(p)
        except OSError:
            pass
    return total


def h2load(args, tmp, server_pid):
    """An h2load run (ARGS: its options and URL): req/s, requests done,
    mean / p50 / p99 latency in ms (from its --log-file), and the CPU the
    server's process tree and h2load spent per request."""
    log = os.path.join(tmp, "h2load.log")
    cpu0 = tree_cpu(server_pid) + children_cpu()
    r = subprocess.run(["h2load", "--log-file", log, *args], capture_output=True, text=True,
                       timeout=600)
    cpu = tree_cpu(server_pid) + children_cpu() - cpu0
    m = re.search(r"finished in [\d.]+\w+, ([\d.]+) req/s", r.stdout)
    ok = re.search(r"requests: \d+ total, \d+ started, \d+ done, (\d+) succeeded", r.stdout)
    if r.returncode != 0 or not m or not ok:
        die(f"h2load failed (exit {r.returncode}): {r.stdout[-500:]} {r.stderr[-500:]}")
    lat = []
    with open(log) as f:
        for line in f:
            c = line.split("\t")
            if len(c) >= 3:
                lat.append(int(c[2]))
    os.unlink(log)
    if not lat:
        die("h2load wrote no --log-file rows")
    lat.sort()
    done = int(ok[1])
    return {"rps": float(m[1]), "done": done, "mean_ms": sum(lat) / len(lat) / 1e3,
            "p50_ms": lat[len(lat) // 2] / 1e3, "p99_ms": lat[min(len(lat) - 1,
                                                                  len(lat) * 99 // 100)] / 1e3,
            "cpu_us": 1e6 * cpu / max(done, 1)}


def ratio_table(rows):
    """Prints rows of (name, untraced before, traced, untraced after) (dicts
    with rps, p99_ms, cpu_us) as ratios against the mean of the untraced
    runs either side; returns {name: (throughput, p99, cpu) ratios}."""
    print(f"{'run':26}{'untraced':>10}{'traced':>10}{'untraced':>10}{'ratio':>8}"
          f"{'p99 ms':>9}{'ratio':>8}{'CPU us/req':>12}{'ratio':>8}")
    out = {}
    for name, a, x, b in rows:
        thr = x["rps"] / ((a["rps"] + b["rps"]) / 2)
        p99 = x["p99_ms"] / ((a["p99_ms"] + b["p99_ms"]) / 2)
        cpu = x["cpu_us"] / ((a["cpu_us"] + b["cpu_us"]) / 2)
        out[name] = (thr, p99, cpu)
        print(f"{name:26}{a['rps']:10.0f}{x['rps']:10.0f}{b['rps']:10.0f}{thr:8.3f}"
              f"{x['p99_ms']:9.2f}{p99:8.3f}{x['cpu_us']:12.1f}{cpu:8.3f}")
    return out


def print_counts(counts, reqs, what="per request"):
    hits = sorted(((n, c / max(reqs, 1)) for n, c in counts.items() if c), key=lambda x: -x[1])
    if not hits:
        # seen twice on two processes, not reproduced: BENCH_DEBUG_PEERS=1
        # prints the peers' output and how long they took to stop
        print(f"bpftrace counted nothing ({'its maps all 0' if counts else 'no maps printed'}"
              f"; BENCH_DEBUG_PEERS=1 shows its output): its row is not a measurement")
        return
    print(f"bpftrace counted {what}: " + ", ".join(f"{n} {c:.2f}" for n, c in hits))
