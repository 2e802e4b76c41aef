#!/usr/bin/env python3
# SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
"""Every context switch of a target thread is in the recording: for each
thread, switches in and out alternate, with no second switch-out before a
switch-in. rec_futex ping-pongs 30,000 times between two threads (~120,000
switches), while this machine's other tasks come and go on the same CPUs.

Some kernels do not report every switch: this VM's leaves the switches out of
its init's (pid 1) threads out of the sched_switch tracepoint, so a target
that follows one on a CPU had no switch-in at all (about 1 in 10^4 switches
here, before the recorder inferred them). The recorder sees the CPU's task
change under it at the next switch there and writes the missing switch-in,
marked inferred; report warns how many. So the check holds whether or not the
kernel hid any, and says how many were inferred."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reclib as R  # noqa: E402
from tap import CRITPATH, Tap  # noqa: E402

N = 30000


def alternation_errors(d, tids):
    """Switches of tids in time order that break in/out alternation."""
    sw = sorted(d.of("sched_switch"), key=lambda r: r["ts_ns"])
    state, bad = {}, []
    for r in sw:
        if r.get("prev_tid") in tids:
            if state.get(r["prev_tid"]) == "out":
                bad.append(("second switch-out", r))
            state[r["prev_tid"]] = "out"
        if r.get("next_tid") in tids:
            if state.get(r["next_tid"]) == "in":
                bad.append(("second switch-in", r))
            state[r["next_tid"]] = "in"
    return bad, len(sw)


def main():
    tap = Tap()
    if not tap.ok("critpath is built", os.access(CRITPATH, os.X_OK), f"{CRITPATH} missing"):
        R.done(tap)
    path = os.path.join(R.workdir("switches"), "switches.rec")
    w = R.Workload([R.workload("rec_futex"), N])
    rec = R.record_running(tap, "switches", w, path, duration=60)
    if rec is None:
        R.done(tap)
    wrc, out = w.finish(timeout=60)
    tap.ok("switches: the workload ran to its end", wrc == 0 and "DONE spurious=0" in out,
           f"exit {wrc}, output {out!r}")
    rc, text = rec.finish(timeout=90)
    d = R.check_complete(tap, "switches", rc, text, path, rec.cmdline())
    if d is None:
        R.done(tap)
    tids = {w.ready["a"], w.ready["b"]}
    bad, total = alternation_errors(d, tids)
    inferred = [r for r in d.of("sched_switch") if r.get("inferred")]
    tap.ok(f"switches: {total} switches of the two threads alternate in and out "
           f"({len(inferred)} switch-ins inferred where the kernel reported none)",
           total >= 2 * N and not bad, "\n".join(f"{k}: {r}" for k, r in bad[:5]))
    odd = [r for r in inferred if r.get("next_tid") not in tids or r.get("ts_ns", 0) <= 0]
    tap.ok("switches: inferred switch-ins name a target thread as next", not odd, f"{odd[:3]}")
    said = [ln for ln in text.splitlines() if "were missing from the kernel's trace" in ln]
    tap.ok("switches: record's summary says how many it inferred (nothing when none)",
           said == ([f"critpath record: {len(inferred)} switches into target threads were "
                     "missing from the kernel's trace and were inferred (dump shows them as "
                     "inferred)"] if inferred else []), f"{said}")
    if inferred:
        rep = R.run([CRITPATH, "report", path, "--format", "json", "-o", os.devnull])
        tap.ok("switches: report warns how many switches were inferred",
               rep.rc == 0 and f"{len(inferred)} switches into target threads were missing "
               "from the kernel's trace" in rep.err, rep.describe() if hasattr(rep, "describe") else rep.err)
    R.done(tap)


if __name__ == "__main__":
    main()
