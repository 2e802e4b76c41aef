#!/usr/bin/env python3
# SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
"""record --probe: user-named functions as subcomponents of the critical path
(DESIGN.md section 5). kp_server --mode probe serves each request in
probe_parse (3 ms of CPU), then probe_render (1 ms, probe_format 4 ms, 1 ms):
recorded with the three probed, each request's path has 3 ms under
[service, request, probe_parse], 2 ms under [.., probe_render] and 4 ms under
[.., probe_render, probe_format]; the recording holds one enter and one exit
per call, on the request thread, properly nested. Also: a probe given with
its binary (a shared library), a launched command (`-- CMD`) probed before it
execs, where the uprobes go (an emulated instruction, or the entry stepped;
a build with endbr64 too), and the errors for a function that is nowhere,
a function of a Go executable (refused: a uretprobe would crash it) and a
malformed spec."""
import os
import signal
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kpathlib as K  # noqa: E402
import reclib as R  # noqa: E402
from tap import CRITPATH, WORKLOADS, Tap  # noqa: E402

N = 20
MS = K.MS
SERVER = os.path.join(WORKLOADS, "kp_server")
PROBES = ["probe_parse", "probe_render", "probe_format"]


def close(value_ns, expect_ms):
    """CPU spun in CPU time: within 15% or 0.5 ms, whichever is wider."""
    return abs(value_ns - expect_ms * MS) <= max(0.15 * expect_ms, 0.5) * MS


def frame_ns(req, tail, category="cpu"):
    """Time on req's path whose frames end with tail (after the request name)."""
    return sum(K.dur(g) for g in req.get("critical_path") or []
               if g.get("category") == category and g.get("frames", [])[2:] == tail)


def check_nesting(tap, dump, tid, ids):
    """Enter/exit pairs of the probe ids on tid, nested like the calls."""
    evs = [r for r in dump.of("uprobe") if r.get("tid") == tid]
    stack, bad = [], None
    for r in evs:
        if r.get("phase") == "enter":
            stack.append(r.get("probe_id"))
        elif not stack or stack.pop() != r.get("probe_id"):
            bad = r
            break
    counts = {i: sum(1 for r in evs if r.get("probe_id") == i and r.get("phase") == "enter")
              for i in ids.values()}
    tap.ok(f"probe: each request's calls recorded on the request thread, nested "
           f"(enters per probe {counts}, {N} requests)",
           bad is None and not stack and all(N - 1 <= c <= N for c in counts.values())
           and len(evs) == 2 * sum(counts.values()),
           f"first out of order: {bad}, left open: {stack}, {len(evs)} records")


def first_insns(binary, sym, n=3):
    """The mnemonics of sym's first n instructions in binary (objdump)."""
    out = subprocess.run(["objdump", "-d", "--no-show-raw-insn", binary],
                         capture_output=True, text=True).stdout
    body = out.split(f"<{sym}>:\n", 1)[1].split("\n\n", 1)[0] if f"<{sym}>:\n" in out else ""
    return [ln.split("\t")[1].split()[0] for ln in body.splitlines()[:n] if ln.count("\t") >= 1]


def expect_stepped(details, binary):
    """Each probe's hook detail says "(stepped)" where its code says so: a
    tail jump after a load (gcc -O2's probe_parse and probe_format) is
    probed at the jump, a sub from the stack pointer first (probe_render)
    leaves the entry, single-stepped. Code of other shapes (another
    compiler) is not judged."""
    if not details or not all(d.startswith("uprobe+uretprobe") for d in details.values()):
        return False
    for sym, d in details.items():
        code = [m for m in first_insns(binary, sym) if m != "endbr64"]
        if code[:2] == ["movsd", "jmp"] and "(stepped)" in d:
            return False
        if code[:1] == ["sub"] and "(stepped)" not in d:
            return False
    return True


def served(tap, name, argv_record):
    """Runs a recording whose stdout is the launched kp_server's."""
    p = subprocess.Popen(argv_record, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         stdin=subprocess.DEVNULL, text=True)
    line = p.stdout.readline()
    try:
        fields = dict(kv.split("=", 1) for kv in line.split()[1:])
        K.run_client(int(fields["port"]), 5)
    except (KeyError, ValueError, RuntimeError) as e:
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=60)
        tap.ok(f"{name}: the launched server answered", False, f"{line!r} {e} {err[-800:]}")
        return None, None
    time.sleep(0.2)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=60)
    return p.returncode, err


