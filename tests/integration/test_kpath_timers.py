#!/usr/bin/env python3
# SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
"""Event loops whose handlers wait on timers (DESIGN.md 5: a timer is a
dependency; the loop's work for others while it is pending is not the
request's).

Two loops of different runtimes, each a real server on its runtime's own
loop, with the app this test writes into its work dir:
  Node.js (libuv)      http.createServer; /sleep: setTimeout 20 ms
  Python (asyncio)     asyncio.start_server with a small HTTP/1.1 reader;
                       /sleep: await asyncio.sleep(0.020)
and /cpu burns CPU in the handler (2 ms on asyncio, 1 ms on Node.js, below),
/fast answers at once.
8 clients on keep-alive connections send the three paths in turn, so the
loop works for others while a timer is pending and is sometimes busy when
it expires.

Checked: every request found and tiled; a /sleep request has its own 20 ms
timer on its path as `sleep` (>= 95% of them: >= 18 ms on asyncio, whose
timers count from when they are armed; >= 10 ms on Node.js, as libuv arms a
timer from the loop's clock as it was when the loop last polled, so the
handlers run before ours in the same batch make it fire up to their CPU
time early: 7 of them at 1 ms at most, less in practice); no /fast or /cpu
request carries a sleep as its own (<= 2%); a /fast request carries at most 2 ms of
CPU as its own (>= 95%, and the issue's goal of 98% reported as a gap;
past each connection's first request, which sets up the connection): the
loop's work for others is interference."""
import collections
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kpathlib as K  # noqa: E402
from tap import CRITPATH, Tap  # noqa: E402

MS = K.MS
CLIENTS, ROUNDS = 8, 12
PATHS = ("/sleep", "/cpu", "/fast")

NODE = r"""
const http = require('http');
function burn(ms) {
  const end = process.cpuUsage().user + process.cpuUsage().system + ms * 1000;
  while (process.cpuUsage().user + process.cpuUsage().system < end) {}
}
http.createServer((req, res) => {
  const done = () => res.end(req.url + '\n');
  if (req.url === '/sleep') setTimeout(done, 20);
  else { if (req.url === '/cpu') burn(1); done(); }
}).listen(+process.argv[2], '127.0.0.1', () => console.log('READY'));
"""

ASYNCIO = r'''
import asyncio, sys, time

def burn(s):
    t0 = time.thread_time()
    while time.thread_time() - t0 < s:
        pass

async def serve(reader, writer):
    while True:
        head = await reader.readuntil(b"\r\n\r\n")
        path = head.split(b" ", 2)[1].decode()
        if path == "/sleep":
            await asyncio.sleep(0.020)
        elif path == "/cpu":
            burn(0.002)
        body = (path + "\n").encode()
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
        await writer.drain()

async def main():
    srv = await asyncio.start_server(serve, "127.0.0.1", int(sys.argv[1]))
    async with srv:
        await srv.serve_forever()

asyncio.run(main())
'''


def own_ns(q, cat):
    return K.path_ns(q, lambda g: g.get("category") == cat and K.own(g))


def case(tap, what, argv, src, min_sleep_ms):
    d = K.workdir(f"timers_{what}")
    app = os.path.join(d, "app" + os.path.splitext(src)[1])
    with open(app, "w") as f:
        f.write(argv[1])
    port = K.free_port()
    server = K.spawn([argv[0], app, str(port)], stdout=subprocess.DEVNULL)
    try:
        K.wait_port(port, server)
    except RuntimeError as e:
        tap.ok(f"{what}: the server starts", False, str(e))
        return
    # first runs of the handlers (a JIT compiling them) before the recording
    K.http_load(port, PATHS, CLIENTS, 1, collections.Counter())
    sent = collections.Counter()
    rep, path = K.record_workload(tap, f"timers_{what}", [server.pid],
                                  lambda: K.http_load(port, PATHS, CLIENTS, ROUNDS, sent),
                                  seconds=6)
    K.stop(server)
    if rep is None:
        return
    by = K.by_name(rep, port)
    K.check_tiling(tap, what, rep.get("requests", []))
    K.check_found(tap, what, by, sent)
    sleeps = by.get("GET /sleep", [])
    bad = [q for q in sleeps if own_ns(q, "sleep") < min_sleep_ms * MS]
    tap.ok(f"{what}: /sleep: {len(sleeps) - len(bad)} of {len(sleeps)} have their own 20 ms "
           f"timer as sleep (>= {min_sleep_ms} ms), expected >= 95%",
           sleeps and len(bad) <= len(sleeps) * 0.05,
           "\n".join(K.describe(q, 30) for q in bad[:2]))
    rest = by.get("GET /fast", []) + by.get("GET /cpu", [])
    slept = [q for q in rest if own_ns(q, "sleep") >= 2 * MS]
    tap.ok(f"{what}: /fast, /cpu: {len(rest) - len(slept)} of {len(rest)} carry no sleep as "
           "their own (< 2 ms), expected >= 98%", rest and len(slept) <= len(rest) * 0.02,
           "\n".join(K.describe(q, 30) for q in slept[:2]))
    # a connection's first request sets up its socket and parser: own cpu
    fast = [q for q in by.get("GET /fast", []) if not q.get("id", "").endswith(":0")]
    busy = [q for q in fast if own_ns(q, "cpu") >= 2 * MS]
    tap.ok(f"{what}: /fast: {len(fast) - len(busy)} of {len(fast)} carry < 2 ms of cpu as their "
           "own (the loop's work for others is interference), expected >= 95%",
           fast and len(busy) <= len(fast) * 0.05, "\n".join(K.describe(q, 30) for q in busy[:2]))
    # the issue's goal; slivers of a busy loop's time at its contexts' edges
    # still add up past 2 ms on a few (0-5 of 94 in CI runs)
    tap.gap(f"{what}: /fast: the same, expected >= 98%", fast and len(busy) <= len(fast) * 0.02,
            issue=34)


def main():
    tap = Tap()
    if not tap.ok("critpath is built", os.access(CRITPATH, os.X_OK), f"{CRITPATH} missing"):
        K.done(tap)
    node = shutil.which("node") or shutil.which("nodejs")
    if node:
        case(tap, "node", [node, NODE], "app.js", 10)
    else:
        tap.skip("timers node", "node not installed (apt-get install nodejs)")
    case(tap, "asyncio", [sys.executable, ASYNCIO], "app.py", 18)
    K.done(tap)


if __name__ == "__main__":
    main()
