#!/usr/bin/env python3
# SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
"""critpath record -p -d 60 on targets that go away mid-recording: one that
exits by itself (tests/workloads/rec_sleep.c, about 1 s of sleeps) and one
killed with SIGKILL. The recording must end by itself soon after, exit 0,
say which target exited and how, and leave a whole file (trailer, dump exit 0
with nothing on stderr) holding the target's exit. No drops."""
import os
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reclib as R  # noqa: E402
from tap import CRITPATH, Tap  # noqa: E402


def run(tap, name, argv, kill_after=None):
    path = os.path.join(R.workdir(f"exit-{name}"), f"{name}.rec")
    w = R.Workload(argv)
    rec = R.record_running(tap, f"exit {name}", w, path, duration=60)
    if rec is None:
        return None
    if kill_after:
        time.sleep(kill_after)
        w.proc.send_signal(signal.SIGKILL)
    wrc, _ = w.finish(timeout=40)
    gone = time.monotonic()
    rc, text = rec.finish(timeout=60)
    after = time.monotonic() - gone
    tap.ok(f"exit {name}: the recording ended by itself {after:.1f}s after the target "
           "(-d was 60)", rc == 0 and after < 15, f"{rec.cmdline()}\nexit {rc}\n{text}")
    d = R.check_complete(tap, f"exit {name}", rc, text, path, rec.cmdline())
    if d is not None:
        tap.ok(f"exit {name}: dump says nothing on stderr (the reader saw the whole file)",
               d.stderr == "", d.stderr)
    return w, wrc, text, d


def main():
    tap = Tap()
    if not tap.ok("critpath is built", os.access(CRITPATH, os.X_OK), f"{CRITPATH} missing"):
        R.done(tap)
    got = run(tap, "clean", [R.workload("rec_sleep"), 20, 50])
    if got:
        w, wrc, text, d = got
        tap.ok("exit clean: the recorder says the target exited with code 0, then that all "
               "targets exited",
               f"target {w.pid} exited (exit code 0)" in text and "all targets exited" in text,
               text)
        if d:
            ex = d.of("process_exit", pid=w.pid, group_dead=True)
            tap.ok("exit clean: the recording holds the target's exit, exit_code 0, before the "
                   "trailer's end",
                   len(ex) == 1 and ex[0].get("exit_code") == 0
                   and ex[0]["ts_ns"] <= d.trailer.get("end_ns", 0), f"exits {ex}")
    got = run(tap, "killed", [R.workload("rec_sleep"), 1000, 10], kill_after=1.0)
    if got:
        w, wrc, text, d = got
        tap.ok("exit killed: the recorder says the target was killed by signal 9",
               f"target {w.pid} killed by signal 9" in text, text)
        if d:
            ex = d.of("process_exit", pid=w.pid, group_dead=True)
            tap.ok("exit killed: the recording holds the target's exit with SIGKILL's code",
                   len(ex) == 1 and ex[0].get("exit_code") == signal.SIGKILL, f"exits {ex}")
    hangup(tap)
    R.done(tap)


def hangup(tap):
    """A closed terminal sends the recorder SIGHUP: it ends as with Ctrl-C,
    exit 0, the file whole (trailer and all)."""
    path = os.path.join(R.workdir("exit-hup"), "hup.rec")
    w = R.Workload([R.workload("rec_sleep"), 1000, 10])
    rec = R.record_running(tap, "exit hup", w, path, duration=60)
    if rec is None:
        return
    time.sleep(0.5)
    rec.signal(signal.SIGHUP)
    rc, text = rec.finish(timeout=30)
    w.proc.send_signal(signal.SIGKILL)
    w.finish(timeout=20)
    tap.ok("exit hup: SIGHUP ends the recording like SIGINT, exit 0", rc == 0,
           f"{rec.cmdline()}\nexit {rc}\n{text}")
    R.check_complete(tap, "exit hup", rc, text, path, rec.cmdline())


if __name__ == "__main__":
    main()
