#!/usr/bin/env python3
# SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
"""`critpath agent` against the demo's front end and key-value store (HTTP/1.1,
a worker pool, a "cache-maint" thread that holds the cache lock for ~15 ms
every 200 ms), exporting OTLP to a receiver that decodes with the
OpenTelemetry JS packages' own protobuf code (tests/agent/receiver.js) and
refuses its first 3 s of exports (503, Retry-After: 1).

Load: the demo's loadgen (no trace context) on the front end, and an
application instrumented with the OpenTelemetry JS SDK and its HTTP
instrumentation (tests/agent/client.js), whose requests carry a sampled
traceparent, on the front end and on a copy of it started after the agent
and picked up by --comm. The agent runs with --slow 8ms --sample 0.

Checked: every SDK client span has exactly one SERVER span from the agent,
in its trace and its child; the SERVER spans carry the HTTP semantic
conventions (url.path the path as sent) and critpath.*_ns that sum to their
duration; no request without trace context that took less than --slow is
exported; the slow ones spent their time on the cache lock (lock_ns at most
the built hold) with cache-maint named; the late process is followed;
nothing is lost beyond what the agent counts (the receiver's SERVER spans
are the agent's sent ones, after retries); SIGTERM ends the agent within 5 s;
the profile windows are read by `critpath diff`; a flight recording is read
by `critpath report`; no sanitizer report on any critpath's stderr.

tests/run.sh runs it twice: the second time (asan-int/) with build/asan's
critpath (CRITPATH_BIN), ASan and UBSan stopping at their first finding and
LeakSanitizer at exit. Its timings hold for that 2-3x slower agent as they
are: the times checked are the kernel's, and the sanitized analysis keeps
up with this load (under 10% of a core) with seconds to spare before the
SIGTERM (measured with two busy loops beside it: exit 0.7 s after it)."""
import glob
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kpathlib as K  # noqa: E402
from tap import BUILD, CRITPATH, Tap, sanitizer_report  # noqa: E402

DEMO = os.path.join(BUILD, "demo")
AGENT_JS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "agent")
SLOW_MS, HOLD_MS, REFUSE_S = 8, 15, 3
SDK_FRONT, SDK_LATE = 40, 10


def node(script, *args, **kw):
    return K.spawn(["node", os.path.join(AGENT_JS, script), *map(str, args)], **kw)


def client(url, n):
    r = subprocess.run(["node", os.path.join(AGENT_JS, "client.js"), url, str(n), "2"],
                       capture_output=True, text=True, timeout=120)
    if r.returncode:
        raise RuntimeError(f"client.js: exit {r.returncode}: {r.stderr[-500:]}")
    return [json.loads(x) for x in r.stdout.splitlines() if x.startswith("{")]


def wait_text(path, text, proc, timeout=30):
    deadline = time.time() + timeout
    while time.time() < deadline:
        with open(path) as f:
            if text in f.read():
                return True
        if proc.poll() is not None:
            return False
        time.sleep(0.1)
    return False


def attr_sum(a):
    return sum(a.get(f"critpath.{c}_ns", 0) for c in
               ("cpu", "runqueue", "lock", "network", "disk", "sleep", "unexplained"))


