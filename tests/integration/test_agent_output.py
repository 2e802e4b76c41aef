#!/usr/bin/env python3
# SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
"""Full disks and bad output directories (issue 35): a file critpath writes
is complete or not there.

`report -o` into a full file system (a 64 KiB tmpfs filled to its last
block) says "No space left on device" naming the file, exits 1 and leaves no
file, nor truncates one that was there. The agent's --out and --flight on a
full file system: the failure said once for each kind of file, every file
not written counted in the exit summary, no empty or temporary file left.
--flight and --out that are a symbolic link, a world-writable directory, a
file, another user's directory or under a missing directory are refused at
start (exit 2, before attaching, the reason named); a missing one is made
0700 whatever the umask, its files 0600.

The test runs in a mount namespace of its own, so what it mounts goes away
with it however it ends; it unmounts what it mounted besides."""
import ctypes
import json
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kpathlib as K  # noqa: E402
import reclib as R  # noqa: E402
from tap import CRITPATH, WORKLOADS, Tap  # noqa: E402

CLONE_NEWNS = 0x00020000
ENOSPC_TEXT = "No space left on device"


def private_mounts():
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(CLONE_NEWNS) != 0:
        raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWNS)")
    subprocess.run(["mount", "--make-rprivate", "/"], check=True)


class FullDisk:
    """A 64 KiB tmpfs at path (root's, 0700), filled to its last block by
    path/fill; unmounted at the end of the with block."""

    def __init__(self, path):
        self.path = path

    def __enter__(self):
        os.makedirs(self.path, exist_ok=True)
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k,mode=0700", "none", self.path],
                       check=True)
        try:
            self.fill()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def fill(self):
        """path/fill grown until the file system is full."""
        fd = os.open(os.path.join(self.path, "fill"), os.O_WRONLY | os.O_CREAT | os.O_APPEND,
                     0o600)
        try:
            while True:
                os.write(fd, b"\0" * 4096)
        except OSError:
            pass
        finally:
            os.close(fd)

    def __exit__(self, *exc):
        if subprocess.run(["umount", self.path]).returncode:
            subprocess.run(["umount", "-l", self.path])

    def left(self):
        """Files there besides the filler, with their sizes."""
        return {n: os.lstat(os.path.join(self.path, n)).st_size
                for n in os.listdir(self.path) if n not in ("fill", "old.json")}


def report_full(tap, d):
    rec = os.path.join(d, "small.rec")
    r = R.record_cmd(rec, [R.workload("rec_sleep"), 5, 5])
    if not tap.ok("a small recording to report on", r.rc == 0 and os.path.exists(rec),
                  r.describe()):
        return
    full = os.path.join(d, "full-report")
    with FullDisk(full) as disk:
        old = os.path.join(full, "old.json")
        for fmt in ("json", "text", "html", "pprof"):
            out = os.path.join(full, f"x.{fmt}")
            r = R.run([CRITPATH, "report", rec, "-q", "-f", fmt, "-o", out])
            tap.ok(f"report -f {fmt} -o on a full disk: exit 1, says '{out}' and "
                   f"'{ENOSPC_TEXT}', leaves no file", r.rc == 1 and out in r.err
                   and ENOSPC_TEXT in r.err and not disk.left(),
                   f"{r.describe()}\nleft: {disk.left()}")
        # room for a small file, made before the disk is full again
        os.unlink(os.path.join(full, "fill"))
        with open(old, "w") as f:
            f.write('{"an older report": true}\n')
        disk.fill()
        r = R.run([CRITPATH, "report", rec, "-q", "-f", "json", "-o", old])
        with open(old) as f:
            kept = f.read()
        tap.ok("report -o over an existing file on a full disk: exit 1, the file as it was",
               r.rc == 1 and ENOSPC_TEXT in r.err and kept == '{"an older report": true}\n'
               and not disk.left(), f"{r.describe()}\nfile: {kept!r}\nleft: {disk.left()}")


def start_agent(d, name, args):
    errp = os.path.join(d, f"{name}.stderr")
    err = open(errp, "w")
    p = K.spawn([CRITPATH, "agent", *map(str, args)], stdout=err, stderr=err)
    return p, errp


