#!/usr/bin/env python3
# SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
"""Three traced tiers with a real proxy in front: nginx (Debian, a master and
two worker processes, an upstream with keep-alive) proxies to kp_server
--mode untraced (2 ms, a call to kp_backend, 2 ms), whose backend sleeps
15 ms. Recorded by the pids of nginx's master (its workers are under it),
kp_server and kp_backend. In each of nginx's requests: the path goes
through all three, kp_server's steps framed with the call nginx made
('kp_server:PORT GET /kp/{n}') on both sides of its own call, the
backend's sleep as the request's own work, nothing unexplained."""
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kpathlib as K  # noqa: E402
from tap import CRITPATH, WORKLOADS, Tap  # noqa: E402

N = 20
MS = K.MS
CONF = """daemon off;
master_process on;
worker_processes 2;
pid {d}/nginx.pid;
error_log {d}/error.log;
events {{ worker_connections 256; }}
http {{
  access_log off;
  client_body_temp_path {d};
  proxy_temp_path {d};
  upstream app {{ server 127.0.0.1:{app}; keepalive 8; }}
  server {{
    listen 127.0.0.1:{port};
    location / {{ proxy_pass http://app; proxy_http_version 1.1;
                 proxy_set_header Connection ""; }}
  }}
}}
"""


def main():
    tap = Tap()
    if not shutil.which("nginx"):
        tap.skip("nginx", "nginx not installed (apt-get install nginx-light)")
        K.done(tap)
    if not tap.ok("critpath is built", os.access(CRITPATH, os.X_OK), f"{CRITPATH} missing"):
        K.done(tap)
    backend, bf = K.start_ready([os.path.join(WORKLOADS, "kp_backend")])
    app, af = K.start_ready([os.path.join(WORKLOADS, "kp_server"), "--mode", "untraced",
                             "--backend", str(bf["port"])])
    d = K.workdir("nginx_conf")
    port = K.free_port()
    with open(os.path.join(d, "nginx.conf"), "w") as f:
        f.write(CONF.format(d=d, app=af["port"], port=port))
    nginx = K.spawn(["nginx", "-c", os.path.join(d, "nginx.conf"), "-p", d])
    K.wait_port(port, nginx)
    rep, path = K.record_workload(tap, "nginx", [nginx.pid, af["pid"], bf["pid"]],
                                  lambda: K.run_client(port, N))
    K.stop(nginx)
    K.stop(app)
    K.stop(backend)
    if rep is None:
        K.done(tap)
    reqs, mid = K.served(tap, "nginx", rep, port, N, path, service="nginx")
    if not reqs:
        K.done(tap)
    tap.ok("nginx: named 'GET /kp/{n}'", all(q.get("name") == "GET /kp/{n}" for q in reqs),
           f"names: {sorted({q.get('name') for q in reqs})}")
    lat = K.median_own_latency(reqs)
    tap.ok(f"nginx: median latency without interference {K.fmt_ms(lat)}, expected ~19 ms",
           K.near(lat, 19), K.describe(mid))
    app_pid = af["pid"]
    cpu = K.median_ns(reqs, lambda g: g.get("pid") == app_pid and g.get("category") == "cpu")
    tap.ok(f"nginx: kp_server's cpu on the path {K.fmt_ms(cpu)}, expected ~4 ms",
           K.near(cpu, 4, abs_ms=1.2), K.describe(mid))
    frame = f"kp_server:{af['port']} GET /kp/{{n}}"
    unnamed = [g.get("frames") for q in reqs for g in q.get("critical_path") or []
               if g.get("pid") == app_pid and frame not in (g.get("frames") or [])]
    tap.ok(f"nginx: every kp_server step framed '{frame}'", not unnamed,
           f"{len(unnamed)} not, e.g. {unnamed[:3]}")
    sleep = K.median_ns(reqs, lambda g: g.get("pid") == bf["pid"] and
                        g.get("category") == "sleep" and K.own(g))
    tap.ok(f"nginx: the backend's sleep, the request's own, {K.fmt_ms(sleep)}, expected "
           "~15 ms", K.near(sleep, 15), K.describe(mid))
    unexpl = K.median_ns(reqs, lambda g: g.get("category") == "unexplained")
    net = K.median_ns(reqs, lambda g: g.get("category") == "network")
    tap.ok(f"nginx: nothing unexplained ({K.fmt_ms(unexpl)}), no blind spot "
           f"({K.fmt_ms(net)})", unexpl <= 1 * MS and net <= 1 * MS, K.describe(mid))
    K.done(tap)


if __name__ == "__main__":
    main()