def main():
    tap = Tap()
    if not tap.ok("critpath, the demo and tests/agent's npm packages are there",
                  os.access(CRITPATH, os.X_OK) and os.access(os.path.join(DEMO, "frontend"),
                                                             os.X_OK)
                  and os.path.isdir(os.path.join(AGENT_JS, "node_modules", "@opentelemetry")),
                  "run 'make deps' (npm ci in tests/agent) and 'make'"):
        K.done(tap)
    d = K.workdir("agent")
    spans_path, stats_path = os.path.join(d, "spans.jsonl"), os.path.join(d, "stats.json")
    out_dir, flight_dir = os.path.join(d, "profiles"), os.path.join(d, "flight")
    rport, port, kv_port, late_port = (K.free_port() for _ in range(4))

    recv = node("receiver.js", rport, spans_path, stats_path, REFUSE_S, stdout=subprocess.PIPE,
                text=True)
    ready = recv.stdout.readline()
    kv = K.spawn([os.path.join(DEMO, "kvstore"), "--port", str(kv_port)],
                 stderr=subprocess.DEVNULL)
    K.wait_port(kv_port, kv)
    front = K.spawn([os.path.join(DEMO, "frontend"), "--port", str(port), "--kv-port",
                     str(kv_port), "--workers", "4", "--maint-period-ms", "200",
                     "--maint-hold-ms", str(HOLD_MS)], stderr=subprocess.DEVNULL)
    K.wait_port(port, front)
    late_bin = os.path.join(d, "latefront")
    shutil.copy(os.path.join(DEMO, "frontend"), late_bin)

    err_path = os.path.join(d, "agent.stderr")
    err = open(err_path, "w")
    agent = K.spawn([CRITPATH, "agent", "-p", f"{front.pid},{kv.pid}", "--comm", "latefront",
                     "--otlp", f"http://127.0.0.1:{rport}/v1/traces", "--slow", f"{SLOW_MS}ms",
                     "--sample", "0", "--out", out_dir, "--profile-every", "3s",
                     "--flight", flight_dir, "--status-every", "2s", "-d", "120"],
                    stderr=err, stdout=err)
    attached = wait_text(err_path, "critpath agent: following", agent)
    tap.ok("the agent starts and attaches", attached and ready.startswith("READY"),
           open(err_path).read()[-2000:])
    if not attached:
        K.done(tap)
    t0 = time.time()
    late = K.spawn([late_bin, "--port", str(late_port), "--kv-port", str(kv_port), "--workers",
                    "2"], stderr=subprocess.DEVNULL)
    K.wait_port(late_port, late)
    time.sleep(1.0)  # the late process's exec seen, its target set

    results = {}

    def loadgen():
        results["loadgen"] = K.run_counted(
            [os.path.join(DEMO, "loadgen"), "--port", str(port), "-c", "2", "-d", "7",
             "--think-ms", "3"], r"RESULT requests=(\d+)", timeout=60)

    def sdk_front():
        results["front"] = client(f"http://127.0.0.1:{port}/item/{{i}}?from=sdk", SDK_FRONT)

    def sdk_late():
        time.sleep(1.0)
        results["late"] = client(f"http://127.0.0.1:{late_port}/item/{{i}}", SDK_LATE)

    try:
        K.in_parallel([loadgen, sdk_front, sdk_late])
        errors = ""
    except RuntimeError as ex:
        errors = str(ex)
    tap.ok("the load ran (loadgen and the OpenTelemetry SDK client)", not errors, errors)
    if errors:
        K.done(tap)
    time.sleep(REFUSE_S + 2)  # past the refusals (begun at the first export), and a retry
    t_stop = time.time()
    agent.send_signal(signal.SIGTERM)
    try:
        rc = agent.wait(timeout=30)
    except subprocess.TimeoutExpired:
        rc = None
    took = time.time() - t_stop
    err.close()
    text = open(err_path).read()
    tap.ok(f"SIGTERM: the agent exits 0 within 5 s (took {took:.1f} s)",
           rc == 0 and took <= 5.0, text[-2000:])
    tap.ok("no sanitizer report on the agent's stderr", not sanitizer_report(text),
           sanitizer_report(text))
    K.stop(recv)
    stats = json.load(open(stats_path)) if os.path.exists(stats_path) else {}
    spans = [json.loads(x) for x in open(spans_path)] if os.path.exists(spans_path) else []
    servers = [s for s in spans if s["kind"] == 2]

    # (a) the SDK's client spans each have one SERVER span as their child
    by_parent = {}
    for s in servers:
        by_parent.setdefault((s["traceId"], s["parentSpanId"]), []).append(s)
    for what, calls in (("front end", results["front"]), ("late process", results["late"])):
        n1 = sum(len(by_parent.get((c["traceId"], c["spanId"]), [])) == 1 for c in calls)
        tap.ok(f"{what}: each of the {len(calls)} SDK client spans has exactly one SERVER "
               f"span, in its trace and its child ({n1})", calls and n1 == len(calls),
               f"server spans {len(servers)}; calls {calls[:3]}")
    # (it names its threads "frontend": the exec's file name made it a match)
    late_spans = [s for s in servers if s["attributes"].get("server.port") == late_port
                  and s["resource"].get("process.pid") == late.pid]
    tap.ok(f"--comm latefront: the process started after the agent is followed "
           f"({len(late_spans)} spans)", len(late_spans) >= SDK_LATE, text[-1500:])

    # (b) semantic conventions and the path's categories
    opted = [s for s in servers if s["parentSpanId"]]
    bad = []
    for s in opted:
        a = s["attributes"]
        dur = int(s["end"]) - int(s["start"])
        if (a.get("http.request.method") != "GET" or not str(a.get("url.path", "")).startswith(
                "/item/") or a.get("http.response.status_code") != 200
                or a.get("http.route") != "/item/{n}" or s["name"] != "GET /item/{n}"
                or abs(attr_sum(a) - dur) > max(1000, dur // 100)):
            bad.append((s["name"], dur, a))
    tap.ok(f"{len(opted)} opted-in SERVER spans: method, url.path, route, status, and "
           "critpath.*_ns summing to the duration", opted and not bad, bad[:3])
    front_opted = [s for s in opted if s["attributes"].get("server.port") == port]
    tap.ok("url.query is the query as sent; resource names the process",
           front_opted and all(s["attributes"].get("url.query") == "from=sdk"
                               and s["resource"].get("process.pid") == front.pid
                               and s["resource"].get("host.name") for s in front_opted),
           front_opted[:1])

    # (c) --sample 0: a request without trace context is exported only when slow
    plain = [s for s in servers if not s["parentSpanId"]]
    fast = [s for s in plain if int(s["end"]) - int(s["start"]) < SLOW_MS * K.MS]
    tap.ok(f"no request without trace context faster than {SLOW_MS} ms is exported "
           f"({len(plain)} exported of {results['loadgen']} loadgen requests)",
           not fast and len(plain) < results["loadgen"] // 5,
           [(s["name"], int(s["end"]) - int(s["start"])) for s in fast[:5]])

    # (d) the slow ones: the cache lock, its holder named
    locked = [s for s in plain if s["attributes"].get("critpath.lock_ns", 0) >= 5 * K.MS]
    named = [s for s in locked if any(str(c).startswith("cache-maint ")
                                      for c in s["attributes"].get("critpath.culprits", []))]
    over = [s for s in locked if s["attributes"]["critpath.lock_ns"] > HOLD_MS * 1.5 * K.MS]
    tap.ok(f"slow requests waited on the cache lock ({len(locked)} with >= 5 ms), never "
           f"longer than the {HOLD_MS} ms hold, cache-maint named ({len(named)})",
           locked and not over and len(named) >= 0.9 * len(locked),
           [(s["attributes"].get("critpath.lock_ns"), s["attributes"].get("critpath.culprits"))
            for s in (over or locked)[:5]])
    kids = [s for s in spans if s["kind"] == 3 and s["attributes"].get("critpath.comm")]
    tap.ok(f"CLIENT spans for the path's stretches in kvstore ({len(kids)})",
           any(s["attributes"]["critpath.comm"] == "kvstore" for s in kids), kids[:2])

    # (f) nothing lost beyond what is counted
    m = re.search(r"export: (\d+) sent in \d+ batches, (\d+) dropped .*?, (\d+) failed "
                  r"\(refused\), (\d+) retries", text)
    e = re.search(r"total: (\d+) requests .*?, (\d+) exported", text)
    ok = bool(m and e)
    if ok:
        sent, dropped, failed, retries = map(int, m.groups())
        exported = int(e.group(2))
        ok = (sent + dropped + failed == exported and len(servers) == sent
              and stats.get("refused", 0) >= 1 and retries >= 1 and stats.get("bad", 1) == 0
              and stats.get("gzip", 0) == stats.get("accepted", -1))
    tap.ok("the receiver refused at first; every exported request was sent or counted as "
           "dropped or failed, and the receiver decoded each one sent once (gzip)",
           ok, f"{stats} servers={len(servers)}\n{text[-1500:]}")

    # (g) profile windows and (h) the flight recording
    profiles = sorted(p for p in glob.glob(os.path.join(out_dir, "profile-*.json"))
                      if not p.endswith(".counts.json"))
    counts = sorted(glob.glob(os.path.join(out_dir, "profile-*.counts.json")))
    r = subprocess.run([CRITPATH, "diff", profiles[0], profiles[-1]], capture_output=True,
                       text=True) if len(profiles) >= 2 else None
    tap.ok(f"{len(profiles)} profile windows; critpath diff reads two of them",
           r is not None and r.returncode == 0, r.stderr[-800:] if r else profiles)
    windows = [json.load(open(c)) for c in counts]
    total = sum(w["requests"] for w in windows)
    by_name = sum(x["requests"] for w in windows for x in w["names"])
    e = re.search(r"total: (\d+) requests", text)
    tap.ok(f"the windows' counts hold every request ({total})",
           e and total == by_name == int(e.group(1)) and total >= results["loadgen"], counts)
    # each window's profile is the sample its counts say, at the rate asked
    sampled = [json.load(open(c[:-len(".counts.json")] + ".json"))["summary"]["nrequests"]
               for c in counts]
    tap.ok("each window's profile holds the requests its counts say were sampled "
           f"({sum(sampled)} at --profile-sample {windows[0]['profile_sample_rate'] if windows else '?'})",
           windows and all(w["profiled"] == n for w, n in zip(windows, sampled))
           and all(w["profile_sample_rate"] == 0.01 for w in windows)
           and all(w["start"] <= w["end"] for w in windows),
           [(w["profiled"], n) for w, n in zip(windows, sampled)])
    flights = sorted(glob.glob(os.path.join(flight_dir, "flight-*.rec")))
    rep = subprocess.run([CRITPATH, "report", flights[0], "--format", "json", "-q"],
                         capture_output=True, text=True) if flights else None
    n = len(json.loads(rep.stdout).get("requests", [])) if rep and rep.returncode == 0 else 0
    tap.ok(f"a flight recording of a slow request, read by critpath report ({n} requests)",
           n >= 1, rep.stderr[-800:] if rep else "no flight recording")
    found = "\n".join(sanitizer_report(x.stderr) for x in (r, rep) if x)
    tap.ok("no sanitizer report from critpath diff and report", not found.strip(), found)
    K.done(tap)


if __name__ == "__main__":
    main()
