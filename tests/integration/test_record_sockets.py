#!/usr/bin/env python3
# SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
"""The socket metadata of a target with many connections: a process holding
2,000 loopback TCP connections (both ends, 4,000 descriptors) and a
listening socket. `critpath record -p` writes a socket record for every
descriptor with its addresses, the two ends of each connection matching,
and starts in seconds: /proc/PID/net/tcp is read once for the process, not
once per descriptor (that took ~16 s here, quadratic in the connections)."""
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reclib as R  # noqa: E402
from tap import CRITPATH, Tap  # noqa: E402

N = 2000
HOLDER = f"""
import os, socket, sys, time
ls = socket.socket(); ls.bind(("127.0.0.1", 0)); ls.listen(4096)
keep = []
for i in range({N}):
    c = socket.create_connection(ls.getsockname()); s, _ = ls.accept(); keep += [c, s]
print(ls.getsockname()[1], flush=True)
sys.stdin.read()
"""


def main():
    tap = Tap()
    d = tempfile.mkdtemp(prefix="critpath-socks-")
    path = os.path.join(d, "socks.rec")
    holder = subprocess.Popen([sys.executable, "-c", HOLDER], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        port = int(holder.stdout.readline())
        r = R.run_record(["-p", holder.pid, "-d", "0.5", "-o", path], timeout=120)
        tap.ok(f"sockets: critpath record exits 0 ({r.elapsed:.1f} s for a 0.5 s recording "
               f"of a process with {2 * N + 1} sockets)", r.rc == 0, r.describe())
        tap.ok("sockets: the socket table is read once per process: the recording took "
               "under 8 s", r.elapsed < 8, r.describe())
        dump = subprocess.run([CRITPATH, "dump", path, "--json"], capture_output=True,
                              text=True)
        socks = [json.loads(ln) for ln in dump.stdout.splitlines() if '"type":"socket"' in ln
                 or '"type": "socket"' in ln]
        socks = [s for s in socks if s.get("pid") == holder.pid]
        tcp = [s for s in socks if s.get("family") == "AF_INET"]
        listening = [s for s in tcp if s.get("listening")]
        conns = [s for s in tcp if not s.get("listening")]
        tap.ok(f"sockets: {len(tcp)} TCP socket records, one per descriptor "
               f"(want {2 * N + 1})", len(tcp) == 2 * N + 1 and len(socks) == len(tcp),
               f"{len(socks)} socket records, {len(tcp)} AF_INET")
        tap.ok("sockets: the listening one says so, with its port",
               len(listening) == 1 and listening[0].get("lport") == port, listening[:2])
        ends = {(s.get("lport"), s.get("rport")) for s in conns}
        paired = sum(1 for (lp, rp) in ends if (rp, lp) in ends)
        tap.ok(f"sockets: both ends of every connection, addresses matching "
               f"({paired} of {2 * N})", paired == 2 * N and all(
                   s.get("laddr") == "127.0.0.1" and s.get("raddr") == "127.0.0.1"
                   for s in conns), list(ends)[:4])
        fds = [s.get("fd") for s in socks]
        tap.ok("sockets: written in descriptor order", fds == sorted(fds), fds[:10])
    finally:
        holder.stdin.close()
        holder.wait()
        shutil.rmtree(d, ignore_errors=True)
    tap.done()


if __name__ == "__main__":
    main()