def main():
    tap = Tap()
    if not tap.ok("critpath is built", os.access(CRITPATH, os.X_OK), f"{CRITPATH} missing"):
        K.done(tap)
    server, sf = K.start_ready([SERVER, "--mode", "probe"])
    port, a1 = sf["port"], sf["A1"]
    extra = [a for p in PROBES for a in ("--probe", p)]
    rep, path = K.record_workload(tap, "probe", [sf["pid"]], lambda: K.run_client(port, N),
                                  seconds=6, extra=extra)
    if rep is None:
        K.stop(server)
        K.done(tap)
    reqs = K.service_requests(rep, port)
    K.check_tiling(tap, "probe", rep.get("requests", []))
    tap.ok(f"probe: {len(reqs)} requests of kp_server:{port} found, {N} sent",
           N - 1 <= len(reqs) <= N, f"recording {path}")
    if not reqs:
        K.stop(server)
        K.done(tap)
    mid = sorted(reqs, key=lambda q: q["latency_ns"])[len(reqs) // 2]
    for tail, ms in ((["probe_parse"], 3), (["probe_render"], 2),
                     (["probe_render", "probe_format"], 4)):
        v = statistics.median(frame_ns(q, tail) for q in reqs)
        tap.ok(f"probe: CPU under {' ; '.join(tail)} {K.fmt_ms(v)} per request, expected "
               f"~{ms} ms", close(v, ms), K.describe(mid))
    rest = statistics.median(frame_ns(q, []) for q in reqs)
    tap.ok(f"probe: CPU outside the probed calls {K.fmt_ms(rest)} per request (reading and "
           f"replying only)", rest < 1 * MS, K.describe(mid))
    prof = {tuple(p.get("frames", [])[2:]): p for p in rep.get("profile") or []
            if p.get("category") == "cpu" and p.get("frames", [""])[0].endswith(f":{port}")}
    tap.ok("probe: the profile aggregates the nested frames",
           ("probe_render", "probe_format") in prof and ("probe_parse",) in prof
           and close(prof[("probe_render", "probe_format")].get("per_request_ns", 0), 4),
           f"profile stacks: {sorted(prof)}")

    dump = R.Dump(path)
    tap.ok("probe: dump --json reads the recording", dump.ok(), dump.problem())
    ids = {r.get("symbol"): r.get("probe_id") for r in dump.of("probe")}
    tap.ok("probe: one probe record per function, naming the server's executable",
           sorted(ids) == sorted(PROBES) and len(set(ids.values())) == 3
           and all(r.get("binary") == os.path.realpath(SERVER) for r in dump.of("probe")),
           f"{dump.of('probe')}")
    hooks = [r.get("name") for r in dump.of("hook") if str(r.get("name")).startswith("probe ")]
    tap.ok("probe: the hook list says which probes were attached",
           sorted(hooks) == sorted(f"probe {p}" for p in PROBES), f"{hooks}")
    check_nesting(tap, dump, a1, ids)
    # where the uprobes went (user/record/tls_at.c): probe_parse and
    # probe_format begin with a load into xmm0 and a tail jump, probed at
    # the jump (emulated); probe_render with sub $8,%rsp, single-stepped
    details = {str(r.get("name"))[6:]: str(r.get("detail")) for r in dump.of("hook")
               if str(r.get("name")).startswith("probe ")}
    tap.ok("probe: the hook records say which probes are single-stepped (probe_render's "
           "sub, not the others' tail jumps)", expect_stepped(details, SERVER),
           f"{details}")

    # a library function, named with its binary: kp_server's replies go
    # through libc's write()
    lib = os.path.join(K.workdir("probe"), "lib.rec")
    rec = K.Recording([sf["pid"]], 4, lib, ["--probe", "libc.so.6:write"])
    err = rec.wait_attached()
    if not err:
        K.run_client(port, 5)
    rc, text = rec.finish()
    d = R.Dump(lib)
    writes = [r for r in d.of("uprobe") if r.get("tid") == a1 and r.get("phase") == "enter"]
    tap.ok(f"probe: libc.so.6:write is probed in the target ({len(writes)} calls for 5 "
           f"requests)", err is None and rc == 0 and d.ok() and len(writes) >= 5,
           f"{err} exit {rc} {text[-800:]}")
    K.stop(server)

    # a launched command is probed in the program it execs
    launched = os.path.join(K.workdir("probe"), "launched.rec")
    rc, err = served(tap, "probe --", [CRITPATH, "record", "-o", launched, "--probe",
                                        "probe_parse", "--", SERVER, "--mode", "probe"])
    if rc is not None:
        d = R.Dump(launched)
        calls = [r for r in d.of("uprobe") if r.get("phase") == "enter"]
        tap.ok(f"probe: -- CMD: probe_parse recorded in the launched server ({len(calls)} "
               f"calls for 5 requests)", rc == 0 and d.ok() and len(calls) == 5,
               f"exit {rc}: {err[-800:]}")

    # built with endbr64 first (-fcf-protection, Ubuntu's and Fedora's
    # default): probe_parse is probed past it and its load, at the jump
    cet = os.path.join(K.workdir("probe"), "cet.rec")
    rc, err = served(tap, "probe cet", [CRITPATH, "record", "-o", cet, "--probe", "probe_parse",
                                         "--probe", "probe_render", "--",
                                         SERVER + "_cet", "--mode", "probe"])
    if rc is not None:
        d = R.Dump(cet)
        calls = [r for r in d.of("uprobe") if r.get("phase") == "enter"]
        details = {str(r.get("name"))[6:]: str(r.get("detail")) for r in d.of("hook")
                   if str(r.get("name")).startswith("probe ")}
        tap.ok(f"probe: a build with endbr64: each call seen once ({len(calls)} enters for 2 "
               f"probes and 5 requests), probe_parse past endbr64, probe_render stepped",
               rc == 0 and d.ok() and len(calls) == 10
               and len(d.of("uprobe")) == 2 * len(calls)
               and expect_stepped(details, SERVER + "_cet"),
               f"exit {rc}: {details} {err[-800:]}")
        said = [ln for ln in err.splitlines() if "single-stepped" in ln]
        tap.ok("probe: record says which probe is single-stepped (probe_render), once",
               ("(stepped)" not in details.get("probe_render", "(stepped)")
                or (len(said) == 1 and "--probe probe_render:" in said[0])),
               f"{said} {details}")

    # errors: a function nowhere (exit 1, naming it and where it looked), a
    # malformed spec (usage: exit 2)
    server, sf = K.start_ready([SERVER, "--mode", "probe"])
    r = R.run_record(["-p", sf["pid"], "-d", "2", "-o", os.path.join(K.workdir("probe"), "x.rec"),
                      "--probe", "no_such_function_here"])
    missing = R.run_record(["-p", sf["pid"], "-d", "2", "--probe", "/nonexistent/bin:probe_parse",
                            "-o", os.path.join(K.workdir("probe"), "y.rec")])
    K.stop(server)
    tap.ok("probe: a binary that does not exist: exit 1, one line saying so",
           missing.rc == 1 and "/nonexistent/bin: No such file or directory" in missing.err
           and len(missing.err.strip().splitlines()) == 1, missing.describe())
    tap.ok("probe: a function in no target's executable: exit 1, one line naming it and "
           "the executable", r.rc == 1 and "no_such_function_here" in r.err
           and os.path.realpath(SERVER) in r.err and len(r.err.strip().splitlines()) == 1,
           f"exit {r.rc}: {r.err[-800:]}")
    # a Go executable's functions: a uretprobe would crash it (its runtime
    # reads the return addresses on a goroutine's stack), so none is put
    gosrc = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "workloads",
                         "kp_goserver.go")
    goserver = K.go_build(tap, "probe_go", gosrc)
    if goserver:
        backend, bf = K.start_ready([os.path.join(WORKLOADS, "kp_backend")])
        gs, gf = K.start_ready([goserver, str(bf["port"])])
        r = R.run_record(["-p", gf["pid"], "-d", "2", "--probe", "main.handler",
                          "-o", os.path.join(K.workdir("probe"), "go.rec")])
        alive = gs.poll() is None
        K.stop(gs)
        K.stop(backend)
        why = [ln for ln in r.err.splitlines() if "is a Go executable" in ln]
        tap.ok("probe: a Go executable's function is refused (exit 1, a line saying why), "
               "the Go process unharmed",
               r.rc == 1 and len(why) == 1 and "main.handler" in why[0] and alive,
               f"exit {r.rc}: {r.err[-800:]}, server alive: {alive}")

    r = R.run_record(["-p", "1", "-d", "1", "--probe", "kp_server:"])
    tap.ok("probe: a spec without a function is a usage error (exit 2)",
           r.rc == 2 and "--probe 'kp_server:'" in r.err, f"exit {r.rc}: {r.err[-500:]}")
    K.done(tap)


if __name__ == "__main__":
    main()
