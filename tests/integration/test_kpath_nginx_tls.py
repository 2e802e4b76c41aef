#!/usr/bin/env python3
# SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
"""nginx (Debian, a master and two workers) serving HTTPS itself, on two
ports: one with TLS 1.2 and 1.3, one with TLS 1.2 only. h2load drives each
with HTTP/2 (N requests of GET /a over 2 connections) and HTTP/1.1 (--h1, N
of GET /b over 2 connections). Recorded by the master's pid.

nginx reads ahead: with TLS 1.3 the client's Finished and its first request
(an HTTP/1.1 GET, or HTTP/2's preface and first HEADERS) often come in the
handshake's last read, and SSL_read returns them with no socket read inside;
the recorder takes that read's connection from SSL_do_handshake. A worker
also gives every connection the same SSL * (malloc reuses the freed one), so
what was known of a connection on it must not carry over to the next. Every
request is named, on every port, whichever way its bytes came in."""
import collections
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kpathlib as K  # noqa: E402
from tap import CRITPATH, Tap  # noqa: E402

N = 20
CONF = """daemon off;
master_process on;
worker_processes 2;
pid {d}/nginx.pid;
error_log {d}/error.log;
events {{ worker_connections 256; }}
http {{
  access_log off;
  client_body_temp_path {d};
  ssl_certificate {cert};
  ssl_certificate_key {key};
  server {{
    listen 127.0.0.1:{p13} ssl http2;
    ssl_protocols TLSv1.2 TLSv1.3;
    location /a {{ return 200 "aaa\\n"; }}
    location /b {{ return 200 "bbbbbb\\n"; }}
  }}
  server {{
    listen 127.0.0.1:{p12} ssl http2;
    ssl_protocols TLSv1.2;
    location /a {{ return 200 "aaa\\n"; }}
    location /b {{ return 200 "bbbbbb\\n"; }}
  }}
}}
"""


def h2load(port, path, h1):
    argv = ["h2load", "-n", str(N), "-c", "2", *(["--h1"] if h1 else []),
            f"https://127.0.0.1:{port}{path}"]
    done = K.run_counted(argv, r"(\d+) succeeded")
    if done != N:
        raise RuntimeError(f"{' '.join(argv)}: {done} of {N} succeeded")


def drive(ports):
    for port in ports:
        h2load(port, "/a", False)
        h2load(port, "/b", True)


def main():
    tap = Tap()
    for tool, pkg in (("nginx", "nginx-light"), ("h2load", "nghttp2-client"),
                      ("openssl", "openssl")):
        if not shutil.which(tool):
            tap.skip("nginx TLS", f"{tool} not installed (apt-get install {pkg})")
            K.done(tap)
    if not tap.ok("critpath is built", os.access(CRITPATH, os.X_OK), f"{CRITPATH} missing"):
        K.done(tap)
    d = K.workdir("nginx_tls_conf")
    kc = K.tls_cert(d)
    if not tap.ok("a self-signed certificate", kc is not None, "openssl req failed"):
        K.done(tap)
    p13, p12 = K.free_port(), K.free_port()
    while p12 == p13:
        p12 = K.free_port()
    with open(os.path.join(d, "nginx.conf"), "w") as f:
        f.write(CONF.format(d=d, key=kc[0], cert=kc[1], p13=p13, p12=p12))
    nginx = K.spawn(["nginx", "-c", os.path.join(d, "nginx.conf"), "-p", d])
    K.wait_port(p13, nginx)
    K.wait_port(p12, nginx)
    rep, path = K.record_workload(tap, "nginx_tls", [nginx.pid],
                                  lambda: drive((p13, p12)), seconds=6)
    K.stop(nginx)
    if rep is None:
        K.done(tap)
    for port, what in ((p13, "TLS 1.3"), (p12, "TLS 1.2")):
        reqs = K.service_requests(rep, port)
        names = collections.Counter(q.get("name") for q in reqs)
        tap.ok(f"nginx {what}: {N} HTTP/2 requests named 'GET /a' ({names['GET /a']})",
               names["GET /a"] == N, f"names {dict(names)}; recording {path}")
        tap.ok(f"nginx {what}: {N} HTTP/1.1 requests named 'GET /b' ({names['GET /b']})",
               names["GET /b"] == N, f"names {dict(names)}; recording {path}")
        other = {k: v for k, v in names.items() if k not in ("GET /a", "GET /b",
                                                             "TLS handshake")}
        tap.ok(f"nginx {what}: no request named otherwise", not other,
               f"names {dict(names)}; recording {path}")
        # 4 connections: their hello flights, and their last flights unless
        # a request came with one
        hs = names["TLS handshake"]
        tap.ok(f"nginx {what}: {hs} TLS handshake exchanges for 4 connections", 4 <= hs <= 8,
               f"names {dict(names)}; recording {path}")
    K.check_tiling(tap, "nginx TLS", rep.get("requests", []))
    K.done(tap)


if __name__ == "__main__":
    main()
