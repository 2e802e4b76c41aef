#!/usr/bin/env python3
# SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
"""critpath record -- sh -c '...' where the shell runs short-lived children
one after another (tests/workloads/rec_sleep.c, exec'd, sleeping 20 ms or 1
ms and exiting): each lives for less than the recorder's 100 ms tick, and
the recording must still name each of them. Process metadata is written as
soon as the recorder sees a child's fork and exec in its stream, read from
/proc then, or from the exec record when the child is already gone. So for
every child: a process record after its exec with comm rec_sleep, the file
exec'd as exe and the shell as ppid, and a thread record naming its main
thread. No drops."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reclib as R  # noqa: E402
from tap import CRITPATH, Tap  # noqa: E402

ROUNDS = 6  # each: a child sleeping 20 ms, then one sleeping 1 ms


def main():
    tap = Tap()
    if not tap.ok("critpath is built", os.access(CRITPATH, os.X_OK), f"{CRITPATH} missing"):
        R.done(tap)
    path = os.path.join(R.workdir("shortlived"), "shortlived.rec")
    prog = R.workload("rec_sleep")
    exe = os.path.realpath(prog)  # what /proc/PID/exe says
    script = (f"i=0; while [ $i -lt {ROUNDS} ]; do {prog} 1 20 || exit 1; "
              f"{prog} 1 1 || exit 1; i=$((i + 1)); done")
    r = R.record_cmd(path, ["sh", "-c", script], extra=["-q"])
    d = R.check_complete(tap, "shortlived", r.rc, r.err, path, r.describe())
    if d is None:
        R.done(tap)
    execs = d.of("process_exec", filename=prog)
    tap.ok(f"shortlived: {2 * ROUNDS} children exec'd {prog}", len(execs) == 2 * ROUNDS,
           f"execs {execs}")
    lives = []
    for x in execs:
        c = x["pid"]
        forks = d.of("process_fork", child_pid=c)
        exits = [e for e in d.of("process_exit", pid=c) if e.get("group_dead")]
        sh = forks[0]["parent_pid"] if forks else None
        if exits:
            lives.append((exits[0]["ts_ns"] - x["ts_ns"]) / R.MS)
        procs = [m for m in d.of("process", pid=c) if m["ts_ns"] >= x["ts_ns"]]
        thr = [m for m in d.of("thread", pid=c, tid=c) if m["ts_ns"] >= x["ts_ns"]]
        m = procs[0] if procs else {}
        tap.ok(f"shortlived: child {c} (forked by {sh}): process metadata after its exec, "
               f"comm rec_sleep, exe {exe}, ppid {sh}",
               m.get("comm") == "rec_sleep" and m.get("exe") == exe and m.get("ppid") == sh,
               f"process records of {c}: {d.of('process', pid=c)}\nexec {x}\nforks {forks}")
        tap.ok(f"shortlived: child {c}: its main thread named rec_sleep after the exec",
               thr and thr[0].get("comm") == "rec_sleep",
               f"thread records of {c}: {d.of('thread', pid=c)}")
    # what makes the test worth running: children gone before a tick could see them
    print(f"# children lived {', '.join(f'{ms:.1f}' for ms in lives)} ms after their exec",
          flush=True)
    R.done(tap)


if __name__ == "__main__":
    main()
