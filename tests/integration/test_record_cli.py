#!/usr/bin/env python3
# SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
"""critpath record's command line (user/record/record.c): usage errors exit 2;
runtime errors (no such PID, an output that cannot be created or written,
no privilege) exit 1 with one line saying what is wrong; several -p PIDs are
all recorded; recordings are created 0600 whatever the umask or an existing
file's mode; SIGINT and SIGTERM stop a recording cleanly (exit 0, trailer
written) and leave a -p target running."""
import os
import re
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reclib as R  # noqa: E402
from tap import CRITPATH, Tap  # noqa: E402


def lines(text):
    return [ln for ln in text.splitlines() if ln.strip()]


def one_line_error(tap, name, r, rc, *words):
    """exit rc, exactly one line on stderr, containing every word."""
    ls = lines(r.err)
    tap.ok(f"cli {name}: exit {rc}, one line on stderr naming {', '.join(words)}",
           r.rc == rc and len(ls) == 1 and all(w in ls[0] for w in words), r.describe())


def usage_errors(tap, d, pid):
    out = os.path.join(d, "usage.rec")
    cases = [
        ("no target", [], "nothing to record"),
        ("-p and -- CMD", ["-p", pid, "--", "true"], "not both"),
        ("-p abc", ["-p", "abc"], "'abc' is not a process id"),
        ("-p 0", ["-p", "0"], "'0' is not a process id"),
        ("-d 0", ["-p", pid, "-d", "0"], "-d: '0'"),
        ("-d soon", ["-p", pid, "-d", "soon"], "-d: 'soon'"),
        ("--payload-bytes 513", ["-p", pid, "--payload-bytes", "513"], "--payload-bytes"),
        ("--buffer-mb 3", ["-p", pid, "--buffer-mb", "3"], "--buffer-mb: '3'"),
        ("--compress gzip", ["-p", pid, "--compress", "gzip"], "--compress: 'gzip'"),
        ("unknown option", ["-p", pid, "--frobnicate"], "frobnicate"),
    ]
    for name, args, words in cases:
        r = R.run_record(["-o", out, *args], timeout=30)
        first = (lines(r.err) or [""])[0]
        tap.ok(f"cli usage {name}: exit 2, first line says {words!r}",
               r.rc == 2 and words in first and not os.path.exists(out), r.describe())


def runtime_errors(tap, d, pid):
    gone = R.pid_not_running()
    out = os.path.join(d, "nopid.rec")
    r = R.run_record(["-p", gone, "-o", out, "-d", 1])
    one_line_error(tap, f"-p {gone} (no such process)", r, 1, "no process", str(gone))
    tap.ok("cli no such process: no file left behind", not os.path.exists(out), out)
    r = R.run_record(["-p", f"{pid},{gone}", "-o", out, "-d", 1])
    one_line_error(tap, f"-p {pid},{gone} (one of two missing)", r, 1, "no process", str(gone))

    missing = os.path.join(d, "no-such-dir", "x.rec")
    r = R.run_record(["-p", pid, "-o", missing, "-d", 1])
    one_line_error(tap, "-o in a missing directory", r, 1, missing, "No such file or directory")
    r = R.run_record(["-p", pid, "-o", d, "-d", 1])
    one_line_error(tap, "-o naming a directory", r, 1, d, "Is a directory")

    locked = os.path.join(d, "locked")
    os.mkdir(locked, 0o500)
    target = os.path.join(locked, "x.rec")
    # root without CAP_DAC_OVERRIDE honours the directory's mode
    argv = ["setpriv", "--bounding-set", "-dac_override,-dac_read_search", CRITPATH, "record",
            "-p", str(pid), "-o", target, "-d", "1"]
    r = R.run(argv)
    one_line_error(tap, "-o in a directory without write permission", r, 1, target,
                   "Permission denied")
    # a read-only file system, mounted in a private mount namespace
    argv = ["unshare", "-m", "sh", "-c",
            f"mount -t tmpfs -o ro none {locked} && exec {CRITPATH} record -p {pid} "
            f"-o {target} -d 1"]
    r = R.run(argv)
    one_line_error(tap, "-o on a read-only file system", r, 1, target, "Read-only file system")

    nobody = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"]
    out = os.path.join(d, "nobody.rec")
    r = R.run(nobody + [CRITPATH, "record", "-p", str(pid), "-o", out, "-d", "1"])
    one_line_error(tap, "not root (user nobody)", r, 1, "needs root", "CAP_BPF")
    tap.ok("cli not root: no file left behind", not os.path.exists(out), out)

    r = R.run_record(["-o", os.path.join(d, "cmd.rec"), "--", os.path.join(d, "no-such-prog")])
    tap.ok("cli -- CMD that cannot run: exit 1, says 'cannot run' and why",
           r.rc == 1 and "cannot run" in r.err and "No such file or directory" in r.err,
           r.describe())


