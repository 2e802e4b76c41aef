#!/usr/bin/env python3
# SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
"""HTTP/2: requests are streams, several at once on one connection (DESIGN.md
section 5: "HTTP/2 / gRPC: stream and method").

A Node.js server over cleartext HTTP/2 (h2c) answers three kinds of stream,
which one client sends at once on one connection, round after round:
  GET /wait                     a 10 ms timer, then 'ok'
  GET /work/7                   2 ms of CPU, then 'ok'
  POST /demo.Greeter/SayHello   gRPC's shape: a length-prefixed message in,
                                1 ms of CPU, headers, a message and trailers
                                (grpc-status) out; END_STREAM on the trailers
Every stream is a request named by its :method and :path (HPACK-decoded,
Huffman and the dynamic table included), its latency its own although the
three overlap on one connection, and the path shows what each waited for.

Then a client whose connection was open before the recording (its HPACK
tables are not known from their start): its streams are still each a
request. Then grpc-go (Debian's golang-google-grpc-dev), whose encoder
names a call's method by an index into HPACK's dynamic table, in the clear
and over TLS (Go's own crypto/tls). And Debian's
nghttpd under h2load, 8 streams at once per connection, with bodies larger
than the payload prefix, GET and POST, in the clear and over TLS. And
Node.js's http2 over TLS, whose OpenSSL (in the node executable) runs on
memory buffers.
"""
import os
import random
import re
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kpathlib as K  # noqa: E402
from tap import CRITPATH, Tap  # noqa: E402

SERVER = r"""
const http2 = require('http2');
function burn(ms) {  // CPU time, not wall time
  const end = process.cpuUsage().user + process.cpuUsage().system + ms * 1000;
  let x = 0;
  while (process.cpuUsage().user + process.cpuUsage().system < end) x++;
  return x;
}
const server = http2.createServer();
server.on('stream', (stream, headers) => {
  const path = headers[':path'];
  if (path === '/wait') {
    setTimeout(() => { stream.respond({':status': 200}); stream.end('ok'); }, 10);
  } else if (path.startsWith('/work/')) {
    burn(2);
    stream.respond({':status': 200});
    stream.end('ok');
  } else if (path === '/demo.Greeter/SayHello') {
    stream.on('data', () => {});
    stream.on('end', () => {
      burn(1);
      stream.respond({':status': 200, 'content-type': 'application/grpc'},
                     {waitForTrailers: true});
      stream.on('wantTrailers', () => stream.sendTrailers({'grpc-status': '0'}));
      const msg = Buffer.alloc(5 + 12);
      msg.writeUInt32BE(12, 1);
      msg.write('hello, world', 5);
      stream.end(msg);
    });
  } else {
    stream.respond({':status': 404});
    stream.end();
  }
});
server.listen(+process.argv[2], '127.0.0.1', () => console.log('READY'));
"""

CLIENT = r"""
const http2 = require('http2');
const [port, rounds, hold] = [+process.argv[2], +process.argv[3], process.argv[4] === 'hold'];
const s = http2.connect('http://127.0.0.1:' + port);
function req(h, body) {
  return new Promise((ok, fail) => {
    const r = s.request(h);
    r.on('response', () => {});
    r.on('data', () => {});
    r.on('end', ok);
    r.on('error', fail);
    r.end(body);
  });
}
function round() {
  const msg = Buffer.alloc(5 + 5);
  msg.writeUInt32BE(5, 1);
  msg.write('world', 5);
  return Promise.all([
    req({':method': 'GET', ':path': '/wait'}),
    req({':method': 'GET', ':path': '/work/7'}),
    req({':method': 'POST', ':path': '/demo.Greeter/SayHello',
         'content-type': 'application/grpc', 'te': 'trailers'}, msg),
  ]);
}
(async () => {
  if (hold) {  // a connection in use before the recording
    await round();
    console.log('OPEN');
    await new Promise(ok => process.stdin.once('data', ok));
  }
  for (let i = 0; i < rounds; i++) await round();
  console.log('DONE ' + 3 * rounds);
  s.close();
})().catch(e => { console.error(e); process.exit(1); });
"""

ROUNDS = 60
NAMES = {"GET /wait", "GET /work/{n}", "POST /demo.Greeter/SayHello"}


