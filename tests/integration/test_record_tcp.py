#!/usr/bin/env python3
# SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
"""critpath record -- rec_tcp: a TCP client and server thread over loopback
(tests/workloads/rec_tcp.c). The recording must hold accept and connect with
mirrored 4-tuples (--all-syscalls; by default the first read and send, and
both closes), every send and receive with the byte counts the workload
moved, TCP sequence numbers that line both ends up byte for byte, payload
prefixes equal to the bytes sent (--payload-bytes N truncates, 0 turns them
off), and each blocked read's wakeup attributed to softirq NET_RX right after
an sk_data_ready that names the reader's socket. No drops."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reclib as R  # noqa: E402
from tap import CRITPATH, Tap  # noqa: E402

ROUNDS, REQ, RESP = 10, 300, 200
LOOPBACK = "127.0.0.1"


def message(kind, i, size):
    """The bytes rec_tcp sends (see its header comment)."""
    prefix = f"{kind} {i:04d} ".encode()
    return bytes(prefix[j] if j < len(prefix) else (j * 31 + i * 7) & 0xFF for j in range(size))


def stream(kind, size):
    return b"".join(message(kind, i, size) for i in range(ROUNDS))


def record(tap, name, extra=()):
    """Runs rec_tcp under the recorder; returns (dump, READY fields) or None."""
    path = os.path.join(R.workdir(f"tcp-{name}"), f"tcp-{name}.rec")
    r = R.record_cmd(path, [R.workload("rec_tcp"), ROUNDS, REQ, RESP], extra)
    ready = R.parse_lines(r.out, "READY")
    tap.ok(f"tcp {name}: the workload ran to its end", ready and "DONE" in r.out,
           f"{r.describe()}\nstdout {r.out!r}")
    d = R.check_complete(tap, f"tcp {name}", r.rc, r.err, path, r.cmdline())
    if d is None or not ready:
        return None
    return d, ready[0]


def data_calls(d, tid, calls):
    return [s for s in d.of("sock", tid=tid, phase="exit") if s.get("call") in calls]


def tuple_of(s):
    return (s.get("laddr"), s.get("lport"), s.get("raddr"), s.get("rport"))


def payload_errors(calls, data, limit):
    """Each call's payload is the stream at the call's offset, min(limit,
    bytes) long; returns (errors, calls with a payload)."""
    errs, off, n = [], 0, 0
    for s in calls:
        got = s.get("payload")
        if got is not None:
            n += 1
            want = data[off:off + min(limit, s["bytes"])]
            raw = got.encode("latin-1")
            if raw != want:
                errs.append(f"{s['call']} at stream offset {off}: payload {raw[:40]!r}... "
                            f"({len(raw)} bytes), sent {want[:40]!r}... ({len(want)} bytes)")
        off += max(s["bytes"], 0)
    return errs, n


def check_tuples(tap, name, d, ready, full=False):
    """--all-syscalls: the accept and the connect, with mirrored 4-tuples.
    The default capture records neither (kpath tells the sides apart by
    listening port and who spoke first): the server's first read and the
    client's first send then, and each side's close, which it records."""
    port, srv, cli = ready["port"], ready["server"], ready["client"]
    if full:
        acc = [s for s in data_calls(d, srv, ("accept", "accept4")) if s["bytes"] >= 0]
        con = data_calls(d, cli, ("connect",))
        what = "accept (server thread) and one connect (client thread)"
    else:
        acc = data_calls(d, srv, ("read",))[:1]
        con = data_calls(d, cli, ("sendto",))[:1]
        what = "first read (server thread) and one first send (client thread)"
        closes = (data_calls(d, srv, ("close",)), data_calls(d, cli, ("close",)))
    if not tap.ok(f"tcp {name}: one {what}", len(acc) == 1 and len(con) == 1,
                  f"first {acc}\nsecond {con}"):
        return None
    a, c = acc[0], con[0]
    cport = c.get("lport")
    tap.ok(f"tcp {name}: the server side's 4-tuple is {LOOPBACK}:{port} <- {LOOPBACK}:{cport}, "
           "the client's its mirror, both AF_INET stream",
           tuple_of(a) == (LOOPBACK, port, LOOPBACK, cport) and cport
           and tuple_of(c) == (LOOPBACK, cport, LOOPBACK, port)
           and (not full or c["bytes"] == 0)
           and a.get("family") == c.get("family") == "AF_INET"
           and a.get("sock_type") == c.get("sock_type") == "stream",
           f"server {a}\nclient {c}")
    if not full:
        tap.ok(f"tcp {name}: each side's close is recorded with its fd and 4-tuple",
               [(tuple_of(x), x["fd"], x["bytes"]) for x in closes[0]] == [(tuple_of(a), a["fd"], 0)]
               and [(tuple_of(x), x["fd"], x["bytes"]) for x in closes[1]]
               == [(tuple_of(c), c["fd"], 0)], f"server {closes[0]}\nclient {closes[1]}")
    return a, c


def check_bytes(tap, name, d, ready, a, c):
    srv, cli = ready["server"], ready["client"]
    sends = data_calls(d, cli, ("sendto",))
    reads = [s for s in data_calls(d, srv, ("read",)) if s["bytes"] > 0]
    writes = data_calls(d, srv, ("write",))
    recvs = [s for s in data_calls(d, cli, ("recvfrom",)) if s["bytes"] > 0]
    tap.ok(f"tcp {name}: {ROUNDS} sends of {REQ} bytes by the client, {ROUNDS} writes of {RESP} by "
           "the server",
           [s["bytes"] for s in sends] == [REQ] * ROUNDS
           and [s["bytes"] for s in writes] == [RESP] * ROUNDS,
           f"send bytes {[s['bytes'] for s in sends]}\nwrite bytes "
           f"{[s['bytes'] for s in writes]}")
    tap.ok(f"tcp {name}: the server read {ROUNDS * REQ} bytes, the client received {ROUNDS * RESP}",
           sum(s["bytes"] for s in reads) == ROUNDS * REQ
           and sum(s["bytes"] for s in recvs) == ROUNDS * RESP,
           f"read {[s['bytes'] for s in reads]}\nrecv {[s['bytes'] for s in recvs]}")
    bad = [s for s in sends + recvs if tuple_of(s) != tuple_of(c) or s["fd"] != c["fd"]]
    bad += [s for s in reads + writes if tuple_of(s) != tuple_of(a) or s["fd"] != a["fd"]]
    tap.ok(f"tcp {name}: every send/receive carries its connection's fd and 4-tuple", not bad,
           f"e.g. {bad[:3]}")
    for what, snd, rcv, size in (("requests", sends, reads, REQ),
                                 ("responses", writes, recvs, RESP)):
        offs, o = [], 0
        for s in snd:
            offs.append((s.get("tcp_seq", -1) - o) % 2**32)
            o += s["bytes"]
        roffs, o = [], 0
        for s in rcv:
            roffs.append((s.get("tcp_seq", -1) - o) % 2**32)
            o += s["bytes"]
        tap.ok(f"tcp {name}: {what}: the sender's and the reader's tcp_seq line up byte for byte",
               len(set(offs + roffs)) == 1,
               f"sequence minus stream offset: sender {sorted(set(offs))}, reader "
               f"{sorted(set(roffs))}")
    return sends, reads, writes, recvs


def check_payloads(tap, name, calls, limit):
    sends, reads, writes, recvs = calls
    errs, n = [], 0
    for cl, data in ((sends, stream("REQ", REQ)), (reads, stream("REQ", REQ)),
                     (writes, stream("RSP", RESP)), (recvs, stream("RSP", RESP))):
        e, k = payload_errors(cl, data, limit)
        errs += e
        n += k
    if limit == 0:
        tap.ok(f"tcp {name}: no payload in any record", n == 0, f"{n} records carry payload")
        return
    # every call here is the first after a change of direction: all carry one
    missing = [s for s in sends + writes if "payload" not in s]
    tap.ok(f"tcp {name}: every send and write carries a payload", not missing,
           f"{len(missing)} without, e.g. {missing[:2]}")
    tap.ok(f"tcp {name}: {n} payloads, each the first min({limit}, bytes) bytes of what "
           "was sent at that point of the stream", n >= 2 * ROUNDS and not errs,
           "\n".join(errs[:6]))


def check_wakeups(tap, d, reader, readers_calls, a_tuple, who, need):
    """Each blocked read: one wakeup, softirq NET_RX, after an sk_data_ready
    of the reader's own socket (lport/rport from its side). need: how many
    reads must have slept (the server's do, 20 ms before each request; the
    client's only when the response is not there yet)."""
    ready_evs = d.of("sk_data_ready")
    woken, bad = 0, []
    for s in readers_calls:
        wk = R.waking_in(d, reader, s["enter_ns"], s["ts_ns"])
        if not wk:
            continue  # the data was there before the read: no sleep
        woken += 1
        w = wk[0]
        before = [e for e in ready_evs if s["enter_ns"] <= e["ts_ns"] <= w["ts_ns"]]
        last = before[-1] if before else None
        if (len(wk) != 1 or w.get("waker_ctx") != "softirq:NET_RX" or last is None
                or tuple_of(last) != a_tuple):
            bad.append(f"read {s}\n  wakings {wk}\n  last sk_data_ready before {last}")
    tap.ok(f"tcp: {who}: {woken} of {len(readers_calls)} reads slept; each woken once by "
           "softirq:NET_RX right after sk_data_ready of its own socket",
           woken >= need and not bad,
           f"{len(bad)} differ:\n" + "\n".join(bad[:3]))


def check_hooks(tap, name, d, want, not_want):
    """The recording's hook list: which capture ran."""
    attached = {h.get("name") for h in d.of("hook") if h.get("status") == "attached"}
    tap.ok(f"tcp {name}: hooks {sorted(want)} attached, {sorted(not_want)} not",
           want <= attached and not (not_want & attached), f"attached: {sorted(attached)}")


def main():
    tap = Tap()
    if not tap.ok("critpath is built", os.access(CRITPATH, os.X_OK), f"{CRITPATH} missing"):
        R.done(tap)
    got = record(tap, "default")
    if got:
        d, ready = got
        tap.ok("tcp: header says payload_bytes 128 (the default)",
               d.header.get("payload_bytes") == 128, f"header {d.header}")
        ac = check_tuples(tap, "default", d, ready)
        if ac:
            a, c = ac
            calls = check_bytes(tap, "default", d, ready, a, c)
            check_payloads(tap, "default", calls, 128)
            check_wakeups(tap, d, ready["server"], calls[1], tuple_of(a), "server",
                          ROUNDS // 2)
            check_wakeups(tap, d, ready["client"], calls[3], tuple_of(c), "client", 0)
        check_hooks(tap, "default", d, {"sock_send_length", "sock_recv_length",
                                         "inet_sock_set_state"}, {"sys_enter", "sys_exit"})
    for limit in (16, 0, "all-syscalls"):
        if limit == "all-syscalls":
            got = record(tap, "all-syscalls", ["--all-syscalls"])
            if got:
                d, ready = got
                check_hooks(tap, "all-syscalls", d, {"sys_enter", "sys_exit"},
                            {"sock_send_length", "inet_sock_set_state"})
                ac = check_tuples(tap, "all-syscalls", d, ready, full=True)
                if ac:
                    a, c = ac
                    calls = check_bytes(tap, "all-syscalls", d, ready, a, c)
                    check_payloads(tap, "all-syscalls", calls, 128)
                    check_wakeups(tap, d, ready["server"], calls[1], tuple_of(a), "server",
                                  ROUNDS // 2)
            continue
        got = record(tap, f"payload-{limit}", ["--payload-bytes", limit])
        if not got:
            continue
        d, ready = got
        tap.ok(f"tcp payload-{limit}: header says payload_bytes {limit}",
               d.header.get("payload_bytes") == limit, f"header {d.header}")
        name = f"payload-{limit}"
        ac = check_tuples(tap, name, d, ready)
        if ac:
            check_payloads(tap, name, check_bytes(tap, name, d, ready, *ac), limit)
    R.done(tap)


if __name__ == "__main__":
    main()
