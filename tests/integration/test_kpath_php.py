#!/usr/bin/env python3
# SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
"""A real PHP stack: nginx (Debian's nginx-light, a master and one worker)
in front of php-fpm (Debian's php-fpm, pm = static, 4 children) over a Unix
socket, both configured by the test in a directory of its own, traced by
the pids of their masters (the worker and the children are under them).

Six clients, each on a keep-alive connection of its own, send a shuffled
mix of four kinds of request, 80 of each: /cpu.php burns 10 ms of CPU in
php-fpm, /sleep.php sleeps 20 ms in php-fpm (usleep), /hello.php answers at
once, /static.txt is a file nginx serves itself. nginx opens a new
FastCGI connection to php.sock for every PHP request.

Every request sent must be found as a request of nginx's service, named
by what was sent ('GET /cpu.php'), and no other: no unnamed 'request' and
none with a name that was not sent (a phantom made from php-fpm's or
nginx's other traffic). Each /cpu.php request has php-fpm's 10 ms of cpu on
its path as its own work (a php-fpm child's pid, not interference); each
/sleep.php request has php-fpm's 20 ms sleep on its path; every request
tiles exactly.

Then the same nginx in front of php-cgi -b (PHP's own FastCGI server, the
CGI binary with PHP_FCGI_CHILDREN=2: a parent and two children accepting
on one Unix socket), a shorter mix of the three PHP scripts: counted and
named the same way, tiled exactly, php-cgi's cpu the /cpu.php requests' own.

In both, no /cpu.php or /hello.php request may have the 20 ms sleep of a
PHP process as its own work: that sleep is a /sleep.php request's."""
import glob
import http.client
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kpathlib as K  # noqa: E402
from tap import CRITPATH, Tap  # noqa: E402

MS = K.MS
CLIENTS = 6
PER_KIND = 80
CGI_PER_KIND = 30
KINDS = ("/cpu.php", "/sleep.php", "/hello.php", "/static.txt")
CPU_MS = 10
# a client opens a new keep-alive connection every RECONNECT requests, as
# browsers and balancers do: nginx's descriptors are reused, for client
# connections and for its FastCGI connections alike
RECONNECT = 10
SLEEP_MS = 20

# CPU time, not wall time: on a loaded machine the script still does 10 ms
# of work, however long it waits for a CPU
SCRIPTS = {
    "cpu.php": """<?php
function cpu() { $r = getrusage(); return $r["ru_utime.tv_sec"] + $r["ru_utime.tv_usec"] / 1e6
                 + $r["ru_stime.tv_sec"] + $r["ru_stime.tv_usec"] / 1e6; }
$t0 = cpu(); $x = 0;
while (cpu() - $t0 < %f) { for ($i = 0; $i < 2000; $i++) { $x += $i * $i %% 7; } }
echo "cpu $x\\n";
""" % (CPU_MS / 1000),
    "sleep.php": """<?php
usleep(%d);
echo "slept\\n";
""" % (SLEEP_MS * 1000),
    "hello.php": """<?php
echo "hello\\n";
""",
}
STATIC = "static file\n" * 20

FPM_CONF = """[global]
pid = {d}/php-fpm.pid
error_log = {d}/php-fpm.log
daemonize = no

[kp]
user = root
group = root
listen = {d}/php.sock
listen.mode = 0666
pm = static
pm.max_children = 4
clear_env = no
catch_workers_output = yes
"""

