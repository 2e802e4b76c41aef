# SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
"""Private ClickHouse servers for the store's tests: each on its own HTTP,
TCP and interserver ports, its data, logs and generated config.xml /
users.xml in a directory of its own, run as an unprivileged user (nobody),
never the system's service. Two or more can run at once; a server can be
given a remote_servers cluster (shards of other Servers) for a Distributed
table. query() runs SQL over HTTP and returns the rows.

    s = Server("a"); s.start(); s.query("SELECT 1") == [["1"]]; s.stop()

Debian 12's clickhouse-server (18.16) is the one `make deps` installs; an
upstream single binary (`clickhouse server`) is used when that is all there
is. Debian's took 0.5-0.6 s to answer /ping here on a fresh data directory
and about as long after a restart; START_TIMEOUT leaves room for a loaded
CI machine."""
import atexit
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from xml.sax.saxutils import escape

START_TIMEOUT = 60.0
STOP_TIMEOUT = 30.0
_servers = []


def binary():
    """The server's argv prefix, or None when ClickHouse is not installed."""
    for path in ("/usr/sbin/clickhouse-server", "/usr/bin/clickhouse-server"):
        if os.access(path, os.X_OK):
            return [path]
    found = shutil.which("clickhouse-server")
    if found:
        return [found]
    found = shutil.which("clickhouse")
    return [found, "server"] if found else None


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _cleanup():
    for s in list(_servers):
        s.stop()


atexit.register(_cleanup)


class ClickHouseError(RuntimeError):
    pass


def _unescape(field):
    """A TabSeparated field as its text (\\N: None)."""
    if field == "\\N":
        return None
    if "\\" not in field:
        return field
    out, i = [], 0
    table = {"t": "\t", "n": "\n", "r": "\r", "0": "\0", "b": "\b", "f": "\f",
             "a": "\a", "v": "\v"}
    while i < len(field):
        c = field[i]
        if c == "\\" and i + 1 < len(field):
            out.append(table.get(field[i + 1], field[i + 1]))
            i += 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


def query(http_port, sql, host="127.0.0.1", timeout=60, user=None, password=None):
    """Runs sql on the server at http_port: its rows (lists of str, None for
    NULL; Array fields as ClickHouse writes them, "['a','b']"). Raises
    ClickHouseError with the server's message, OSError when not reached."""
    req = urllib.request.Request(f"http://{host}:{http_port}/?wait_end_of_query=1",
                                 data=sql.encode(), method="POST")
    if user is not None:
        req.add_header("X-ClickHouse-User", user)
        req.add_header("X-ClickHouse-Key", password or "")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            body = r.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as e:
        raise ClickHouseError(f"{sql[:200]}: HTTP {e.code}: "
                              f"{e.read().decode('utf-8', 'replace').strip()[:1000]}")
    return [[_unescape(f) for f in line.split("\t")] for line in body.split("\n") if line]


def scalar(http_port, sql, **kw):
    rows = query(http_port, sql, **kw)
    return rows[0][0] if rows and rows[0] else None


