#!/usr/bin/env python3
# SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
"""`critpath agent` on a shared host, fed what it does not control.

A Python ThreadingHTTPServer (the target) names itself and each serving
thread with a terminal escape and bytes that are not UTF-8; beside it, a process that is
not a target runs three CPU hogs with such names (the targets' runqueue
culprits). A Node.js h2c server (a second target) gets HTTP/2 requests
whose :path is not UTF-8, from a client that writes its frames by hand.
The receiver (tests/agent/receiver.js) refuses a batch with a string that
is not UTF-8, as the OpenTelemetry Collector does: none may be refused.

Then a client sets a sampled traceparent on every request: the agent
follows --opt-in-rate of them and counts the rest. Requests carrying
secrets in their query: url.query has them redacted. 3,000 distinct
paths against --max-names 200: the agent says it, and the names past it
are one. And SIGTERM 0.1 s after the agent and the recorder start: they
end at once, cleanly, with nothing recorded."""
import ctypes  # noqa: F401  (the server script uses it)
import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kpathlib as K  # noqa: E402
from tap import CRITPATH, Tap  # noqa: E402

AGENT_JS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "agent")
HOSTILE = b"\x1b]0;pwn\x07\xff\xc3("  # 10 bytes: a title escape, then not UTF-8

SERVER = r"""
import ctypes, http.server, socketserver, sys
libc = ctypes.CDLL(None)
NAME = %r
libc.prctl(15, ctypes.c_char_p(NAME), 0, 0, 0)  # the process's name: its service's
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    wbufsize = 65536  # the answer in one write
    disable_nagle_algorithm = True
    def do_GET(self):
        libc.prctl(15, ctypes.c_char_p(NAME), 0, 0, 0)  # PR_SET_NAME
        x = 0
        for i in range(20000):
            x += i
        body = b"ok\n"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
class S(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
S(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
""" % HOSTILE

HOG = r"""
import ctypes, threading
libc = ctypes.CDLL(None)
def spin():
    libc.prctl(15, ctypes.c_char_p(%r), 0, 0, 0)
    while True:
        pass
for _ in range(3):
    threading.Thread(target=spin, daemon=True).start()
threading.Event().wait()
""" % (b"\x1b[2J\xff\xfe" + b"hog")

H2SERVER = r"""
const http2 = require('http2');
const server = http2.createServer();
server.on('stream', (stream) => { stream.respond({':status': 200}); stream.end('ok'); });
server.listen(+process.argv[2], '127.0.0.1', () => console.log('READY'));
"""


def h2_bad_paths(port, n):
    """n HTTP/2 GETs on one connection, :path "/u/\\xff\\xfeN" as an HPACK
    literal (not Huffman, not indexed): what a client that does not check
    sends. Returns the streams answered."""
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00")
    for i in range(n):
        path = b"/u/\xff\xfe" + str(i).encode()
        block = b"\x82\x86" + b"\x04" + bytes([len(path)]) + path + b"\x01\x09localhost"
        sid = 2 * i + 1
        s.sendall(len(block).to_bytes(3, "big") + b"\x01\x05" + sid.to_bytes(4, "big") + block)
    answered, buf, deadline = set(), b"", time.time() + 10
    while len(answered) < n and time.time() < deadline:
        try:
            chunk = s.recv(65536)
        except socket.timeout:
            break
        if not chunk:
            break
        buf += chunk
        while len(buf) >= 9:
            ln = int.from_bytes(buf[:3], "big")
            if len(buf) < 9 + ln:
                break
            typ, flags, sid = buf[3], buf[4], int.from_bytes(buf[5:9], "big") & 0x7fffffff
            if typ == 4 and not flags & 1:  # SETTINGS: acknowledged
                s.sendall(b"\x00\x00\x00\x04\x01\x00\x00\x00\x00")
            if typ == 0 and flags & 1:
                answered.add(sid)
            buf = buf[9 + ln:]
        time.sleep(0.01)
    s.close()
    return len(answered)


def get_many(port, paths, headers=None):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
    n = 0
    for p in paths:
        c.request("GET", p, headers=headers or {})
        r = c.getresponse()
        r.read()
        n += r.status == 200
    c.close()
    return n


def wait_text(path, text, proc, timeout=40):
    deadline = time.time() + timeout
    while time.time() < deadline:
        with open(path, errors="replace") as f:
            if text in f.read():
                return True
        if proc.poll() is not None:
            return False
        time.sleep(0.1)
    return False


def early_signal(tap, d):
    """SIGTERM 0.1 s after start, while the programs load"""
    sleeper = K.spawn(["sleep", "60"])
    for what, argv in (("record", [CRITPATH, "record", "-p", str(sleeper.pid), "-o",
                                   os.path.join(d, "early.rec")]),
                       ("agent", [CRITPATH, "agent", "-p", str(sleeper.pid)])):
        t0 = time.time()
        p = subprocess.Popen(argv, stderr=subprocess.PIPE, text=True)
        time.sleep(0.1)
        p.send_signal(signal.SIGTERM)
        try:
            _, err = p.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            p.kill()
            _, err = p.communicate()
        took = time.time() - t0
        tap.ok(f"{what}: SIGTERM at 0.1 s ends it cleanly (exit 0, said, within 12 s)",
               p.returncode == 0 and "before the probes were attached" in err and took < 12,
               f"exit {p.returncode} after {took:.1f} s: {err[-800:]}")
    rep = subprocess.run([CRITPATH, "report", os.path.join(d, "early.rec")],
                         capture_output=True, text=True, timeout=60)
    tap.ok("record: the early-stopped file is whole and says it holds no events",
           "no events" in rep.stderr, rep.stderr[-500:])
    K.stop(sleeper)