NGINX_CONF = """daemon off;
master_process on;
worker_processes 1;
pid {d}/nginx.pid;
error_log {d}/nginx-error.log;
events {{ worker_connections 256; }}
http {{
  access_log off;
  client_body_temp_path {d};
  fastcgi_temp_path {d};
  proxy_temp_path {d};
  keepalive_requests 10000;
  server {{
    listen 127.0.0.1:{port};
    root {d}/www;
    location = /static.txt {{ }}
    location ~ \\.php$ {{
      fastcgi_pass unix:{sock};
      fastcgi_param SCRIPT_FILENAME $document_root$fastcgi_script_name;
      fastcgi_param QUERY_STRING $query_string;
      fastcgi_param REQUEST_METHOD $request_method;
      fastcgi_param CONTENT_TYPE $content_type;
      fastcgi_param CONTENT_LENGTH $content_length;
      fastcgi_param SCRIPT_NAME $fastcgi_script_name;
      fastcgi_param REQUEST_URI $request_uri;
      fastcgi_param DOCUMENT_URI $document_uri;
      fastcgi_param DOCUMENT_ROOT $document_root;
      fastcgi_param SERVER_PROTOCOL $server_protocol;
      fastcgi_param GATEWAY_INTERFACE CGI/1.1;
      fastcgi_param SERVER_SOFTWARE nginx;
      fastcgi_param REMOTE_ADDR $remote_addr;
      fastcgi_param REMOTE_PORT $remote_port;
      fastcgi_param SERVER_ADDR $server_addr;
      fastcgi_param SERVER_PORT $server_port;
      fastcgi_param SERVER_NAME localhost;
      fastcgi_param REDIRECT_STATUS 200;
    }}
  }}
}}
"""


def php_fpm():
    for name in ("php-fpm", *sorted(os.path.basename(p) for p in
                                    glob.glob("/usr/sbin/php-fpm*"))):
        p = shutil.which(name) or (f"/usr/sbin/{name}" if os.access(f"/usr/sbin/{name}",
                                                                     os.X_OK) else None)
        if p:
            return p
    return None


def write_site(d):
    www = os.path.join(d, "www")
    os.makedirs(www, exist_ok=True)
    for name, text in SCRIPTS.items():
        with open(os.path.join(www, name), "w") as f:
            f.write(text)
    with open(os.path.join(www, "static.txt"), "w") as f:
        f.write(STATIC)


def wait_path(path, proc, timeout=10):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{proc.args[0]} exited with {proc.returncode}")
        if os.path.exists(path):
            return
        time.sleep(0.05)
    raise RuntimeError(f"no {path} after {timeout}s")


def children(pid):
    """The pids of pid's child processes."""
    out = []
    for task in glob.glob(f"/proc/{pid}/task/*/children"):
        try:
            with open(task) as f:
                out += [int(x) for x in f.read().split()]
        except OSError:
            pass
    return out


EXPECT = {"/cpu.php": b"cpu ", "/sleep.php": b"slept", "/hello.php": b"hello",
          "/static.txt": b"static file"}


def drive(port, kinds, per_kind, sent, lock):
    """CLIENTS threads, each on one keep-alive connection, send a shuffled
    mix of per_kind requests of each kind; sent counts the answered ones."""
    work = [k for k in kinds for _ in range(per_kind)]
    random.Random(7).shuffle(work)

    def client(i):
        mine = {}
        conn = None
        try:
            for j, path in enumerate(work[i::CLIENTS]):
                if j % RECONNECT == 0:
                    if conn:
                        conn.close()
                    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
                conn.request("GET", path)
                r = conn.getresponse()
                body = r.read()
                if r.status != 200 or not body.startswith(EXPECT[path]):
                    raise RuntimeError(f"GET {path}: {r.status} {body[:200]!r}")
                mine[path] = mine.get(path, 0) + 1
        finally:
            if conn:
                conn.close()
            with lock:
                for k, v in mine.items():
                    sent[k] = sent.get(k, 0) + v
    K.in_parallel([lambda i=i: client(i) for i in range(CLIENTS)])


