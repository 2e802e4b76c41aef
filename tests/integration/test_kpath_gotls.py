#!/usr/bin/env python3
# SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
"""Go's crypto/tls: a Go HTTPS server (net/http, HTTP/2 and HTTP/1.1 by
ALPN) has its TLS in the executable, no libssl and no OpenSSL symbol. The
recorder finds crypto/tls.(*Conn).Read and Write in its symbol table and
Read's RET instructions in its code (uprobes there, not uretprobes, which
Go's stack copying would break), and records their plaintext keyed by
goroutine; the report gives each read the connection its library
connection was seen on (Go resumes a goroutine on any thread), and each
write to the socket write that carries it.

  h2      h2load, 4 connections of 4 streams: every stream named and 200
  http/1  h2load --h1, 4 keep-alive connections (one request at a time:
          pipelined ones past the payload prefix are not seen, as in the
          clear): every request the same
  churn   one-request connections, HTTP/1.1 and HTTP/2 in turn, one after
          another: Go gives a closed connection's *tls.Conn memory to the
          next; every request still named and 200, and the close_notify
          alerts the two ends trade as a connection closes are no request
Then the same server built with -ldflags=-s (no symbol table): the
recording says why it has no plaintext, and records the rest.
"""
import json
import os
import re
import shutil
import socket
import ssl
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kpathlib as K  # noqa: E402
from tap import CRITPATH, Tap  # noqa: E402

SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "workloads", "kp_gotls.go")
N = 400
CHURN = 20


def h2load(port, extra, got, n=N):
    """A drive(): h2load, n requests over 4 connections (extra: more
    options), half of each path; the count it completed into got."""
    def drive():
        r = subprocess.run(["h2load", "-n", str(n), "-c", "4"] + extra +
                           [f"https://127.0.0.1:{port}/index.html",
                            f"https://127.0.0.1:{port}/big.txt"],
                           capture_output=True, text=True, timeout=120)
        m = re.search(r"requests: \d+ total, \d+ started, \d+ done, (\d+) succeeded", r.stdout)
        if r.returncode != 0 or not m:
            raise RuntimeError(f"h2load: exit {r.returncode}: {r.stdout[-500:]}")
        got.append(int(m.group(1)))
    return drive


def https1_get(port, path):
    """One HTTP/1.1 request on a connection of its own; the status."""
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.set_alpn_protocols(["http/1.1"])
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        with ctx.wrap_socket(raw, server_hostname="localhost") as s:
            s.sendall(f"GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
                      .encode())
            data = b""
            while True:
                b = s.recv(4096)
                if not b:
                    break
                data += b
    return int(data.split(b" ", 2)[1]) if data.startswith(b"HTTP/1.1 ") else 0


def churn(port, got):
    def drive():
        ok = 0
        for i in range(CHURN):
            ok += https1_get(port, f"/one/{i}") == 200
            r = subprocess.run(["h2load", "-n", "1", "-c", "1",
                                f"https://127.0.0.1:{port}/two/{i}"],
                               capture_output=True, text=True, timeout=60)
            ok += bool(re.search(r"requests: 1 total, 1 started, 1 done, 1 succeeded", r.stdout))
        got.append(ok)
    return drive


def tls_warnings(rep):
    return [w for w in rep.get("warnings") or [] if "TLS" in w or "HTTP/2" in w]


def case(tap, tag, pid, port, drive, got, want):
    """Records pid while drive() runs; every request other than handshakes
    found (want: their names and counts), tiled and tagged 200, no warning
    of TLS or HTTP/2. Returns the recording's path and those requests."""
    rep, path = K.record_workload(tap, "gotls_" + tag.replace("/", ""), [pid], drive, seconds=8)
    if rep is None:
        return None, []
    K.check_tiling(tap, f"gotls {tag}", rep.get("requests", []))
    reqs = [q for q in K.service_requests(rep, port) if q["name"] != "TLS handshake"]
    names = {}
    for q in reqs:
        names[q["name"]] = names.get(q["name"], 0) + 1
    tap.ok(f"gotls {tag}: {len(reqs)} requests found, named {want}; the client completed "
           f"{got[0] if got else 0}", names == want and got and got[0] == sum(want.values()),
           f"names {names}; warnings {rep.get('warnings')}; recording {path}")
    tagged, err = K.report_json(path, ["--tag", "http.status=200"])
    ok = [q for q in K.service_requests(tagged or {}, port) if q["name"] != "TLS handshake"]
    tap.ok(f"gotls {tag}: {len(ok)} of {len(reqs)} with status 200 (from the plaintext of "
           f"crypto/tls.(*Conn).Write), no TLS or HTTP/2 warning",
           reqs and len(ok) == len(reqs) and not tls_warnings(rep),
           f"warnings {rep.get('warnings')}; {err}; recording {path}")
    return path, reqs