def main():
    tap = Tap()
    if not tap.ok("critpath and tests/agent's npm packages are there",
                  os.access(CRITPATH, os.X_OK)
                  and os.path.isdir(os.path.join(AGENT_JS, "node_modules", "@opentelemetry")),
                  "run 'make deps' and 'make'"):
        K.done(tap)
    d = K.workdir("agent-hostile")
    early_signal(tap, d)

    spans_path, stats_path = os.path.join(d, "spans.jsonl"), os.path.join(d, "stats.json")
    rport, port, h2port = K.free_port(), K.free_port(), K.free_port()
    recv = K.spawn(["node", os.path.join(AGENT_JS, "receiver.js"), str(rport), spans_path,
                    stats_path, "0"], stdout=subprocess.PIPE, text=True)
    ready = recv.stdout.readline()
    app = os.path.join(d, "server.py")
    with open(app, "w") as f:
        f.write(SERVER)
    srv = K.spawn([sys.executable, app, str(port)])
    K.wait_port(port, srv)
    h2js = os.path.join(d, "h2.js")
    with open(h2js, "w") as f:
        f.write(H2SERVER)
    h2 = K.spawn(["node", h2js, str(h2port)], stdout=subprocess.PIPE, text=True)
    h2ready = h2.stdout.readline()
    hog_py = os.path.join(d, "hog.py")
    with open(hog_py, "w") as f:
        f.write(HOG)
    hog = K.spawn([sys.executable, hog_py])

    err_path = os.path.join(d, "agent.stderr")
    err = open(err_path, "wb")
    agent = K.spawn([CRITPATH, "agent", "-p", f"{srv.pid},{h2.pid}",
                     "--otlp", f"http://127.0.0.1:{rport}/v1/traces", "--slow", "10s",
                     "--sample", "0.2", "--opt-in-rate", "20", "--max-names", "200",
                     "--redact-query", "session_id", "--status-every", "2s", "-d", "120"],
                    stderr=err, stdout=err)
    attached = wait_text(err_path, "critpath agent: following", agent)
    tap.ok("the agent starts and attaches", attached and ready.startswith("READY")
           and h2ready.startswith("READY"), open(err_path, errors="replace").read()[-2000:])
    if not attached:
        K.done(tap)

    # hostile names: the target's threads and the hog's; secrets in queries
    n_plain = get_many(port, [f"/item/{i}?q=1&token=tok{i}&session_id=sid{i}"
                              for i in range(300)])
    n_h2 = h2_bad_paths(h2port, 50)
    K.stop(hog)  # the rest needs the CPU
    # a sampled traceparent on every request, 3 s
    tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    t0, n_tp = time.time(), 0
    while time.time() - t0 < 3:
        n_tp += get_many(port, ["/traced"] * 50, {"traceparent": tp})
    tp_secs = time.time() - t0
    # distinct names
    n_names = get_many(port, [f"/n/{chr(97 + i % 26)}{chr(97 + i // 26 % 26)}"
                              f"{chr(97 + i // 676 % 26)}x" for i in range(3000)])
    time.sleep(3)  # a status line, and the exports' linger
    K.stop(agent)
    err.close()
    K.stop(recv)
    text = open(err_path, "rb").read()
    stats = json.load(open(stats_path))
    spans = [json.loads(x) for x in open(spans_path)]
    server_spans = [s for s in spans if s["kind"] == 2]

    tap.ok("the load was answered (HTTP/1 300, HTTP/2 50, traced, names)",
           n_plain == 300 and n_h2 == 50 and n_tp > 300 and n_names == 3000,
           f"{n_plain} {n_h2} {n_tp} {n_names}")
    tap.ok("no batch refused for a string that is not UTF-8 (the receiver is strict)",
           stats["bad"] == 0 and stats["accepted"] > 0 and server_spans, json.dumps(stats))
    h2_spans = [s for s in server_spans if s["attributes"].get("url.path", "").startswith("/u/")]
    tap.ok("HTTP/2 requests with a :path that is not UTF-8 are exported, repaired",
           h2_spans and all("\ufffd" in s["attributes"]["url.path"] for s in h2_spans),
           f"{len(h2_spans)} of {len(server_spans)}")
    named = [s for s in spans if "\ufffd" in json.dumps(s, ensure_ascii=False)
             and "pwn" in json.dumps(s, ensure_ascii=False)]
    tap.ok("the hostile thread names reach the spans repaired", named,
           f"{len(spans)} spans")
    queries = [s["attributes"]["url.query"] for s in server_spans
               if "url.query" in s["attributes"]]
    tap.ok("url.query: token and --redact-query's session_id redacted, q kept",
           queries and all(q == "q=1&token=REDACTED&session_id=REDACTED" for q in queries),
           f"{queries[:3]}")
    tap.ok("no escape byte (ESC, BEL) reaches the agent's messages",
           b"\x1b" not in text and b"\x07" not in text, text[-1500:].decode(errors="replace"))
    opted = [s for s in server_spans if s["traceId"] == tp[3:35]]
    limit = 20 * (tp_secs + 4) + 20  # the rate, the burst, the end of the test
    refused = re.findall(rb"(\d+) opt-in refused", text)
    tap.ok(f"a sampled traceparent on every request: at most --opt-in-rate followed "
           f"({len(opted)} of {n_tp} in {tp_secs:.1f} s), the rest counted",
           0 < len(opted) <= limit and refused and int(refused[-1]) >= n_tp - limit,
           f"refused {refused[-1:]}")
    tap.ok("3,000 distinct names past --max-names 200: said, folded",
           b"more than 200 distinct request names" in text, text[-1500:].decode(errors="replace"))
    K.done(tap)


if __name__ == "__main__":
    main()