def check_requests(tap, what, rep, port, sent, path):
    """The checks every phase makes: count, names, tiling. Returns nginx's
    requests by name."""
    K.check_tiling(tap, what, rep.get("requests", []))
    reqs = K.service_requests(rep, port)
    total = sum(sent.values())
    names = {f"GET {p}" for p in sent}
    by_name = {}
    for q in reqs:
        by_name.setdefault(q.get("name"), []).append(q)
    tap.ok(f"{what}: {len(reqs)} requests of nginx:{port} found, {total} sent",
           total * 0.99 <= len(reqs) <= total * 1.01,
           f"by name: { {k: len(v) for k, v in by_name.items()} }\n"
           f"services: {sorted({q.get('service') for q in rep.get('requests', [])})}\n"
           f"recording {path}")
    for p, n in sorted(sent.items()):
        got = len(by_name.get(f"GET {p}", []))
        tap.ok(f"{what}: {got} 'GET {p}' requests found, {n} sent", n * 0.99 <= got <= n,
               f"by name: { {k: len(v) for k, v in by_name.items()} }")
    unnamed = by_name.get("request", [])
    tap.ok(f"{what}: no unnamed request of nginx ({len(unnamed)} named 'request')",
           not unnamed, "\n".join(K.describe(q, 8) for q in unnamed[:3]))
    phantom = [q for n, qs in by_name.items() if n not in names and n != "request"
               for q in qs]
    tap.ok(f"{what}: no request of nginx with a name that was not sent ({len(phantom)}: "
           f"{sorted({q.get('name') for q in phantom})[:5]})", not phantom,
           "\n".join(K.describe(q, 8) for q in phantom[:3]))
    return by_name


def misplaced_sleep(tap, what, by_name, pids):
    """sleep.php's 20 ms sleep is no /cpu.php or /hello.php request's own
    work (it may be their interference: a child busy with another request)."""
    def own_sleep(q):
        return K.path_ns(q, lambda g: g.get("category") == "sleep" and g.get("pid") in pids
                         and K.own(g))
    bad = [q for n in ("GET /cpu.php", "GET /hello.php") for q in by_name.get(n, [])
           if own_sleep(q) > SLEEP_MS * 0.5 * MS]
    tap.ok(f"{what}: no /cpu.php or /hello.php request has a php {SLEEP_MS} ms sleep as its "
           f"own work ({len(bad)} have)", not bad, "\n".join(K.describe(q, 14) for q in bad[:2]))