def agent_full(tap, d):
    server, sf = K.start_ready([os.path.join(WORKLOADS, "kp_server"), "--mode", "probe"])
    full = os.path.join(d, "full-agent")
    with FullDisk(full) as disk:
        agent, errp = start_agent(d, "full", ["-p", sf["pid"], "--out", full, "--flight", full,
                                              "--slow", "5ms", "--profile-every", "1s",
                                              "-d", 6])
        deadline = time.time() + 30
        while time.time() < deadline and agent.poll() is None:
            if "following" in open(errp).read():
                break
            time.sleep(0.1)
        try:
            K.run_client(sf["port"], 40)
            load = ""
        except RuntimeError as e:
            load = str(e)
        try:
            rc = agent.wait(timeout=60)
        except subprocess.TimeoutExpired:
            rc = None
        text = open(errp).read()
        left = disk.left()
    K.stop(server)
    said = [ln for ln in text.splitlines() if "not written" in ln and ENOSPC_TEXT in ln]
    prof = [ln for ln in said if f"{full}/profile-" in ln]
    flight = [ln for ln in said if f"{full}/flight-" in ln]
    m = re.search(r"total: .*, (\d+) files not written", text)
    n = int(m.group(1)) if m else 0
    tap.ok("agent --out on a full disk: exit 0, the profile files' failure said once, "
           f"naming the file and '{ENOSPC_TEXT}'", rc == 0 and not load and len(prof) == 1,
           f"exit {rc} {load}\n{text[-2500:]}")
    tap.ok("agent --flight on a full disk: a slow request's flight recording not written, "
           "said once", len(flight) == 1, text[-2500:])
    tap.ok(f"agent on a full disk: the exit summary counts the files not written ({n}: "
           "3 a window, at least 3 windows of the 6 s, and the flight recording)", n >= 10,
           text[-1500:])
    tap.ok("agent on a full disk: no file left there (none empty, no temporary one)",
           not left, left)


def agent_refused(tap, d, pid):
    good = os.path.join(d, "good")
    os.mkdir(good, 0o700)
    link = os.path.join(d, "link")
    os.symlink(good, link)
    world = os.path.join(d, "world")
    os.mkdir(world)
    os.chmod(world, 0o1777)
    afile = os.path.join(d, "afile")
    open(afile, "w").close()
    theirs = os.path.join(d, "theirs")
    os.mkdir(theirs, 0o700)
    os.chown(theirs, 65534, 65534)
    deep = os.path.join(d, "missing", "deeper")
    cases = [("--flight", link, "symbolic link"),
             ("--flight", world, "writable by group or others"),
             ("--out", link, "symbolic link"),
             ("--out", world, "writable by group or others"),
             ("--out", afile, "not a directory"),
             ("--flight", theirs, "owned by uid 65534"),
             ("--out", deep, "No such file or directory")]
    for opt, path, why in cases:
        r = R.run([CRITPATH, "agent", "-p", pid, opt, path, "-d", 2], timeout=30)
        tap.ok(f"agent {opt} {os.path.basename(path)}: refused at start, exit 2, one line "
               f"naming it and '{why}'", r.rc == 2 and "following" not in r.err
               and len(r.err.splitlines()) == 1 and f"{opt} {path}: " in r.err and why in r.err,
               r.describe())
    tap.ok("the refused paths are as they were: the link's directory empty, no directory "
           "made under a missing one", not os.listdir(good)
           and not os.path.exists(os.path.dirname(deep)), os.listdir(good))


def agent_made(tap, d, pid):
    out = os.path.join(d, "made")
    r = R.run([CRITPATH, "agent", "-p", pid, "--out", out, "--profile-every", "1s", "-d", 2,
               "-q"], timeout=60, preexec_fn=lambda: os.umask(0o277))
    mode = os.stat(out).st_mode & 0o7777 if os.path.isdir(out) else None
    files = sorted(os.listdir(out)) if mode is not None else []
    modes = {f: os.stat(os.path.join(out, f)).st_mode & 0o777 for f in files}
    sizes = {f: os.stat(os.path.join(out, f)).st_size for f in files}
    tap.ok("agent --out a missing directory: made 0700 under umask 0277",
           r.rc == 0 and mode == 0o700, f"mode {oct(mode) if mode is not None else None}\n"
           f"{r.describe()}")
    counts = [f for f in files if f.endswith(".counts.json")]
    ok = bool(counts)
    for c in counts:
        try:
            json.load(open(os.path.join(out, c)))
        except ValueError:
            ok = False
    tap.ok(f"agent --out: its windows' files are 0600, none empty, none temporary "
           f"({len(files)} files)", ok and all(m == 0o600 for m in modes.values())
           and all(sizes.values()) and not any(f.startswith(".") for f in files),
           f"{modes}\n{sizes}")


def main():
    tap = Tap()
    if not tap.ok("critpath is built", os.access(CRITPATH, os.X_OK), f"{CRITPATH} missing"):
        K.done(tap)
    private_mounts()
    d = K.workdir("output")
    idle = R.Workload([R.workload("rec_sleep"), 1, 1])  # a live PID that does nothing
    report_full(tap, d)
    agent_refused(tap, d, idle.pid)
    agent_made(tap, d, idle.pid)
    agent_full(tap, d)
    K.done(tap)


if __name__ == "__main__":
    main()
