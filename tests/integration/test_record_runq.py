#!/usr/bin/env python3
# SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
"""critpath record -p on a thread that must share its CPU with a hog: the
target (tests/workloads/rec_spin.c: 5 ms of CPU, 5 ms asleep, for 3 s) and a
CPU hog (rec_hog.c, never sleeps, NOT traced) are both pinned to CPU 0. The
target's run-queue waits must be recorded as runq_culprit records that name
the hog (pid and comm) with how long it held the CPU, and the hog must be
most of the waiting. No drops."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reclib as R  # noqa: E402
from tap import CRITPATH, Tap  # noqa: E402

CPU, SECONDS, SPIN_MS, SLEEP_MS = 0, 3, 5, 5


def main():
    tap = Tap()
    if not tap.ok("critpath is built", os.access(CRITPATH, os.X_OK), f"{CRITPATH} missing"):
        R.done(tap)
    path = os.path.join(R.workdir("runq"), "runq.rec")
    hog = R.Workload([R.workload("rec_hog"), CPU])
    w = R.Workload([R.workload("rec_spin"), CPU, SECONDS, SPIN_MS, SLEEP_MS])
    rec = R.record_running(tap, "runq", w, path)
    if rec is None:
        R.done(tap)
    wrc, out = w.finish(timeout=40)
    R.stop(hog.proc)
    tap.ok("runq: the workload ran to its end", wrc == 0 and "DONE" in out,
           f"exit {wrc}, {out!r}")
    rc, text = rec.finish(timeout=60)
    d = R.check_complete(tap, "runq", rc, text, path, rec.cmdline())
    if d is None:
        R.done(tap)
    tid, hog_pid = w.ready["tid"], hog.pid
    cul = d.of("runq_culprit", victim_tid=tid)
    by_hog = [c for c in cul if c.get("culprit_pid") == hog_pid]
    total = sum(c.get("ns", 0) for c in cul)
    hog_ns = sum(c.get("ns", 0) for c in by_hog)
    tap.ok(f"runq: {len(by_hog)} of {len(cul)} run-queue culprit records of thread {tid} name "
           f"the hog (pid {hog_pid})", len(by_hog) >= 10, f"culprits {cul[:8]}")
    tap.ok("runq: they name it by comm 'rec_hog' and tid, with a duration",
           by_hog and all(c.get("culprit_comm") == "rec_hog" and c.get("culprit_tid") == hog_pid
                          and c.get("ns", 0) > 0 for c in by_hog), f"e.g. {by_hog[:3]}")
    # other helpers' loads share CPU 0 too: the hog need not be the only one
    by_comm = {}
    for c in cul:
        by_comm[c.get("culprit_comm")] = by_comm.get(c.get("culprit_comm"), 0) + c.get("ns", 0)
    top = sorted(by_comm.items(), key=lambda kv: -kv[1])[:5]
    tap.ok(f"runq: the hog held the CPU {hog_ns / R.MS:.1f} ms of the target's "
           f"{total / R.MS:.1f} ms of waiting (at least 50 ms)", hog_ns >= 50 * R.MS,
           f"culprits by comm (ms): {[(k, round(v / R.MS, 1)) for k, v in top]}")
    waits = {}
    for c in cul:
        key = (c["ts_ns"], c.get("runnable_since"))
        waits[key] = waits.get(key, 0) + c.get("ns", 0)
    off = [(k, v) for k, v in waits.items() if k[1] is None or v != k[0] - k[1]]
    tap.ok(f"runq: in each of {len(waits)} waits the culprits' times add up to the wait "
           "exactly (ts_ns - runnable_since)", waits and not off,
           f"{len(off)} differ, e.g. {off[:3]}")
    bad = [c for c in cul if c.get("cpu") != CPU or c.get("pid") != w.pid
           or not 0 < c.get("ns", 0) <= c["ts_ns"] - c.get("runnable_since", c["ts_ns"])]
    tap.ok(f"runq: each record is on CPU {CPU}, and no longer than the wait it is part of "
           "(ts_ns - runnable_since)", cul and not bad, f"e.g. {bad[:3]}")
    pre = [s for s in d.of("sched_switch", prev_tid=tid, prev_state="preempted")
           if s.get("next_pid") == hog_pid and s.get("next_comm") == "rec_hog"]
    tap.ok(f"runq: the target was preempted by the hog {len(pre)} times (sched_switch "
           "next_pid/next_comm)", len(pre) >= 1, "no preempted switch to the hog")
    R.done(tap)


if __name__ == "__main__":
    main()