def fpm_phase(tap, fpm):
    d = K.workdir("php")
    write_site(d)
    sock = os.path.join(d, "php.sock")
    with open(os.path.join(d, "php-fpm.conf"), "w") as f:
        f.write(FPM_CONF.format(d=d))
    fpmp = K.spawn([fpm, "-F", "-R", "-n", "-y", os.path.join(d, "php-fpm.conf")],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    port = K.free_port()
    with open(os.path.join(d, "nginx.conf"), "w") as f:
        f.write(NGINX_CONF.format(d=d, port=port, sock=sock))
    nginx = K.spawn(["nginx", "-c", os.path.join(d, "nginx.conf"), "-p", d],
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_path(sock, fpmp)
        K.wait_port(port, nginx)
        # the children are forked before the socket is there; wait for 4
        deadline = time.time() + 10
        while len(children(fpmp.pid)) < 4 and time.time() < deadline:
            time.sleep(0.05)
        # one warm-up request of each kind, before the recording
        drive(port, KINDS, 1, {}, threading.Lock())
    except RuntimeError as e:
        log = os.path.join(d, "php-fpm.log")
        tap.ok("php: nginx and php-fpm start and answer", False,
               f"{e}\n{open(log).read()[-1500:] if os.path.exists(log) else ''}")
        K.stop(nginx)
        K.stop(fpmp)
        return
    fpm_pids = {fpmp.pid, *children(fpmp.pid)}
    tap.ok(f"php: php-fpm runs a master and 4 children ({sorted(fpm_pids)})",
           len(fpm_pids) == 5, f"children of {fpmp.pid}: {children(fpmp.pid)}")
    sent, lock, took = {}, threading.Lock(), []

    def load():
        t0 = time.time()
        drive(port, KINDS, PER_KIND, sent, lock)
        took.append(time.time() - t0)
    rep, path = K.record_workload(tap, "php", [nginx.pid, fpmp.pid], load, seconds=8)
    if took:
        print(f"# php: the load took {took[0]:.1f} s of the 8 s recorded", flush=True)
    K.stop(nginx, sig=signal.SIGQUIT)
    K.stop(fpmp, sig=signal.SIGQUIT)
    if rep is None:
        return
    by_name = check_requests(tap, "php", rep, port, sent, path)

    def fpm_cpu(q):
        return K.path_ns(q, lambda g: g.get("category") == "cpu" and g.get("pid") in fpm_pids
                         and K.own(g))
    cpu = by_name.get("GET /cpu.php", [])
    good = [q for q in cpu if fpm_cpu(q) >= CPU_MS * 0.7 * MS]
    bad = sorted((q for q in cpu if q not in good), key=fpm_cpu)
    mid = sorted(fpm_cpu(q) for q in cpu)[len(cpu) // 2] if cpu else 0
    tap.ok(f"php: php-fpm's ~{CPU_MS} ms of cpu on the path as own work in {len(good)} of "
           f"{len(cpu)} /cpu.php requests (median {K.fmt_ms(mid)})",
           cpu and len(good) >= 0.95 * len(cpu),
           "\n".join(K.describe(q, 12) + "\n  frames of the php-fpm steps: " +
                     str(sorted({" ; ".join(g.get("frames") or []) for g in q["critical_path"]
                                 if g.get("pid") in fpm_pids}))
                     for q in bad[:2]))
    # no php-fpm cpu is two requests' own: a child's 10 ms for one request
    # counted for the next would overlap it. (A bound on each request's
    # own cpu would not hold: a child can be on a CPU for 30 ms while its
    # getrusage counts 10, the rest irq time or a hypervisor's.)
    owner, twice = {}, []
    for q in cpu:
        for g in q["critical_path"]:
            if g.get("category") != "cpu" or g.get("pid") not in fpm_pids or not K.own(g):
                continue
            for s, e, other in owner.get(g["tid"], ()):
                if s < g["end_ns"] and g["start_ns"] < e and other is not q:
                    twice.append((other, q))
            owner.setdefault(g["tid"], []).append((g["start_ns"], g["end_ns"], q))
    tap.ok(f"php: no php-fpm cpu is the own work of two /cpu.php requests ({len(twice)} "
           "overlaps)", not twice,
           "\n".join(K.describe(a, 12) + "\n" + K.describe(b, 12) for a, b in twice[:1]))

    def fpm_sleep(q):
        return K.path_ns(q, lambda g: g.get("category") == "sleep" and g.get("pid") in fpm_pids)
    slp = by_name.get("GET /sleep.php", [])
    good = [q for q in slp if fpm_sleep(q) >= SLEEP_MS * 0.8 * MS]
    bad = sorted((q for q in slp if q not in good), key=fpm_sleep)
    tap.ok(f"php: php-fpm's {SLEEP_MS} ms sleep on the path of {len(good)} of {len(slp)} "
           "/sleep.php requests", slp and len(good) >= 0.90 * len(slp),
           "\n".join(K.describe(q, 12) for q in bad[:2]))
    misplaced_sleep(tap, "php", by_name, fpm_pids)
    hello = by_name.get("GET /hello.php", [])
    into = [q for q in hello if any(g.get("pid") in fpm_pids for g in q["critical_path"])]
    tap.ok(f"php: the path of {len(into)} of {len(hello)} /hello.php requests goes into "
           "php-fpm", hello and len(into) >= 0.9 * len(hello),
           "\n".join(K.describe(q, 12) for q in [q for q in hello if q not in into][:2]))
    static = by_name.get("GET /static.txt", [])
    into = [q for q in static if any(g.get("pid") in fpm_pids and K.own(g)
                                     for g in q["critical_path"])]
    tap.ok(f"php: no /static.txt request has php-fpm's work as its own ({len(into)} of "
           f"{len(static)})", not into, "\n".join(K.describe(q, 12) for q in into[:2]))
    slow = [q for q in rep.get("requests", []) if q["latency_ns"] > 500 * MS]
    tap.ok("php: request latencies are plausible (none over 500 ms)", not slow,
           "\n".join(K.describe(q, 8) for q in slow[:3]))


def cgi_phase(tap):
    """nginx in front of php-cgi -b on a Unix socket (a parent and two
    children accepting on it)."""
    cgi = shutil.which("php-cgi")
    if not cgi:
        tap.skip("php-cgi", "php-cgi not installed (apt-get install php-cgi)")
        return
    d = K.workdir("php_cgi")
    write_site(d)
    sock = os.path.join(d, "cgi.sock")
    env = dict(os.environ, PHP_FCGI_CHILDREN="2", PHP_FCGI_MAX_REQUESTS="0")
    cgip = K.spawn([cgi, "-n", "-b", sock], env=env, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    port = K.free_port()
    with open(os.path.join(d, "nginx.conf"), "w") as f:
        f.write(NGINX_CONF.format(d=d, port=port, sock=sock))
    nginx = K.spawn(["nginx", "-c", os.path.join(d, "nginx.conf"), "-p", d],
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    kinds = ("/cpu.php", "/sleep.php", "/hello.php")
    try:
        wait_path(sock, cgip)
        K.wait_port(port, nginx)
        deadline = time.time() + 10
        while len(children(cgip.pid)) < 2 and time.time() < deadline:
            time.sleep(0.05)
        drive(port, kinds, 1, {}, threading.Lock())
    except RuntimeError as e:
        tap.ok("php-cgi: nginx and php-cgi -b start and answer", False, str(e))
        K.stop(nginx)
        K.stop(cgip)
        return
    cgi_pids = {cgip.pid, *children(cgip.pid)}
    sent, lock = {}, threading.Lock()
    rep, path = K.record_workload(tap, "php-cgi", [nginx.pid, cgip.pid],
                                  lambda: drive(port, kinds, CGI_PER_KIND, sent, lock),
                                  seconds=6)
    K.stop(nginx, sig=signal.SIGQUIT)
    K.stop(cgip)
    for c in cgi_pids - {cgip.pid}:
        try:
            os.kill(c, 9)
        except OSError:
            pass
    if rep is None:
        return
    by_name = check_requests(tap, "php-cgi", rep, port, sent, path)
    cpu = by_name.get("GET /cpu.php", [])
    good = [q for q in cpu if K.path_ns(q, lambda g: g.get("category") == "cpu" and
                                        g.get("pid") in cgi_pids and K.own(g))
            >= CPU_MS * 0.7 * MS]
    misplaced_sleep(tap, "php-cgi", by_name, cgi_pids)
    tap.ok(f"php-cgi: php-cgi's ~{CPU_MS} ms of cpu on the path as own work in {len(good)} "
           f"of {len(cpu)} /cpu.php requests", cpu and len(good) >= 0.95 * len(cpu),
           "\n".join(K.describe(q, 12) for q in cpu[:2] if q not in good))


def main():
    tap = Tap()
    fpm = php_fpm()
    if not shutil.which("nginx") or not fpm:
        tap.skip("php", "nginx or php-fpm not installed (apt-get install nginx-light php-fpm)")
        K.done(tap)
    if not tap.ok("critpath is built", os.access(CRITPATH, os.X_OK), f"{CRITPATH} missing"):
        K.done(tap)
    fpm_phase(tap, fpm)
    cgi_phase(tap)
    K.done(tap)


if __name__ == "__main__":
    main()