def disk_full(tap, d):
    """A 64 KiB tmpfs fills within the first second of a futex storm."""
    full = os.path.join(d, "full")
    os.mkdir(full)
    target = os.path.join(full, "x.rec")
    argv = ["unshare", "-m", "sh", "-c",
            f"mount -t tmpfs -o size=64k none {full} && {CRITPATH} record -o {target} -d 20 "
            f"-- {R.workload('rec_futex')} 1000000 > /dev/null; rc=$?; "
            f"cp {target} {d}/full-copy.rec; exit $rc"]
    r = R.run(argv, timeout=90)
    errs = [ln for ln in lines(r.err) if "disk full" in ln]
    tap.ok("cli disk full: exit 1, one line saying the disk is full and the file is readable "
           "up to the last frame", r.rc == 1 and len(errs) == 1
           and f"{target}: No space left on device" in errs[0],
           r.describe())
    lost = [int(m.group(1)) for m in re.finditer(r"(\d+) lost events", r.err)]
    tap.ok(f"cli disk full: what was not written counts as lost ({lost}), in a line saying so",
           lost and lost[-1] > 0 and "records were not written" in r.err, r.describe())
    dump = R.Dump(os.path.join(d, "full-copy.rec"))
    # how many frames fit before the disk filled depends on timing: maybe none
    tap.ok(f"cli disk full: dump reads what was written ({len(dump.records)} records) and "
           "says where it stopped (exit 1)",
           dump.rc == 1 and dump.header and "cut short" in dump.stderr, dump.problem())


def several_pids(tap, d):
    for form in ("comma", "repeated"):
        ws = [R.Workload([R.workload("rec_sleep"), 10, 20]) for _ in range(2)]
        pids = [w.pid for w in ws]
        path = os.path.join(d, f"several-{form}.rec")
        args = (["-p", f"{pids[0]},{pids[1]}"] if form == "comma"
                else ["-p", pids[0], "-p", pids[1]])
        rec = R.Recorder([*args, "-d", 30], path)
        err = rec.wait_attached()
        if not tap.ok(f"cli several -p ({form}): attaches, says 'recording 2 processes'",
                      err is None and "recording 2 processes" in rec.stderr(),
                      f"{rec.cmdline()}\n{err or rec.stderr()}"):
            continue
        for w in ws:
            w.go()
        outs = [w.finish(timeout=30)[1] for w in ws]
        rc, text = rec.finish(timeout=60)
        dmp = R.check_complete(tap, f"cli several -p ({form})", rc, text, path, rec.cmdline())
        if dmp is None:
            continue
        got = []
        for w, out in zip(ws, outs):
            done = R.parse_lines(out, "DONE")
            wk = R.waking_in(dmp, w.ready["tid"], done[0]["t0"], done[0]["t1"]) if done else []
            meta = dmp.of("process", pid=w.pid)
            got.append((len(wk), bool(meta and meta[0].get("comm") == "rec_sleep")))
        low = 10 - R.unseen_allowance(10)
        tap.ok(f"cli several -p ({form}): both targets' 10 sleeps (at least {low} wakeups "
               "each, see reclib) and process metadata are recorded",
               all(low <= n <= 10 and m for n, m in got), f"(wakeups, metadata) {got}")


