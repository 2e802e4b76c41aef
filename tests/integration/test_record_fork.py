#!/usr/bin/env python3
# SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
"""critpath record -p on a process that forks a child which execs another
program (tests/workloads/rec_fork.c running rec_futex.c): the child is
followed. The recording must hold the fork (parent and child ids), the exec
(file name), the child's own futex events and its new thread, process
metadata updated after the exec (comm, exe, cmdline, ppid), both exits, and
end by itself when both are gone. No drops.

And critpath record -p on a process whose child was started before the
recording (a server's workers under the master whose pid a user has): the
child is a target too, its futex waits recorded."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kpathlib as K  # noqa: E402
import reclib as R  # noqa: E402
from tap import CRITPATH, Tap  # noqa: E402

N, LINGER_MS = 20, 500


def main():
    tap = Tap()
    if not tap.ok("critpath is built", os.access(CRITPATH, os.X_OK), f"{CRITPATH} missing"):
        R.done(tap)
    path = os.path.join(R.workdir("fork"), "fork.rec")
    prog = R.workload("rec_futex")
    w = R.Workload([R.workload("rec_fork"), prog, N, LINGER_MS])
    rec = R.record_running(tap, "fork", w, path)
    if rec is None:
        R.done(tap)
    wrc, out = w.finish(timeout=40)
    child = R.parse_lines(out, "CHILD")
    kid = R.parse_lines(out, "READY")
    tap.ok("fork: the parent and the exec'd child ran to their ends",
           wrc == 0 and child and kid and "DONE status=0" in out, f"exit {wrc}, {out!r}")
    rc, text = rec.finish(timeout=60)
    tap.ok(f"fork: the recording ended by itself when parent and child had exited "
           f"({rec.elapsed:.1f}s)", rc == 0 and "all targets exited" in text, text)
    d = R.check_complete(tap, "fork", rc, text, path, rec.cmdline())
    if d is None or not child or not kid:
        R.done(tap)
    P, C = w.pid, child[0]["pid"]
    a, b = kid[0]["a"], kid[0]["b"]
    forks = d.of("process_fork", parent_pid=P, child_pid=C)
    tap.ok(f"fork: process_fork {P} -> {C} (child_tid {C}, child_comm rec_fork)",
           len(forks) == 1 and forks[0].get("child_tid") == C
           and forks[0].get("child_comm") == "rec_fork" and forks[0]["pid"] == P,
           f"forks {d.of('process_fork')}")
    execs = d.of("process_exec", pid=C)
    tap.ok(f"fork: process_exec of {C} names {prog}",
           len(execs) == 1 and execs[0].get("filename") == prog
           and (not forks or execs[0]["ts_ns"] > forks[0]["ts_ns"]), f"execs {execs}")
    waits = [f for f in d.of("futex", pid=C, tid=a, op="FUTEX_WAIT_PRIVATE")
             if f.get("phase") in ("exit", "blocked")
             if f.get("uaddr") == hex(kid[0]["wa"]) and f.get("ret", 0) == 0]
    tap.ok(f"fork: the child's own futex waits are recorded ({len(waits)} of {N})",
           len(waits) == N, f"child futex records {d.of('futex', pid=C)[:4]}")
    wakers = {x.get("waker_tid") for f in waits
              for x in R.waking_in(d, a, f["enter_ns"], f["ts_ns"])}
    tap.ok(f"fork: ... each woken by the child's other thread {b}", wakers == {b},
           f"wakers {wakers}")
    new = d.of("process_fork", parent_pid=C, child_pid=C, child_tid=b)
    thr = d.of("thread", pid=C, tid=b)
    tap.ok(f"fork: the child's new thread {b}: a process_fork and thread metadata",
           len(new) == 1 and thr and thr[0].get("comm") == "rec_futex",
           f"fork {new}\nthread {thr}")
    meta = [m for m in d.of("process", pid=C) if not execs or m["ts_ns"] >= execs[0]["ts_ns"]]
    m = meta[-1] if meta else {}
    tap.ok("fork: process metadata of the child after its exec: comm rec_futex, exe, "
           "cmdline, ppid",
           m.get("comm") == "rec_futex" and m.get("exe") == prog
           and m.get("cmdline") == f"{prog} {N} {LINGER_MS}" and m.get("ppid") == P,
           f"process records of {C}: {d.of('process', pid=C)}")
    exits = {x["pid"] for x in d.of("process_exit") if x.get("group_dead")}
    tap.ok(f"fork: both {P} and {C} exit (group_dead)", {P, C} <= exits,
           f"exits {d.of('process_exit')}")
    child_before(tap, prog)
    R.done(tap)


PARENT = "import os, sys\npid = os.fork()\nif pid == 0:\n    os.execv(sys.argv[1], sys.argv[1:])\n" \
         "os.waitpid(pid, 0)\n"


def child_before(tap, prog):
    path = os.path.join(R.workdir("fork"), "before.rec")
    w = R.Workload([sys.executable, "-c", PARENT, prog, N, LINGER_MS])
    P, C, a = w.proc.pid, w.pid, w.ready["a"]
    rec = R.Recorder(["-p", P, "-d", 40], path)
    err = rec.wait_attached()
    if not tap.ok("fork: critpath record -p PARENT attaches", err is None,
                  f"{rec.cmdline()}\n{err}"):
        K.stop(w.proc)
        return
    w.go()
    wrc, out = w.finish(timeout=40)
    rc, text = rec.finish(timeout=60)
    tap.ok(f"fork: the child {C} started before the recording is named a target",
           f"with the 1 process the target started before the recording: {C}" in text, text)
    tap.ok("fork: ... and the recording ends when parent and child have exited",
           wrc == 0 and rc == 0 and "all targets exited" in text, f"exit {wrc}/{rc}\n{text}")
    d = R.check_complete(tap, "fork-before", rc, text, path, rec.cmdline())
    if d is None:
        return
    waits = [f for f in d.of("futex", pid=C, tid=a, op="FUTEX_WAIT_PRIVATE")
             if f.get("phase") in ("exit", "blocked") and f.get("ret", 0) == 0]
    tap.ok(f"fork: the earlier child's futex waits are recorded ({len(waits)} of {N})",
           len(waits) == N, f"child futex records {d.of('futex', pid=C)[:4]}")
    procs = {m["pid"] for m in d.of("process")}
    tap.ok("fork: process metadata of both", {P, C} <= procs, f"process records of {procs}")


if __name__ == "__main__":
    main()