def h2_warnings(rep):
    return [w for w in rep.get("warnings") or [] if "HTTP/2" in w]


def name_counts(reqs):
    names = {}
    for q in reqs:
        names[q["name"]] = names.get(q["name"], 0) + 1
    return names


def nghttpd_docs(d, big):
    """A document root: index.html, and big.txt of `big` bytes."""
    docs = os.path.join(d, "docs")
    os.makedirs(docs, exist_ok=True)
    with open(os.path.join(docs, "index.html"), "w") as f:
        f.write("hello\n")
    with open(os.path.join(docs, "big.txt"), "w") as f:
        f.write("x" * big + "\n")
    return docs


def h2load(base, streams, got, body=None, n=400):
    """A drive(): h2load, n requests over 2 connections of `streams` at
    once, half of each document (POSTs of the file body, if given); the
    count it completed into got."""
    def drive():
        time.sleep(0.5)  # the recorder looks at the target's libraries first
        r = subprocess.run(["h2load", "-n", str(n), "-c", "2", "-m", str(streams)] +
                           (["-d", body] if body else []) +
                           [f"{base}/index.html", f"{base}/big.txt"],
                           capture_output=True, text=True, timeout=120)
        m = re.search(r"requests: \d+ total, \d+ started, \d+ done, (\d+) succeeded", r.stdout)
        if r.returncode != 0 or not m or "Application protocol: h2" not in r.stdout:
            raise RuntimeError(f"h2load: exit {r.returncode}: {r.stdout[-500:]}")
        got.append(int(m.group(1)))
    return drive