def stripped_case(tap, kc):
    """A Go executable without its symbol table: one line and a hook record
    say why its TLS is not captured; its connections are still recorded."""
    binary = K.go_build(tap, "gotls_stripped", SRC, ["-ldflags=-s -w"])
    if not binary:
        return
    server, f = K.start_ready([binary, "0", kc[1], kc[0]])
    got = []
    try:
        rep, path = K.record_workload(tap, "gotls_stripped", [f["pid"]],
                                      h2load(f["port"], ["--h1"], got, n=40), seconds=6)
    finally:
        K.stop(server)
    if rep is None:
        return
    r = subprocess.run([CRITPATH, "dump", path, "--json"], capture_output=True, text=True,
                       timeout=120)
    hooks = [ln for ln in r.stdout.splitlines() if f"tls pid {f['pid']}" in ln]
    tap.ok("gotls stripped: the recording says its TLS has no plaintext, and why",
           hooks and '"unavailable"' in hooks[0] and "symbol table" in hooks[0], f"{hooks}")
    reqs = K.service_requests(rep, f["port"])
    tap.ok(f"gotls stripped: its connections still recorded ({len(reqs)} exchanges)",
           len(reqs) >= 40 and got and got[0] == 40, f"got {got}")


def main():
    tap = Tap()
    if not shutil.which("go"):
        tap.skip("gotls", "go not installed (apt-get install golang-go)")
        K.done(tap)
    if not shutil.which("h2load"):
        tap.skip("gotls", "h2load not installed (apt-get install nghttp2-client)")
        K.done(tap)
    if not tap.ok("critpath is built", os.access(CRITPATH, os.X_OK), f"{CRITPATH} missing"):
        K.done(tap)
    binary = K.go_build(tap, "gotls", SRC)
    kc = K.tls_cert(K.workdir("gotls_cert"))
    if not binary or not tap.ok("gotls: a certificate", kc is not None):
        K.done(tap)
    server, f = K.start_ready([binary, "0", kc[1], kc[0]])
    pid, port = f["pid"], f["port"]
    try:
        got = []
        path, _ = case(tap, "h2", pid, port, h2load(port, ["-m", "4"], got), got,
                    {"GET /index.html": N // 2, "GET /big.txt": N // 2})
        if path:
            r = subprocess.run([CRITPATH, "dump", path, "--json"], capture_output=True,
                               text=True, timeout=120)
            hooks = [ln for ln in r.stdout.splitlines()
                     if '"type":"hook"' in ln.replace(" ", "") and f"tls pid {pid}" in ln]
            tap.ok("gotls: the recording says the probes are on Go's crypto/tls",
                   hooks and "crypto/tls" in hooks[0] and '"attached"' in hooks[0],
                   f"{hooks}")
            # Read's return is probed at its one call of runtime.memmove
            # (emulated), not at its RETs (single-stepped, 11 us each)
            tap.ok("gotls: Read is probed at its copy of the plaintext, no RET stepped",
                   hooks and "stepped" not in hooks[0], f"{hooks}")
            # the connections' ciphertext: a record header's 5 bytes each,
            # not the random bytes after it (bpf/sock_record.bpf.h)
            cipher = [json.loads(ln) for ln in r.stdout.splitlines()
                      if '"sock"' in ln and r'"payload":"\u0017\u0003' in ln.replace(" ", "")]
            long = [c for c in cipher if len(c.get("payload", "")) > 5]
            tap.ok(f"gotls: the ciphertext's socket records keep its records' headers only "
                   f"({len(cipher)} of them)", cipher and not long, f"{long[:3]}")
            calls = set(re.findall(r'"call":\s*"(crypto/tls[^"]*)"', r.stdout))
            tap.ok(f"gotls: dump names the calls recorded {sorted(calls)}",
                   calls == {"crypto/tls.(*Conn).Read", "crypto/tls.(*Conn).Write"}, "")
        got = []
        case(tap, "http/1", pid, port, h2load(port, ["--h1"], got), got,
             {"GET /index.html": N // 2, "GET /big.txt": N // 2})
        got = []
        _, reqs = case(tap, "churn", pid, port, churn(port, got), got,
                       {"GET /one/{n}": CHURN, "GET /two/{n}": CHURN})
        # Python's client sends its request after the handshake, held by
        # Nagle's algorithm until the server's delayed ACK (~40 ms): the
        # request begins when its bytes came, not with the handshake's
        # last flight
        one = sorted(q["end_ns"] - q["start_ns"] for q in reqs if q["name"] == "GET /one/{n}")
        tap.ok(f"gotls churn: the HTTP/1.1 requests' median latency "
               f"{K.fmt_ms(one[len(one) // 2] if one else 0)}, well under the client's 40 ms "
               "wait after its handshake", one and one[len(one) // 2] < 20 * K.MS, f"{one}")
    finally:
        K.stop(server)
    stripped_case(tap, kc)
    K.done(tap)


if __name__ == "__main__":
    main()
