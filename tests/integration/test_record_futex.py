#!/usr/bin/env python3
# SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
"""critpath record on two threads ping-ponging through a futex
(tests/workloads/rec_futex.c, recorded with -p PID): each thread waits N times
on its own futex word and every wait is ended by the other thread's wake, so
the recording must hold N futex waits per thread (op, uaddr, result), each
with exactly one sched_waking naming the other thread as the waker, and no
drops. Twice: with --all-syscalls (every call, with its result, and the
wakes), and with the default capture (each wait as the interval it blocked,
from the scheduler: phase "blocked", no result)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reclib as R  # noqa: E402
from tap import CRITPATH, Tap  # noqa: E402

N = 200


def check_thread(tap, d, me, other, uaddr, name, full):
    waits = d.of("futex", tid=me, uaddr=uaddr, op="FUTEX_WAIT_PRIVATE")
    phase = "exit" if full else "blocked"
    exits = [w for w in waits if w.get("phase") == phase]
    tap.ok(f"futex: thread {name} ({me}): {len(exits)} FUTEX_WAIT_PRIVATE {phase} records on "
           f"{uaddr}, {N} expected", len(exits) == N and len(waits) == N,
           f"{len(waits)} records, phases {sorted({w.get('phase') for w in waits})}")
    bad = [w for w in exits if (full and w.get("ret") != 0) or w.get("call") != "futex"
           or not w.get("enter_ns", 0) <= w["ts_ns"]]
    tap.ok(f"futex: thread {name}: every wait " + ("returned 0 " if full else "") +
           "(call futex, enter_ns <= ts_ns)", exits and not bad, f"e.g. {bad[:3]}")
    wrong, unseen = [], 0
    for w in exits:
        wk = R.waking_in(d, me, w["enter_ns"], w["ts_ns"])
        if not wk:
            unseen += 1  # see reclib.unseen_allowance
        elif len(wk) != 1 or wk[0].get("waker_tid") != other or "waker_ctx" in wk[0]:
            wrong.append((w, wk))
    tap.ok(f"futex: thread {name}: each wait has one sched_waking, by thread {other} "
           f"({unseen} not recorded, at most {R.unseen_allowance(N)} allowed)",
           exits and not wrong and unseen <= R.unseen_allowance(N),
           f"{len(wrong)} of {len(exits)} waits differ, e.g.\n" +
           "\n".join(f"wait {w}\n  wakings {wk}" for w, wk in wrong[:3]))
    if not full:
        return  # a wake that does not block is not seen by the default capture
    wakes = [r for r in d.of("futex", tid=other, uaddr=uaddr, op="FUTEX_WAKE_PRIVATE",
                             phase="exit") if r.get("ret") == 1]
    tap.ok(f"futex: thread {other} woke {name} {len(wakes)} times (FUTEX_WAKE_PRIVATE ret 1)",
           len(wakes) == N, f"{len(wakes)} wakes returning 1")


def main():
    tap = Tap()
    if not tap.ok("critpath is built", os.access(CRITPATH, os.X_OK), f"{CRITPATH} missing"):
        R.done(tap)
    for full in (True, False):
        one_run(tap, full)
    R.done(tap)


def one_run(tap, full):
    print("# " + ("--all-syscalls" if full else "default capture"), flush=True)
    path = os.path.join(R.workdir("futex"), "futex.rec")
    w = R.Workload([R.workload("rec_futex"), N])
    rec = R.record_running(tap, "futex", w, path, *(["--all-syscalls"] if full else []))
    if rec is None:
        R.done(tap)
    wrc, out = w.finish(timeout=40)
    tap.ok("futex: the workload ran to its end", wrc == 0 and "DONE spurious=0" in out,
           f"exit {wrc}, output {out!r}")
    rc, text = rec.finish(timeout=60)
    tap.ok(f"futex: the recording ended by itself when the target exited ({rec.elapsed:.1f}s)",
           rc == 0 and rec.elapsed < 35 and "all targets exited" in text, text)
    d = R.check_complete(tap, "futex", rc, text, path, rec.cmdline())
    if d is None:
        R.done(tap)
    a, b = w.ready["a"], w.ready["b"]
    wa, wb = hex(w.ready["wa"]), hex(w.ready["wb"])
    check_thread(tap, d, a, b, wa, "A", full)
    check_thread(tap, d, b, a, wb, "B", full)
    tap.ok("futex: the futex records carry the process id of both threads",
           {r["pid"] for r in d.of("futex") if r["tid"] in (a, b)} == {w.pid},
           f"pids {sorted({r['pid'] for r in d.of('futex')})}")


if __name__ == "__main__":
    main()