def h2load_served(tap, tag, argv, port, url, streams, body=None, n=400, seconds=5):
    """Starts the server argv listening on port, records it while h2load
    makes n requests to url (h2load()), stops it. Returns the server's
    requests other than TLS handshakes (their tiling checked), the count
    h2load completed, the report and the recording; None if the recording
    failed."""
    server = K.spawn(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    K.wait_port(port, server)
    got = []
    rep, path = K.record_workload(tap, tag.replace(" ", "_"), [server.pid],
                                  h2load(url, streams, got, body, n), seconds=seconds)
    K.stop(server)
    if rep is None:
        return None
    K.check_tiling(tap, tag, rep.get("requests", []))
    reqs = [q for q in K.service_requests(rep, port) if q["name"] != "TLS handshake"]
    return reqs, got[0] if got else 0, rep, path


def halves_named(tap, tag, got, method="GET"):
    """An h2load drive of index.html and big.txt (h2load_served's answer
    got): every stream it completed found, half named each. Returns got."""
    reqs, n, rep, path = got
    names = name_counts(reqs)
    tap.ok(f"{tag}: {len(reqs)} streams found, named {method} /index.html and {method} "
           f"/big.txt, half each; h2load completed {n}",
           n and names == {f"{method} /index.html": n // 2, f"{method} /big.txt": n // 2},
           f"{names}; warnings {h2_warnings(rep)}; recording {path}")
    return got


def conn_of(q):
    """The connection a request was served on: its id is pid:conn:n."""
    return q["id"].rsplit(":", 1)[0]


def overlapping(reqs):
    """Requests that overlap another one on the same connection."""
    by = {}
    for q in reqs:
        by.setdefault(conn_of(q), []).append(q)
    n = 0
    for qs in by.values():
        qs.sort(key=lambda q: q["start_ns"])
        end = 0
        for q in qs:
            if q["start_ns"] < end:
                n += 1
            end = max(end, q["end_ns"])
    return n


def cat_ns(q, cat):
    return sum(K.dur(g) for g in q["critical_path"] if g["category"] == cat)


def median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2] if xs else 0


def start_node(name, node, tls=False):
    """The server, listening (over TLS: its key and certificate made, the
    client taking it); returns (port, server process, client script), or
    None when no certificate could be made."""
    d = K.workdir(name)
    js, cjs = os.path.join(d, "server.js"), os.path.join(d, "client.js")
    server_js, client_js, args = SERVER, CLIENT, []
    if tls:
        kc = K.tls_cert(d)
        if kc is None:
            return None
        args = list(kc)
        server_js = server_js.replace(
            "http2.createServer()",
            "http2.createSecureServer({key: require('fs').readFileSync(process.argv[3]), "
            "cert: require('fs').readFileSync(process.argv[4])})")
        client_js = client_js.replace("http2.connect('http://127.0.0.1:' + port)",
                                      "http2.connect('https://127.0.0.1:' + port, "
                                      "{rejectUnauthorized: false})")
    with open(js, "w") as f:
        f.write(server_js)
    with open(cjs, "w") as f:
        f.write(client_js)
    port = K.free_port()
    server = K.spawn([node, js, str(port)] + args, stdout=subprocess.DEVNULL)
    K.wait_port(port, server)
    return port, server, cjs


def node_case(tap, node):
    port, server, cjs = start_node("h2", node)
    done = []

    def drive():
        done.append(K.run_counted([node, cjs, str(port), str(ROUNDS)], r"DONE (\d+)", 120))
    rep, path = K.record_workload(tap, "h2", [server.pid], drive, seconds=6)
    if rep is None:
        K.stop(server)
        return
    reqs = K.service_requests(rep, port)
    K.check_tiling(tap, "h2", rep.get("requests", []))
    n = done[0] if done else 0
    names = name_counts(reqs)
    tap.ok(f"h2: {len(reqs)} streams found as requests, the client made {n}",
           n and len(reqs) == n, f"names {names}; recording {path}")
    tap.ok("h2: each named by its :method and :path, 60 of each",
           names == {k: ROUNDS for k in NAMES}, f"{names}")
    tap.ok("h2: one connection, its requests overlapping", overlapping(reqs) >= ROUNDS,
           f"{overlapping(reqs)} overlap; connections {sorted({conn_of(q) for q in reqs})}")
    tap.ok("h2: every stream answered, named and ended by a frame seen (no HTTP/2 warning)",
           not h2_warnings(rep), str(h2_warnings(rep)))
    wait = [q for q in reqs if q["name"] == "GET /wait"]
    work = [q for q in reqs if q["name"] == "GET /work/{n}"]
    rpc = [q for q in reqs if q["name"] == "POST /demo.Greeter/SayHello"]
    # its timer runs while the loop burns the other two streams' 3 ms: the
    # path is that cpu, then the rest of the timer
    lat = median([q["latency_ns"] for q in wait])
    slept = median([cat_ns(q, "sleep") for q in wait])
    timed = sum(1 for q in wait if cat_ns(q, "sleep") > 0)
    # (on a loaded machine the other streams' 3 ms take longer and leave
    # less of the timer to wait out)
    tap.ok(f"h2: GET /wait takes its 10 ms timer: latency {K.fmt_ms(lat)} (9.5..30), "
           f"the timer on the path of {timed} of {len(wait)}, {K.fmt_ms(slept)} of it "
           f"(at least 1)", 9.5 * K.MS <= lat <= 30 * K.MS and timed >= 0.85 * len(wait)
           and slept >= 1 * K.MS, K.describe(wait[len(wait) // 2]) if wait else "none")
    cpu = median([cat_ns(q, "cpu") for q in work])
    tap.ok(f"h2: GET /work/7 burns 2 ms: cpu on its path {K.fmt_ms(cpu)} (1.4..8)",
           1.4 * K.MS <= cpu <= 8 * K.MS, K.describe(work[len(work) // 2]) if work else "none")
    cpu = median([cat_ns(q, "cpu") for q in rpc])
    tap.ok(f"h2: the gRPC call burns 1 ms: cpu on its path {K.fmt_ms(cpu)} (0.7..8), "
           f"ended by its trailers", 0.7 * K.MS <= cpu <= 8 * K.MS,
           K.describe(rpc[len(rpc) // 2]) if rpc else "none")
    K.stop(server)


def held_case(tap, node, tls=False):
    """A connection open before the recording: HPACK tables from mid-stream.
    Over Node's TLS (memory buffers) the recorder sees it speaks HTTP/2 by
    the first plaintext of it (a HEADERS frame), and follows it from there."""
    tag = "h2 held tls" if tls else "h2 held"
    started = start_node(tag.replace(" ", ""), node, tls)
    if not tap.ok(f"{tag}: the server runs", started is not None, "no certificate"):
        return
    port, server, cjs = started
    client = subprocess.Popen([node, cjs, str(port), str(ROUNDS), "hold"], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    line = client.stdout.readline()
    if not tap.ok(f"{tag}: the client's connection is open", line.strip() == "OPEN", line):
        client.kill()
        K.stop(server)
        return
    out = []

    def drive():
        time.sleep(0.2)
        client.stdin.write("go\n")
        client.stdin.flush()
        o, _ = client.communicate(timeout=120)
        out.append(o)
    rep, path = K.record_workload(tap, tag.replace(" ", "_"), [server.pid], drive, seconds=6)
    K.stop(server)
    if rep is None:
        return
    reqs = K.service_requests(rep, port)
    K.check_tiling(tap, tag, rep.get("requests", []))
    named = [q for q in reqs if q["name"] in NAMES]
    tap.ok(f"{tag}: {len(reqs)} streams found on a connection opened before the "
           f"recording ({3 * ROUNDS} made)", len(reqs) == 3 * ROUNDS,
           f"{out}; warnings {h2_warnings(rep)}; recording {path}")
    other = {q["name"] for q in reqs} - NAMES - {"request"}
    tap.ok(f"{tag}: named by what the tables seen say ({len(named)} named, the rest "
           f"'request'), never wrongly", not other, f"{other}")
    if tls:
        tap.ok(f"{tag}: every stream's end seen (no HTTP/2 warning)", not h2_warnings(rep),
               f"{h2_warnings(rep)}; recording {path}")


def nghttpd_case(tap):
    d = K.workdir("h2nghttpd")
    port = K.free_port()
    got = h2load_served(tap, "nghttpd", ["nghttpd", "--no-tls", "-d", nghttpd_docs(d, 6000),
                                         str(port)], port, f"http://127.0.0.1:{port}", 8)
    if got is None:
        return
    reqs, n, rep, path = got
    tap.ok(f"nghttpd: {len(reqs)} requests found, h2load completed {n}",
           n and len(reqs) == n, f"warnings {h2_warnings(rep)}; recording {path}")
    halves_named(tap, "nghttpd", got)
    tap.ok("nghttpd: 8 streams at once on a connection", overlapping(reqs) >= n // 4,
           f"{overlapping(reqs)} overlap")


def nghttpd_many_case(tap):
    """64 streams at once: a write answers tens of them, about 2 KB of frame
    headers and header blocks past the prefix, all kept."""
    d = K.workdir("h2many")
    port = K.free_port()
    got = h2load_served(tap, "nghttpd many", ["nghttpd", "--no-tls", "-d", nghttpd_docs(d, 3000),
                                              str(port)], port, f"http://127.0.0.1:{port}", 64,
                        n=2000)
    if got is None:
        return
    reqs, n, rep, path = halves_named(tap, "nghttpd many", got)
    tap.ok("nghttpd many: no HTTP/2 warning", not h2_warnings(rep),
           f"{h2_warnings(rep)}; recording {path}")
    tap.ok("nghttpd many: streams at once on a connection", overlapping(reqs) >= n // 2,
           f"{overlapping(reqs)} overlap")


def nghttpd_push_case(tap):
    """Server push: nghttpd pushes /big.txt with each /index.html (nghttp
    takes it). The pushed streams are no requests, and each PUSH_PROMISE's
    header block goes into the server's HPACK table like a response's."""
    d = K.workdir("h2push")
    port = K.free_port()
    server = K.spawn(["nghttpd", "--no-tls", "-d", nghttpd_docs(d, 3000),
                      "--push=/index.html=/big.txt", str(port)],
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    K.wait_port(port, server)
    rounds, streams, pushed = 30, 2, []

    def drive():
        time.sleep(0.5)  # the recorder looks at the target's libraries first
        for _ in range(rounds):
            r = subprocess.run(["nghttp", "-nv", "-m", str(streams),
                                f"http://127.0.0.1:{port}/index.html"],
                               capture_output=True, text=True, timeout=60)
            if r.returncode != 0:
                raise RuntimeError(f"nghttp: exit {r.returncode}: {r.stdout[-500:]}")
            pushed.append(r.stdout.count("recv PUSH_PROMISE"))
    rep, path = K.record_workload(tap, "h2push", [server.pid], drive, seconds=5)
    K.stop(server)
    if rep is None:
        return
    K.check_tiling(tap, "nghttpd push", rep.get("requests", []))
    names = name_counts(K.service_requests(rep, port))
    n = rounds * streams
    tagged, err = K.report_json(path, ["--tag", "http.status=200"])
    tap.ok(f"nghttpd push: {sum(pushed)} streams pushed; the {n} requests found, named "
           f"GET /index.html with :status 200, no pushed stream one, no HTTP/2 warning",
           sum(pushed) == n and names == {"GET /index.html": n} and not h2_warnings(rep)
           and len(K.service_requests(tagged or {}, port)) == n,
           f"{names}; pushed {pushed}; {err}; recording {path}\n"
           f"{K.recording_digest(path, rep) if names != {'GET /index.html': n} else ''}")


GRPC_SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "workloads",
                        "kp_grpc.go")
GRPC_PATH = "/usr/share/gocode"  # Debian's Go libraries: golang-google-grpc-dev


def grpc_case(tap, tls=False):
    """grpc-go, server and client: HPACK's dynamic table names the calls.
    Over TLS the server's crypto/tls is Go's own, in its executable
    (record/gotls.c): its plaintext is recorded all the same."""
    tag = "grpc tls" if tls else "grpc"
    d = K.workdir("h2grpc_tls" if tls else "h2grpc")
    exe = os.path.join(d, "kp_grpc")
    env = dict(os.environ, HOME=d, GOCACHE=os.path.join(d, "gocache"), GO111MODULE="off",
               GOPATH=os.path.join(d, "gopath") + ":" + GRPC_PATH, GOFLAGS="", CGO_ENABLED="0")
    try:
        r = subprocess.run(["go", "build", "-o", exe, GRPC_SRC], env=env, capture_output=True,
                           text=True, timeout=600)
        built = r.returncode == 0
        detail = r.stderr[-2000:]
    except subprocess.TimeoutExpired:
        built, detail = False, "go build timed out"
    if not tap.ok(f"{tag}: kp_grpc builds against Debian's grpc-go", built, detail):
        return
    kc = K.tls_cert(d) if tls else ()
    if tls and not tap.ok(f"{tag}: a certificate", kc is not None):
        return
    server, f = K.start_ready([exe, "server"] + ([kc[1], kc[0]] if tls else []))
    port = int(f["port"])
    done = []

    def drive():
        done.append(K.run_counted([exe, "client", str(port), "100"] + (["tls"] if tls else []),
                                  r"DONE (\d+)", 120))
    rep, path = K.record_workload(tap, "h2grpc_tls" if tls else "h2grpc", [server.pid], drive,
                                  seconds=5)
    K.stop(server)
    if rep is None:
        return
    reqs = [q for q in K.service_requests(rep, port) if q["name"] != "TLS handshake"]
    K.check_tiling(tap, tag, rep.get("requests", []))
    n = done[0] if done else 0
    names = name_counts(reqs)
    tap.ok(f"{tag}: {len(reqs)} calls found as requests, the client made {n}",
           n == 400 and len(reqs) == n, f"{names}; warnings {h2_warnings(rep)}; recording {path}")
    tap.ok(f"{tag}: each named POST /grpc.health.v1.Health/Check (from the dynamic table)",
           names == {"POST /grpc.health.v1.Health/Check": n}, f"{names}")
    tap.ok(f"{tag}: no HTTP/2 warnings at the default prefix", not h2_warnings(rep),
           str(h2_warnings(rep)))


def nghttpd_argv(tap, tag, d, docs, port, tls):
    """nghttpd serving docs on port, over TLS with a certificate made in d
    (None, reported, when none could be made), or in the clear."""
    if not tls:
        return ["nghttpd", "--no-tls", "-d", docs, str(port)]
    kc = K.tls_cert(d)
    if not tap.ok(f"{tag}: a certificate", kc is not None):
        return None
    return ["nghttpd", "-d", docs, str(port)] + list(kc)


def nghttpd_post_case(tap, tls):
    """POST bodies of 2 KB, 8 streams at once: a read holds a stream's HEADERS,
    its DATA and the next streams' HEADERS past the 512-byte prefix, a write
    the answers' frames past it. The recorder follows the frames through
    each transfer (over TLS, through each SSL_read's and SSL_write's
    plaintext) and keeps their headers and header blocks: every stream
    found and named, every end known, none of the HTTP/2 warnings."""
    tag = "nghttpd post tls" if tls else "nghttpd post"
    d = K.workdir("h2post_tls" if tls else "h2post")
    body = os.path.join(d, "body")
    with open(body, "w") as f:
        f.write("b" * 2048)
    port = K.free_port()
    argv = nghttpd_argv(tap, tag, d, nghttpd_docs(d, 6000), port, tls)
    if argv is None:
        return
    got = h2load_served(tap, tag, argv, port,
                        f"{'https' if tls else 'http'}://127.0.0.1:{port}", 8, body, 1000, 6)
    if got is None:
        return
    reqs, n, rep, path = halves_named(tap, tag, got, "POST")
    tap.ok(f"{tag}: no HTTP/2 warning (no frame past what was kept)", not h2_warnings(rep),
           str(h2_warnings(rep)))


TLS_SERVER = r"""
const http2 = require('http2'), fs = require('fs');
const srv = http2.createSecureServer({key: fs.readFileSync(process.argv[3]),
                                      cert: fs.readFileSync(process.argv[4])});
srv.on('stream', (s, h) => setTimeout(() => { s.respond({':status': 200}); s.end('ok'); }, 1));
srv.listen(+process.argv[2], '127.0.0.1', () => console.log('READY'));
"""


def node_tls_case(tap, node):
    """Node.js's http2 over TLS: its OpenSSL, linked into node, runs on memory
    buffers (no socket read inside SSL_read): each read's plaintext is
    recorded without a connection and the report gives it its thread's last
    socket read's; each write's, its thread's next socket write. Every
    stream ends where its END_STREAM went out, with its :status."""
    d = K.workdir("h2node_tls")
    kc = K.tls_cert(d)
    if not tap.ok("node tls: a certificate", kc is not None):
        return
    js = os.path.join(d, "server.js")
    with open(js, "w") as f:
        f.write(TLS_SERVER)
    port = K.free_port()
    got = h2load_served(tap, "node tls", [node, js, str(port)] + list(kc), port,
                        f"https://127.0.0.1:{port}", 4)
    if got is None:
        return
    reqs, n, rep, path = halves_named(tap, "node tls", got)
    tagged, err = K.report_json(path, ["--tag", "http.status=200"])
    ok = K.service_requests(tagged or {}, port)
    tap.ok(f"node tls: no HTTP/2 warning (every stream's end seen in SSL_write's plaintext), "
           f"{len(ok)} of {len(reqs)} with :status 200",
           not h2_warnings(rep) and n and len(ok) == len(reqs),
           f"warnings {rep.get('warnings')}; {err}; recording {path}")


def nghttpd_tls_case(tap):
    """HTTP/2 over TLS: the frames are OpenSSL's plaintext (each SSL_read's,
    the ones answered from OpenSSL's buffer too, and SSL_write's buffer,
    each write's taken once, however many socket writes it makes). h2load's
    TLS 1.3 handshake takes a HelloRetryRequest: its third flight is a "TLS
    handshake" exchange too, not a request."""
    d = K.workdir("h2tls")
    kc = K.tls_cert(d)
    if not tap.ok("nghttpd tls: a certificate", kc is not None):
        return
    port = K.free_port()
    got = h2load_served(tap, "nghttpd tls", ["nghttpd", "-d", nghttpd_docs(d, 3000), str(port)]
                        + list(kc), port, f"https://127.0.0.1:{port}", 4)
    if got is None:
        return
    reqs, n, rep, path = halves_named(tap, "nghttpd tls", got)
    tap.ok("nghttpd tls: streams at once on a connection", overlapping(reqs) >= n // 8,
           f"{overlapping(reqs)} overlap")


def secrets_case(tap, tls):
    """Nothing secret is recorded (issue 22): h2load sends a 3,000-byte
    authorization and a cookie with every request (raw in HPACK: its
    characters take 10 to 12 bits in Huffman's code, so nghttp2 sends them
    as they are), and nghttpd answers with a body whose text past the first
    --payload-bytes of the transfer is not kept either. Neither is in the
    recording, in the clear or over TLS; the requests are named as ever."""
    tag = "secrets tls" if tls else "secrets"
    d = K.workdir("h2secrets_tls" if tls else "h2secrets")
    rnd = random.Random(22)
    auth = "".join(rnd.choice("!()?+|#>") for _ in range(3000))
    cookie = "".join(rnd.choice("!()?+|#>") for _ in range(200))
    marker = "BODY-TEXT-NOT-KEPT-7f3a9c"
    docs = os.path.join(d, "docs")
    os.makedirs(docs, exist_ok=True)
    with open(os.path.join(docs, "index.html"), "w") as f:
        f.write("hello\n")
    with open(os.path.join(docs, "big.txt"), "w") as f:
        f.write("x" * 200 + marker + "y" * 100 + "\n")
    port = K.free_port()
    argv = nghttpd_argv(tap, tag, d, docs, port, tls)
    if argv is None:
        return
    url = f"{'https' if tls else 'http'}://127.0.0.1:{port}"
    server = K.spawn(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    K.wait_port(port, server)
    got = []

    def drive():
        time.sleep(0.5)
        # one stream at a time: a read of several 3 KB header blocks is
        # past what the recorder keeps of one transfer (4,082 bytes)
        r = subprocess.run(["h2load", "-n", "100", "-c", "2", "-m", "1",
                            "-H", f"authorization: Bearer {auth}", "-H", f"cookie: sid={cookie}",
                            f"{url}/index.html", f"{url}/big.txt"],
                           capture_output=True, text=True, timeout=120)
        m = re.search(r"requests: \d+ total, \d+ started, \d+ done, (\d+) succeeded", r.stdout)
        if r.returncode != 0 or not m:
            raise RuntimeError(f"h2load: exit {r.returncode}: {r.stdout[-500:]}")
        got.append(int(m.group(1)))

    rep, path = K.record_workload(tap, tag.replace(" ", "_"), [server.pid], drive, seconds=4)
    K.stop(server)
    if rep is None:
        return
    dump = subprocess.run([CRITPATH, "dump", path, "--json"], capture_output=True, text=True,
                          timeout=120).stdout
    leaks = [w for w in (auth[i:i + 16] for i in range(0, len(auth) - 16, 100)) if w in dump]
    tap.ok(f"{tag}: the authorization header's value is not in the recording "
           f"({len(dump)} bytes of dump)", dump and not leaks and cookie[:16] not in dump,
           f"{len(leaks)} pieces of it found; recording {path}")
    tap.ok(f"{tag}: the body past the payload prefix is not in the recording",
           dump and marker not in dump and "x" * 40 in dump,
           f"recording {path}")
    reqs = [q for q in K.service_requests(rep, port) if q["name"] != "TLS handshake"]
    names = name_counts(reqs)
    n = got[0] if got else 0
    tap.ok(f"{tag}: requests still named from what was kept: {names}, h2load completed {n}",
           n and names == {"GET /index.html": n // 2, "GET /big.txt": n // 2},
           f"warnings {h2_warnings(rep)}; recording {path}")


def main():
    tap = Tap()
    node = shutil.which("node") or shutil.which("nodejs")
    if not tap.ok("critpath is built", os.access(CRITPATH, os.X_OK), f"{CRITPATH} missing"):
        K.done(tap)
    if node:
        node_case(tap, node)
        held_case(tap, node)
        held_case(tap, node, tls=True)
        if shutil.which("h2load"):
            node_tls_case(tap, node)
    else:
        tap.skip("h2 node", "node not installed (apt-get install nodejs)")
    if shutil.which("go") and os.path.isdir(os.path.join(GRPC_PATH, "src/google.golang.org/grpc")):
        grpc_case(tap)
        grpc_case(tap, tls=True)
    else:
        tap.skip("h2 grpc", "go / grpc-go not installed "
                 "(apt-get install golang-go golang-google-grpc-dev)")
    if shutil.which("nghttpd") and shutil.which("h2load"):
        nghttpd_case(tap)
        nghttpd_tls_case(tap)
        nghttpd_post_case(tap, False)
        nghttpd_post_case(tap, True)
        nghttpd_many_case(tap)
        secrets_case(tap, False)
        secrets_case(tap, True)
        if shutil.which("nghttp"):
            nghttpd_push_case(tap)
    else:
        tap.skip("h2 nghttpd", "nghttpd / h2load not installed "
                 "(apt-get install nghttp2-server nghttp2-client)")
    K.done(tap)


if __name__ == "__main__":
    main()
