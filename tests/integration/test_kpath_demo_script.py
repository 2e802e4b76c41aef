#!/usr/bin/env python3
# SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
"""`sudo make demo`, the README's main command, run as a new user runs it
(tools/demo/run.sh, on free ports, its files in a temporary directory).
Unlike test_kpath_demo, the load is already running when the recording
starts, as on any server critpath is pointed at: connections open before
the recording, and replies in flight when it attaches. The printed report
must show the front end's requests by name, cache-maint as the lock
culprit, and no lost events; in the recording, the metadata of the start
comes before the first event in time order."""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kpathlib as K  # noqa: E402
from tap import BUILD, CRITPATH, Tap  # noqa: E402

RUN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools", "demo",
                   "run.sh")


def main():
    tap = Tap()
    out = tempfile.mkdtemp(prefix="critpath-demo-")
    port, kv_port = K.free_port(), K.free_port()
    env = dict(os.environ, DEMO_PORT=str(port), DEMO_KV_PORT=str(kv_port), DEMO_SECONDS="3",
               DEMO_OUT=out)
    try:
        r = subprocess.run(["bash", RUN, BUILD], env=env, capture_output=True, text=True,
                           timeout=180)
    except subprocess.TimeoutExpired:
        tap.ok("make demo: finishes within 180 s", False, "")
        tap.done()
    text = r.stdout + r.stderr
    if not tap.ok("make demo: exits 0", r.returncode == 0, f"exit {r.returncode}\n{text}"):
        tap.done()
    m = re.search(r"critpath record: .* (\d+) lost events", text)
    tap.ok("make demo: the recording lost no events", m and m[1] == "0",
           m[0] if m else text[-2000:])
    steps = re.findall(rf"^\s+[\d.]+\s+[\d.]+%.*\s(frontend:{port} ; GET /\S+.*)$", text, re.M)
    tap.ok(f"make demo: the average critical path has the front end's requests "
           f"({len(steps)} steps 'frontend:{port} ; GET /…')", len(steps) >= 3, text[-3000:])
    tap.ok("make demo: cache-maint is a lock culprit in the contention table",
           re.search(r"^\s+[\d.]+\s+\d+\s+lock\s+cache-maint ", text, re.M) is not None,
           text[-3000:])
    slow = re.findall(rf"^request \S+: frontend:{port} GET /", text, re.M)
    tap.ok(f"make demo: the slowest requests are the front end's ({len(slow)} of 3)",
           len(slow) == 3, text[-3000:])
    tap.ok("make demo: the HTML page is written", os.path.getsize(
        os.path.join(out, "demo.html")) > 1000 if os.path.exists(
        os.path.join(out, "demo.html")) else False, os.listdir(out))

    # the metadata of the start, before any event: the two processes and
    # their listening sockets
    rec = os.path.join(out, "demo.rec")
    d = subprocess.run([CRITPATH, "dump", rec, "--json"], capture_output=True, text=True)
    first_event, start_md = None, {}
    for line in d.stdout.splitlines():
        o = json.loads(line)
        if o["type"] == "process" or (o["type"] == "socket" and o.get("listening")):
            key = (o["type"], o.get("pid"), o.get("lport"))
            start_md.setdefault(key, o["ts_ns"])
        elif "ts_ns" in o and first_event is None and o["type"] not in (
                "thread", "socket", "hook", "probe", "loss"):
            first_event = o["ts_ns"]
    late = {k: t for k, t in start_md.items() if first_event is None or t > first_event}
    tap.ok(f"make demo: the start's metadata ({len(start_md)} process and listening socket "
           f"records) precedes the first event", d.returncode == 0 and len(start_md) >= 4
           and not late, f"first event at {first_event}; after it: {late}; all: {start_md}")
    shutil.rmtree(out, ignore_errors=True)
    tap.done()


if __name__ == "__main__":
    main()
