#!/usr/bin/env python3
# SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
"""Node.js: one event loop, requests that wait on each other. Each request
burns 0.2 ms of CPU, sets a 1 ms timer, and in its callback burns 0.3 ms and
replies; wrk keeps 8 connections busy, so a request waits while the loop
runs the other seven's work (~3.5 ms). Traced by PID, the request's own cpu
is its 0.5 ms and the rest is `(other requests)`: interference (README,
event loops), not the request's own work as the serving thread's time was
counted before.

Then Node.js over HTTPS: its OpenSSL is linked into the node executable
(Debian's exports SSL_read and SSL_write from it) and runs on memory
buffers, the event loop reading the socket itself and handing the
ciphertext to SSL_read. The recorder attaches its TLS probes to the
executable; each plaintext, recorded without a connection, names the
request of its thread's last socket read."""
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kpathlib as K  # noqa: E402
import reclib as R  # noqa: E402
from tap import CRITPATH, Tap  # noqa: E402

SERVER = r"""
const http = require('http');
function burn(ms) {  // CPU time, not wall time: a preempted loop burns no less
  const end = process.cpuUsage().user + process.cpuUsage().system + ms * 1000;
  let x = 0;
  while (process.cpuUsage().user + process.cpuUsage().system < end) x++;
  return x;
}
http.createServer((req, res) => {
  burn(0.2);
  setTimeout(() => { burn(0.3); res.end('ok\n'); }, 1);
}).listen(+process.argv[2], '127.0.0.1', () => console.log('READY'));
"""

HTTPS_SERVER = r"""
const https = require('https'), fs = require('fs');
https.createServer({key: fs.readFileSync(process.argv[3]), cert: fs.readFileSync(process.argv[4])},
  (req, res) => setTimeout(() => res.end('ok\n'), 1)
).listen(+process.argv[2], '127.0.0.1', () => console.log('READY'));
"""

# 4 keep-alive connections, 25 requests each, GET /item/<i>: prints DONE n
HTTPS_CLIENT = r"""
const https = require('https');
const agent = new https.Agent({keepAlive: true, maxSockets: 4});
let done = 0, sent = 0;
function one(i) {
  return new Promise((ok, bad) => https.get({host: '127.0.0.1', port: +process.argv[2],
      path: '/item/' + i, agent, rejectUnauthorized: false}, res => {
    res.resume(); res.on('end', () => { done++; ok(); });
  }).on('error', bad));
}
(async () => {
  for (let r = 0; r < 25; r++) await Promise.all([0, 1, 2, 3].map(k => one(4 * r + k)));
  console.log('DONE ' + done); agent.destroy();
})();
"""


def https_case(tap, node):
    d = K.workdir("nodejs_https")
    kc = K.tls_cert(d)
    if not tap.ok("nodejs https: a certificate", kc is not None):
        return
    key, cert = kc
    srv, cli = os.path.join(d, "server.js"), os.path.join(d, "client.js")
    with open(srv, "w") as f:
        f.write(HTTPS_SERVER)
    with open(cli, "w") as f:
        f.write(HTTPS_CLIENT)
    port = K.free_port()
    server = K.spawn([node, srv, str(port), key, cert], stdout=subprocess.DEVNULL)
    K.wait_port(port, server)
    done = []

    def drive():
        done.append(K.run_counted([node, cli, str(port)], r"DONE (\d+)"))
    rep, path = K.record_workload(tap, "nodejs_https", [server.pid], drive, seconds=6)
    K.stop(server)
    if rep is None:
        return
    K.check_tiling(tap, "nodejs https", rep.get("requests", []))
    names = {}
    for q in K.service_requests(rep, port):
        names[q["name"]] = names.get(q["name"], 0) + 1
    n = done[0] if done else 0
    tap.ok(f"nodejs https: the {n} requests named GET /item/{{n}} from their plaintext, "
           f"the rest handshakes", n == 100 and names.get("GET /item/{n}") == n
           and set(names) <= {"GET /item/{n}", "TLS handshake"}, f"{names}; recording {path}")
    tagged, err = K.report_json(path, ["--tag", "http.status=200"])
    ok = [q for q in (tagged or {}).get("requests", []) if q["name"] == "GET /item/{n}"]
    tap.ok(f"nodejs https: {len(ok)} of them carry http.status=200, from the plaintext of "
           f"SSL_write (recorded without a connection, for the thread's next socket write)",
           len(ok) == n, err)
    hooks = [h for h in R.Dump(path).of("hook") if h.get("name") == f"tls pid {server.pid}"]
    tap.ok("nodejs https: TLS probes on the node executable itself",
           hooks and hooks[0].get("status") == "attached" and "node" in hooks[0].get("detail", ""),
           str(hooks))


def main():
    tap = Tap()
    node = shutil.which("node") or shutil.which("nodejs")
    if not node or not shutil.which("wrk"):
        tap.skip("nodejs", "node / wrk not installed (apt-get install nodejs wrk)")
        K.done(tap)
    if not tap.ok("critpath is built", os.access(CRITPATH, os.X_OK), f"{CRITPATH} missing"):
        K.done(tap)
    https_case(tap, node)
    d = K.workdir("nodejs")
    js = os.path.join(d, "server.js")
    with open(js, "w") as f:
        f.write(SERVER)
    port = K.free_port()
    server = K.spawn([node, js, str(port)], stdout=subprocess.DEVNULL)
    K.wait_port(port, server)
    sent = []

    def drive():
        sent.append(K.run_counted(["wrk", "-t", "2", "-c", "8", "-d", "3s",
                                   f"http://127.0.0.1:{port}/"], r"(\d+) requests in"))
    rep, path = K.record_workload(tap, "nodejs", [server.pid], drive, seconds=7)
    K.stop(server)
    if rep is None:
        K.done(tap)
    reqs = [q for q in K.service_requests(rep, port) if q.get("name") == "GET /"]
    K.check_tiling(tap, "nodejs", rep.get("requests", []))
    n = sent[0] if sent else 0
    tap.ok(f"nodejs: {len(reqs)} GET / requests found, wrk completed {n}",
           n and 0.95 * n <= len(reqs) <= n + 8, f"recording {path}")
    if not reqs:
        K.done(tap)

    def queued(g):
        return "(other requests)" in g.get("frames", [])

    own = K.median_ns(reqs, lambda g: g.get("category") == "cpu" and not queued(g))
    other = K.median_ns(reqs, queued)
    tap.ok(f"nodejs: a request's own cpu {K.fmt_ms(own)} (0.5 ms by the workload: 0.3..1.5)",
           0.3 * K.MS <= own <= 1.5 * K.MS, K.describe(reqs[len(reqs) // 2]))
    tap.ok(f"nodejs: time on the other connections' requests {K.fmt_ms(other)} "
           f"(7 x 0.5 ms by the workload: at least 1.5 ms)", other >= 1.5 * K.MS,
           K.describe(reqs[len(reqs) // 2]))
    # (its cpu, and whatever else the loop did meanwhile: every category)
    bad = [g for q in reqs for g in q["critical_path"] if queued(g) and not g["interference"]]
    tap.ok("nodejs: that time is interference", not bad, str(bad[:3]))
    K.done(tap)


if __name__ == "__main__":
    main()
