#!/usr/bin/env python3
# SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
"""A response held back by Nagle's algorithm. Python's http.server writes a
response's headers and its body in two calls; the body, small, waits in the
socket for the ACK of the headers, which the client delays (~40 ms). The
server's path ends at its last write and is short; the client waits ~40 ms.
record notes the bytes a write left unsent (dump: unsent=N) and report warns
that the clients waited past the end of the path, naming the service. The
same server with TCP_NODELAY: no unsent bytes, no warning, no 40 ms."""
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kpathlib as K  # noqa: E402
from tap import BUILD, CRITPATH, Tap  # noqa: E402

SERVER = """
import http.server, socket, socketserver, sys
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def setup(self):
        super().setup()
        if sys.argv[2] == "nodelay":
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    def do_GET(self):
        body = b"ok\\n"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
class S(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
S(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
"""


def run(tap, mode):
    port = K.free_port()
    srv = K.spawn([sys.executable, "-c", SERVER, str(port), mode], stderr=subprocess.DEVNULL)
    K.wait_port(port, srv)
    out = []

    def drive():
        r = subprocess.run([os.path.join(BUILD, "demo", "loadgen"), "--port", str(port), "-c",
                            "2", "-d", "3"], capture_output=True, text=True, timeout=60)
        out.append(r.stdout)
    rep, path = K.record_workload(tap, f"nagle-{mode}", [srv.pid], drive, seconds=8,
                                  extra=["--no-tls"])
    K.stop(srv)
    if rep is None:
        return
    m = re.search(r"RESULT requests=(\d+) errors=(\d+) .* p50_us=(\d+)", out[0] if out else "")
    sent, p50 = (int(m[1]), int(m[3])) if m else (0, 0)
    reqs = K.service_requests(rep, port)
    lat = sorted(q["latency_ns"] for q in reqs)
    med = lat[len(lat) // 2] / 1e6 if lat else 0
    warn = [w for w in rep.get("warnings", []) if "Nagle's algorithm" in w]
    dump = subprocess.run([CRITPATH, "dump", path], capture_output=True, text=True).stdout
    unsent = len(re.findall(rf"lport={port} .* unsent=\d+", dump))
    if mode == "nagle":
        tap.ok(f"nagle: the client waited ~40 ms a request (p50 {p50 / 1e3:.1f} ms), "
               f"the server's paths are short (median {med:.2f} ms)",
               sent > 10 and p50 >= 30000 and reqs and med < 10, f"{out} median {med}")
        tap.ok(f"nagle: dump shows the body writes' unsent bytes ({unsent} writes)",
               unsent >= len(reqs) // 2 > 0, f"{unsent} writes with unsent, {len(reqs)} requests")
        tap.ok("nagle: report warns that the clients waited past the path, naming the "
               "service", len(warn) == 1 and f"python3:{port}" in warn[0],
               rep.get("warnings"))
    else:
        tap.ok(f"nodelay: no 40 ms wait (client p50 {p50 / 1e3:.1f} ms), no unsent bytes "
               f"({unsent}), no warning", sent > 10 and p50 < 20000 and unsent == 0
               and not warn, f"{out} {rep.get('warnings')}")


def main():
    tap = Tap()
    for mode in ("nagle", "nodelay"):
        run(tap, mode)
    K.done(tap)


if __name__ == "__main__":
    main()