class Server:
    """One private server. Ports are chosen at creation, so servers can name
    each other in clusters before any starts."""

    def __init__(self, name="ch", workdir=None, user="nobody", clusters=None,
                 users=None):
        self.name = name
        self.dir = workdir or tempfile.mkdtemp(prefix=f"critpath-ch-{name}-")
        self.own_dir = workdir is None
        self.http_port, self.tcp_port, self.inter_port = free_port(), free_port(), free_port()
        self.user = user
        self.clusters = clusters or {}
        # extra users: {name: password}
        self.users = users or {}
        self.proc = None
        self.start_seconds = None
        _servers.append(self)

    # --- configuration ---
    def _cluster_xml(self):
        """remote_servers: {cluster: [[server or (host, tcp_port), ...], ...]}
        (shards, each a list of replicas)."""
        parts = []
        for cname, shards in self.clusters.items():
            parts.append(f"<{cname}>")
            for shard in shards:
                parts.append("<shard>")
                for rep in shard:
                    host, port = ((rep[0], rep[1]) if isinstance(rep, tuple)
                                  else ("127.0.0.1", rep.tcp_port))
                    parts.append(f"<replica><host>{escape(host)}</host>"
                                 f"<port>{port}</port></replica>")
                parts.append("</shard>")
            parts.append(f"</{cname}>")
        return "".join(parts)

    def _write_config(self):
        d, data = self.dir, os.path.join(self.dir, "data")
        for sub in ("data", "data/tmp", "data/user_files", "data/format_schemas", "log"):
            os.makedirs(os.path.join(d, sub), exist_ok=True)
        config = f"""<?xml version="1.0"?>
<yandex>
  <logger>
    <level>warning</level>
    <log>{d}/log/server.log</log>
    <errorlog>{d}/log/error.log</errorlog>
    <size>10M</size><count>2</count>
  </logger>
  <listen_host>127.0.0.1</listen_host>
  <http_port>{self.http_port}</http_port>
  <tcp_port>{self.tcp_port}</tcp_port>
  <interserver_http_port>{self.inter_port}</interserver_http_port>
  <interserver_http_host>127.0.0.1</interserver_http_host>
  <path>{data}/</path>
  <tmp_path>{data}/tmp/</tmp_path>
  <user_files_path>{data}/user_files/</user_files_path>
  <format_schema_path>{data}/format_schemas/</format_schema_path>
  <users_config>users.xml</users_config>
  <default_profile>default</default_profile>
  <default_database>default</default_database>
  <timezone>UTC</timezone>
  <max_concurrent_queries>50</max_concurrent_queries>
  <mark_cache_size>67108864</mark_cache_size>
  <uncompressed_cache_size>67108864</uncompressed_cache_size>
  <remote_servers>{self._cluster_xml()}</remote_servers>
</yandex>
"""
        extra = "".join(
            f"<{escape(u)}><password>{escape(p)}</password><networks><ip>127.0.0.1</ip>"
            f"<ip>::1</ip></networks><profile>default</profile><quota>default</quota>"
            f"</{escape(u)}>" for u, p in self.users.items())
        users = f"""<?xml version="1.0"?>
<yandex>
  <profiles><default><max_memory_usage>2000000000</max_memory_usage></default></profiles>
  <users>
    <default><password></password><networks><ip>127.0.0.1</ip><ip>::1</ip></networks>
      <profile>default</profile><quota>default</quota></default>
    {extra}
  </users>
  <quotas><default><interval><duration>3600</duration><queries>0</queries><errors>0</errors>
    <result_rows>0</result_rows><read_rows>0</read_rows><execution_time>0</execution_time>
  </interval></default></quotas>
</yandex>
"""
        with open(os.path.join(d, "config.xml"), "w") as f:
            f.write(config)
        with open(os.path.join(d, "users.xml"), "w") as f:
            f.write(users)
        pw = pwd.getpwnam(self.user)
        os.chmod(d, 0o755)  # the user walks into it
        for root, dirs, files in os.walk(d):
            for n in dirs + files:
                os.chown(os.path.join(root, n), pw.pw_uid, pw.pw_gid)
        os.chown(d, pw.pw_uid, pw.pw_gid)

    # --- life ---
    def _demote(self):
        pw = pwd.getpwnam(self.user)
        os.setgroups([])
        os.setgid(pw.pw_gid)
        os.setuid(pw.pw_uid)
        os.setsid()  # its own group: stop() signals the server alone

    def start(self, timeout=START_TIMEOUT):
        """Starts the server and waits until /ping answers. Raises
        RuntimeError (with the end of its log) when it does not."""
        argv = binary()
        if not argv:
            raise RuntimeError("ClickHouse is not installed (clickhouse-server: make deps)")
        if self.proc and self.proc.poll() is None:
            return
        self._write_config()
        t0 = time.time()
        self.out = open(os.path.join(self.dir, "log", "stdout.log"), "ab")
        self.proc = subprocess.Popen(
            argv + [f"--config-file={self.dir}/config.xml"], cwd=self.dir,
            stdout=self.out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            preexec_fn=self._demote if os.getuid() == 0 else None)
        while time.time() - t0 < timeout:
            if self.proc.poll() is not None:
                raise RuntimeError(f"clickhouse {self.name} exited with {self.proc.returncode}:"
                                   f" {self.log_tail()}")
            if self.ping():
                self.start_seconds = time.time() - t0
                return
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"clickhouse {self.name}: /ping not answered after {timeout} s: "
                           f"{self.log_tail()}")

    def ping(self):
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.http_port}/ping",
                                        timeout=1) as r:
                return r.read().strip() == b"Ok."
        except (OSError, urllib.error.URLError):
            return False

    def stop(self, kill=False):
        """SIGTERM (SIGKILL with kill, or after STOP_TIMEOUT), waited for."""
        p = self.proc
        if not p or p.poll() is not None:
            return
        try:
            os.kill(p.pid, signal.SIGKILL if kill else signal.SIGTERM)
            p.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            os.kill(p.pid, signal.SIGKILL)
            p.wait()
        except ProcessLookupError:
            pass
        self.out.close()

    def remove(self):
        """Stopped, and its directory removed (the one it made)."""
        self.stop()
        if self.own_dir:
            shutil.rmtree(self.dir, ignore_errors=True)
        if self in _servers:
            _servers.remove(self)

    def log_tail(self, n=20):
        text = ""
        for f in ("log/error.log", "log/stdout.log"):
            try:
                with open(os.path.join(self.dir, f), errors="replace") as fh:
                    text += "".join(fh.readlines()[-n:])
            except OSError:
                pass
        return text[-3000:]

    # --- use ---
    def url(self, db):
        return f"clickhouse://127.0.0.1:{self.http_port}/{db}"

    def query(self, sql, **kw):
        return query(self.http_port, sql, **kw)

    def scalar(self, sql, **kw):
        return scalar(self.http_port, sql, **kw)
