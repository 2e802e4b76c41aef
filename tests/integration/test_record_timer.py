#!/usr/bin/env python3
# SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
"""critpath record -p on a sleeping thread (tests/workloads/rec_sleep.c:
nanosleep, relative and absolute clock_nanosleep, nothing else wakes it).
Every wakeup while it sleeps must come from the kernel's timer, not from a
task: on this kernel nanosleep's hrtimer fires in hard interrupt context
("hardirq"); a timer run from the TIMER or HRTIMER softirq is accepted too.
Each sleep, from the switch out to the wakeup, lasts at least its length.
No drops."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reclib as R  # noqa: E402
from tap import CRITPATH, Tap  # noqa: E402

N, SLEEP_MS = 30, 10
TIMER_CTX = ("hardirq", "softirq:TIMER", "softirq:HRTIMER")


def main():
    tap = Tap()
    if not tap.ok("critpath is built", os.access(CRITPATH, os.X_OK), f"{CRITPATH} missing"):
        R.done(tap)
    path = os.path.join(R.workdir("timer"), "timer.rec")
    w = R.Workload([R.workload("rec_sleep"), N, SLEEP_MS])
    rec = R.record_running(tap, "timer", w, path)
    if rec is None:
        R.done(tap)
    wrc, out = w.finish(timeout=40)
    done = R.parse_lines(out, "DONE")
    tap.ok("timer: the workload ran to its end", wrc == 0 and done, f"exit {wrc}, {out!r}")
    rc, text = rec.finish(timeout=60)
    d = R.check_complete(tap, "timer", rc, text, path, rec.cmdline())
    if d is None or not done:
        R.done(tap)
    tid, t0, t1 = w.ready["tid"], done[0]["t0"], done[0]["t1"]
    wk = R.waking_in(d, tid, t0, t1)
    tap.ok(f"timer: {len(wk)} wakeups of the sleeper during its {N} sleeps (at most "
           f"{R.unseen_allowance(N)} unrecorded, see reclib)",
           N - R.unseen_allowance(N) <= len(wk) <= N, f"wakings {wk[:5]}")
    ctxs = {}
    for x in wk:
        c = x.get("waker_ctx", f"task {x.get('waker_tid')}")
        ctxs[c] = ctxs.get(c, 0) + 1
    tap.ok(f"timer: every wakeup is the timer's, none a task's ({ctxs})",
           wk and all(c in TIMER_CTX for c in ctxs)
           and not any("waker_tid" in x for x in wk), f"contexts {ctxs}")
    switches = [s for s in d.of("sched_switch", prev_tid=tid) if t0 <= s["ts_ns"] <= t1]
    short = []
    for x in wk:
        outs = [s for s in switches if s["ts_ns"] <= x["ts_ns"]]
        if not outs or outs[-1].get("prev_state") != "blocked":
            short.append(f"no blocked switch before {x}")
        elif x["ts_ns"] - outs[-1]["ts_ns"] < SLEEP_MS * R.MS * 0.95:
            short.append(f"slept {(x['ts_ns'] - outs[-1]['ts_ns']) / R.MS:.2f} ms: "
                         f"{outs[-1]} -> {x}")
    tap.ok(f"timer: each wakeup ends a blocked stretch of at least {SLEEP_MS} ms",
           wk and not short, "\n".join(short[:5]))
    R.done(tap)


if __name__ == "__main__":
    main()