def stop_by_signal(tap, d):
    for sig in (signal.SIGINT, signal.SIGTERM):
        name = sig.name
        w = R.Workload([R.workload("rec_sleep"), 100000, 10])
        path = os.path.join(d, f"{name}.rec")
        rec = R.Recorder(["-p", w.pid], path)
        err = rec.wait_attached()
        if not tap.ok(f"cli {name}: attaches", err is None, f"{rec.cmdline()}\n{err}"):
            continue
        w.go()
        time.sleep(1.0)
        t0 = time.monotonic()
        rec.signal(sig)
        rc, text = rec.finish(timeout=60)
        took = time.monotonic() - t0
        tap.ok(f"cli {name}: the recorder stops {took:.1f}s after the signal, exit 0, with its "
               "summary line", rc == 0 and took < 20 and " lost events" in text,
               f"exit {rc}\n{text}")
        dmp = R.check_complete(tap, f"cli {name}", rc, text, path, rec.cmdline())
        if dmp is not None:
            n = len(dmp.of("sched_waking", wakee_tid=w.ready["tid"]))
            tap.ok(f"cli {name}: the recording holds the target's events up to the stop "
                   f"({n} wakeups)", n >= 20, f"types {dmp.count_types()}")
        tap.ok(f"cli {name}: the -p target is still running", w.proc.poll() is None,
               f"exit {w.proc.returncode}")
        R.stop(w.proc)


def modes(tap, d):
    path = os.path.join(d, "umask0.rec")
    r = R.run_record(["-o", path, "--", R.workload("rec_sleep"), 1, 1],
                     preexec_fn=lambda: os.umask(0))
    mode = os.stat(path).st_mode & 0o777 if os.path.exists(path) else None
    tap.ok("cli mode: created 0600 under umask 0", r.rc == 0 and mode == 0o600,
           f"mode {oct(mode) if mode is not None else None}\n{r.describe()}")
    path = os.path.join(d, "existing.rec")
    with open(path, "w") as f:
        f.write("an older file, readable by all\n" * 100)
    os.chmod(path, 0o644)
    r = R.run_record(["-o", path, "--", R.workload("rec_sleep"), 1, 1])
    mode = os.stat(path).st_mode & 0o777
    tap.ok("cli mode: an existing 0644 file is replaced and made 0600",
           r.rc == 0 and mode == 0o600 and R.Dump(path).ok(), f"mode {oct(mode)}\n{r.describe()}")


def codecs(tap, d):
    """lz4 by default, zstd when asked: the header and dump say which, and
    both files hold the same kinds of records."""
    kinds = {}
    for codec, args in (("lz4", []), ("zstd", ["--compress", "zstd"])):
        path = os.path.join(d, f"codec-{codec}.rec")
        r = R.run_record(["-o", path, *args, "--", R.workload("rec_sleep"), 5, 5])
        dmp = R.Dump(path)
        fmt = dmp.header.get("format_version") if dmp.header else None
        comp = dmp.header.get("compression") if dmp.header else None
        kinds[codec] = {x["type"] for x in dmp.records} if dmp.ok() else set()
        tap.ok(f"cli --compress {codec}: exit 0, dump reads it whole, header says "
               f"compression {codec}, format {2 if codec == 'lz4' else 1}",
               r.rc == 0 and dmp.ok() and comp == codec and fmt == (2 if codec == "lz4" else 1),
               f"{r.describe()}\ncompression {comp}, format {fmt}\n{dmp.problem()}")
    # the kinds a sleeping command always makes; a run-queue wait or a
    # disk read (the exec paging in) comes or not with the machine's timing
    core = {"hook", "process", "process_exec", "process_exit", "thread",
            "sched_switch", "sched_waking"}
    tap.ok("cli --compress: both codecs' recordings hold every record type a sleeping "
           "command makes, sleeps included", all(core <= k for k in kinds.values()),
           "\n".join(f"{c}: missing {sorted(core - k)}" for c, k in kinds.items()))


def main():
    tap = Tap()
    if not tap.ok("critpath is built", os.access(CRITPATH, os.X_OK), f"{CRITPATH} missing"):
        R.done(tap)
    d = R.workdir("cli")
    os.chmod(d, 0o755)  # user nobody must reach it to be refused for the right reason
    idle = R.Workload([R.workload("rec_sleep"), 1, 1])  # a live PID that does nothing
    usage_errors(tap, d, idle.pid)
    runtime_errors(tap, d, idle.pid)
    disk_full(tap, d)
    modes(tap, d)
    codecs(tap, d)
    several_pids(tap, d)
    stop_by_signal(tap, d)
    R.done(tap)


if __name__ == "__main__":
    main()
