#!/usr/bin/env python3
# SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
"""diff tells change from noise (issue 23): two trace files of one generator
with different seeds flag no step; the same files with one operation made
30% slower in B flag that operation's steps, first; halves of one file
taken with --from/--to +DUR (saved reports) flag none either. No root
needed: trace files and the critpath binary only."""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tap import BUILD, CRITPATH, Tap  # noqa: E402

GEN = os.path.join(BUILD, "bench", "gen_traces")


def gen(path, seed):
    # no clock skew: slower() moves spans by their start times
    subprocess.run([GEN, "--traces", "1500", "--fanout", "3", "--depth", "3", "--skew-us", "0",
                    "--seed", str(seed), "-o", path], check=True)


def diff(a, b, *extra):
    r = subprocess.run([CRITPATH, "diff", a, b, "--format", "json", "--top", "100000", *extra],
                       capture_output=True, text=True, timeout=300)
    try:
        return json.loads(r.stdout)["changes"], r.stderr
    except (ValueError, KeyError):
        return None, f"exit {r.returncode}: {r.stderr[-800:]}"


def slower(path, out, op, factor):
    """Spans of op take factor times as long (their ancestors stretched by
    as much, and what starts after them moved)."""
    with open(path) as f:
        doc = json.load(f)
    for t in doc["data"]:
        spans = {s["spanID"]: s for s in t["spans"]}
        parent = {s["spanID"]: r["spanID"] for s in t["spans"] for r in s["references"]
                  if r["refType"] == "CHILD_OF"}
        for s in sorted(t["spans"], key=lambda s: s["startTime"]):
            if s["operationName"] != op:
                continue
            extra = int(s["duration"] * (factor - 1))
            end = s["startTime"] + s["duration"]
            s["duration"] += extra
            p = parent.get(s["spanID"])
            while p in spans:
                spans[p]["duration"] += extra
                p = parent.get(p)
            for o in t["spans"]:
                if o is not s and o["startTime"] >= end:
                    o["startTime"] += extra
    with open(out, "w") as f:
        json.dump(doc, f)


def main():
    tap = Tap()
    if not tap.ok("critpath and gen_traces are built",
                  os.access(CRITPATH, os.X_OK) and os.access(GEN, os.X_OK)):
        sys.exit(1)
    d = tempfile.mkdtemp(prefix="critpath-diffci-")
    a, b, slow = (os.path.join(d, n) for n in ("a.json", "b.json", "slow.json"))
    gen(a, 1)
    gen(b, 2)
    ch, err = diff(a, b)
    flagged = [c for c in (ch or []) if c.get("significant")]
    tap.ok(f"A/A (two seeds): {len(ch or [])} steps compared, none significant",
           ch is not None and ch and not flagged,
           err or json.dumps(flagged[:3]))
    tap.ok("A/A: every change has its interval",
           ch and all("ci_low_ns" in c and c["ci_low_ns"] <= c["change_ns"] <= c["ci_high_ns"]
                      for c in ch), json.dumps((ch or [])[:2]))
    # a root operation (a third of the traces): its spans 30% longer
    op = "op-0-0"
    slower(b, slow, op, 1.3)
    ch, err = diff(a, slow)
    flagged = [c for c in (ch or []) if c.get("significant")]
    ours = [c for c in flagged if any(op in f for f in c["frames"])]
    tap.ok(f"{op} 30% slower in B: {len(ours)} of its steps significant, listed first",
           ours and ch[0] in flagged and any(op in f for f in ch[0]["frames"]),
           err or json.dumps(ch[:3]))
    # halves of one input by +DUR: the generator's traces start 1 ms apart
    halves = []
    for span in (["--to", "+0.75s"], ["--from", "+0.75s"]):
        out = os.path.join(d, f"half{len(halves)}.json")
        r = subprocess.run([CRITPATH, "report", a, "-q", "--format", "json", "-o", out, *span],
                           capture_output=True, text=True, timeout=300)
        halves.append(out if r.returncode == 0 else None)
    counts = []
    for h in halves:
        with open(h) if h else open(os.devnull) as f:
            counts.append(json.load(f)["summary"]["nrequests"] if h else 0)
    tap.ok(f"--to +0.75s / --from +0.75s: halves of {counts[0]} and {counts[1]} requests",
           all(h for h in halves) and 600 < counts[0] < 900 and counts[0] + counts[1] >= 1500,
           str(counts))
    ch, err = diff(*halves) if all(halves) else (None, "no halves")
    flagged = [c for c in (ch or []) if c.get("significant")]
    tap.ok("halves of one file (saved reports): none significant", ch is not None and not flagged,
           err or json.dumps(flagged[:3]))
    subprocess.run(["rm", "-rf", d])
    print(f"1..{tap.n}")
    sys.exit(1 if tap.failed else 0)


if __name__ == "__main__":
    main()
