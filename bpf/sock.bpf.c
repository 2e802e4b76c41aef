// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/* Socket programs: transfers, TCP state changes, arrivals, io_uring, and the
 * calls syscalls.bpf.c hands over. Every kernel_cast() caller is here. */
#include "sock_record.bpf.h"
#include "uring.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* The target (tgid, 0: none) listening on a local TCP port. */
__u32 listen_tgid[65536];
/* The same for an unconnected UDP port: datagrams known before any call. */
__u32 udp_tgid[65536];
/* the io_uring programs are attached (uring_take) */
const volatile __u8 cfg_uring = 0;

/* sock_emit, global: verified once, not again along every path of the
 * programs calling it. */
__noinline int cp_sock_emit(struct cp_inflight *in, long ret, struct cp_sock_state *st,
			    struct cp_tls_slot *tls, __u32 unsent)
{
	if (!in)
		return 0;
	return sock_emit(in, ret, st, tls, unsent);
}

/* A write's bytes that all left in one packet during the call: their
 * departure stamp (a time before they can have arrived) as the call's time,
 * where the record's time would be after they left. */
static __always_inline void sent_at(struct tcp_sock *tp, int ret, __u32 unsent,
				    struct cp_inflight *in)
{
	__u64 dep = tcp_departure_ns(tp);

	if (unsent || !dep || dep > in->ts || in->ts - dep > 1000000 || ret > tp->mss_cache)
		return;
	in->ts = dep;
	in->sent_at = 1;
}

/* The default capture's transfers (sock_send/recv_length run only on socket
 * I/O): call, fd and buffer from the syscall registers or an io_uring request;
 * others (sendfile) are reads or writes with fd -1. Failures go unrecorded. */
static __always_inline int on_sock_io(struct sock *sk, int ret, int flags, int dir)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct task_struct *task;
	struct cp_inflight in = {};
	struct cp_sock_state *st;
	struct pt_regs *regs;
	__u32 unsent = 0;
	__u64 blocked, sent = 0, now;
	__u16 code;

	if (!tgid_is_target(id >> 32))
		return 0;
	task = bpf_get_current_task_btf();
	regs = (struct pt_regs *)bpf_task_pt_regs(task);
	code = syscall_code(regs_syscall(regs));
	if (code >> 8 == INFLIGHT_SOCK && call_dir(code & 0xff) == dir) {
		in.call = code & 0xff;
		in.fd = (int)PT_REGS_PARM1_SYSCALL(regs);
		in.arg0 = PT_REGS_PARM2_SYSCALL(regs);
		in.arg1 = PT_REGS_PARM3_SYSCALL(regs);
	} else {
		code = 0;
		in.call = dir == SOCK_DIR_READ ? CP_SOCK_READ : CP_SOCK_WRITE;
		in.fd = -1;
	}
	blocked = code ? blk_take((__u32)id, code, in.fd) : 0;
	if (ret < 0 || (ret == 0 && dir == SOCK_DIR_WRITE))
		return 0; /* an io_uring request's EAGAIN: it is retried later */
	if (!code && cfg_uring)
		sent = uring_take(sk, dir, &in);
	st = bpf_sk_storage_get(&sock_slots, sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
	if (st && !st->tgid)
		st->tgid = id >> 32;
	now = bpf_ktime_get_ns(); /* the call's return, and its record's time */
	in.ts = blocked ? blocked : now;
	in.pid = id >> 32;
	in.kind = INFLIGHT_SOCK;
	in.sk = (__u64)sk;
	sk_read_info(sk, &in);
	if (dir == SOCK_DIR_WRITE && in.sock_type == SOCK_DGRAM && !in.rport &&
	    (in.family == AF_INET || in.family == AF_INET6)) {
		if (code)
			udp_dest(&in, PT_REGS_PARM5_SYSCALL(regs));
		else if (sent) /* an io_uring send's or sendmsg's own destination */
			uring_dest(&in, (struct io_kiocb *)sent);
	}
	if (dir == SOCK_DIR_READ && in.sock_type == SOCK_DGRAM)
		udp_read_from(&in, !in.rport && (in.family == AF_INET || in.family == AF_INET6));
	if (sk_is_tcp(true, sk, in.family)) {
		struct tcp_sock *tp = kernel_cast(sk, struct tcp_sock);

		/* the call's first byte, as the raw_syscalls capture has it */
		if (dir == SOCK_DIR_WRITE) {
			in.tcp_seq = tp->write_seq - ret;
			unsent = tp->write_seq - tp->snd_nxt;
			if (!blocked)
				sent_at(tp, ret, unsent, &in);
		} else {
			in.tcp_seq = tp->copied_seq - (flags & MSG_PEEK ? 0 : ret);
		}
	}
	in.peek = dir == SOCK_DIR_READ && (flags & MSG_PEEK);
	if (dir == SOCK_DIR_READ && code)
		go_read_conn(regs, id >> 32, &in);
	in.rec_ts = now;
	return cp_sock_emit(&in, ret, st, tls_current((__u32)id, dir, &in), unsent);
}

SEC("tp_btf/sock_send_length")
int BPF_PROG(sock_send_length_btf, struct sock *sk, int ret, int flags)
{
	EMPTY_GUARD();
	return on_sock_io(sk, ret, flags, SOCK_DIR_WRITE);
}

SEC("tp_btf/sock_recv_length")
int BPF_PROG(sock_recv_length_btf, struct sock *sk, int ret, int flags)
{
	EMPTY_GUARD();
	return on_sock_io(sk, ret, flags, SOCK_DIR_READ);
}

/* TCP state changes instead of syscall hooks: listen() records the port, a
 * close() or shutdown() sending FIN or RST becomes its record. Connects,
 * accepts and Unix-domain closes go unrecorded. */
static __always_inline int on_set_state(struct sock *sk, int old, int new)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	__u16 lport = sk->__sk_common.skc_num;
	struct cp_inflight in = {};
	struct cp_sock_state *st;
	struct pt_regs *regs;
	__u16 code;

	if (sk->sk_protocol != IPPROTO_TCP)
		return 0;
	switch (new) {
	case TCP_LISTEN:
		if (tgid_is_target(tgid))
			listen_tgid[lport] = tgid;
		return 0;
	case TCP_ESTABLISHED:
		if (old != TCP_SYN_RECV)
			return 0;
		tgid = listen_tgid[lport];
		if (!tgid || !tgid_is_target(tgid))
			return 0;
		st = bpf_sk_storage_get(&sock_slots, sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
		if (st && !st->tgid)
			st->tgid = tgid;
		return 0;
	case TCP_FIN_WAIT1:
	case TCP_LAST_ACK:
	case TCP_CLOSE:
		break;
	default:
		return 0;
	}
	if (old == TCP_LISTEN) {
		if (listen_tgid[lport] == tgid)
			listen_tgid[lport] = 0;
		return 0;
	}
	/* the call's own socket (locked), not loopback's other end or a peer's FIN */
	if (!tgid_is_target(tgid) || (old != TCP_ESTABLISHED && old != TCP_CLOSE_WAIT) ||
	    !sk->sk_lock.owned)
		return 0;
	regs = (struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf());
	code = syscall_code(regs_syscall(regs));
	if (code == (INFLIGHT_SOCK << 8 | CP_SOCK_CLOSE) ||
	    code == (INFLIGHT_SOCK << 8 | CP_SOCK_SHUTDOWN)) {
		in.call = code & 0xff;
		in.fd = (int)PT_REGS_PARM1_SYSCALL(regs);
	} else if (!cfg_uring || !uring_end_take(sk, &in)) {
		return 0;
	}
	in.ts = bpf_ktime_get_ns();
	in.pid = tgid;
	in.kind = INFLIGHT_SOCK;
	in.sk = (__u64)sk;
	sk_read_info(sk, &in);
	in.rec_ts = in.ts;
	return sock_emit(&in, 0, NULL, NULL, 0); /* inline: mostly constants */
}

SEC("tp_btf/inet_sock_set_state")
int BPF_PROG(inet_sock_set_state_btf, const struct sock *sk, const int oldstate, const int newstate)
{
	EMPTY_GUARD();
	return on_set_state((struct sock *)sk, oldstate, newstate);
}

/* A target's socket, by its state or a listening port: one load for others. */
static __always_inline bool lean_sock_known(struct sock *sk)
{
	__u16 family = sk->__sk_common.skc_family;
	struct cp_sock_state *st;
	__u32 tgid;

	if (family != AF_INET && family != AF_INET6)
		return false;
	/* a socket with no storage at all (most of a host's): no helper call */
	if (sk->sk_bpf_storage && bpf_sk_storage_get(&sock_slots, sk, 0, 0))
		return true;
	if (sk->sk_protocol == IPPROTO_UDP)
		tgid = udp_tgid[sk->__sk_common.skc_num];
	else
		tgid = listen_tgid[sk->__sk_common.skc_num];
	if (!tgid || !tgid_is_target(tgid))
		return false;
	st = bpf_sk_storage_get(&sock_slots, sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
	if (st && !st->tgid)
		st->tgid = tgid;
	return true;
}

/* Data arrived on a socket a target touched (softirq context, usually). */
static __always_inline int on_data_ready(bool btf, struct sock *sk)
{
	__u64 key = (__u64)sk;
	struct cp_ev_sk_data_ready *e;
	struct cp_inflight info = {};
	struct cp_stage *stg;

	if (btf && cfg_lean) {
		if (!lean_sock_known(sk))
			return 0;
	} else if (!bpf_map_lookup_elem(&sock_states, &key)) {
		return 0;
	}
	e = ev_stage(&stg, CP_EV_SK_DATA_READY, sizeof(*e), bpf_ktime_get_ns());
	if (!e)
		return 0;
	sk_info(btf, sk, &info);
	e->protocol = KREAD(btf, sk, sk_protocol);
	if (e->protocol == IPPROTO_UDP)
		udp_arrival(btf, sk, &info);
	e->family = info.family;
	e->lport = info.lport;
	e->rport = info.rport;
	e->__pad = 0;
	e->__pad2 = 0;
	if (!sk_is_tcp(btf, sk, info.family))
		e->rcv_nxt = 0;
	else if (btf)
		e->rcv_nxt = kernel_cast(sk, struct tcp_sock)->rcv_nxt;
	else
		e->rcv_nxt = BPF_CORE_READ((struct tcp_sock *)sk, rcv_nxt);
	__builtin_memcpy(e->laddr, info.laddr, CP_ADDR_LEN);
	__builtin_memcpy(e->raddr, info.raddr, CP_ADDR_LEN);
	stage_commit(stg, &e->h, sizeof(*e));
	return 0;
}

SEC("tp_btf/sk_data_ready")
int BPF_PROG(sk_data_ready_btf, struct sock *sk)
{
	EMPTY_GUARD();
	return on_data_ready(true, sk);
}

SEC("raw_tp/sk_data_ready")
int BPF_PROG(sk_data_ready_raw, struct sock *sk)
{
	EMPTY_GUARD();
	return on_data_ready(false, sk);
}

/* extra: recvfrom's flags, else the 5th argument (sendto's dest_addr). */
static __always_inline int sock_enter(int fd, __u64 buf, __u64 len, __u64 extra, __u8 call)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct cp_inflight in = {};
	struct sock *sk;
	int dir;

	sk = fd_sock(fd);
	if (!sk)
		return 0;
	in.ts = bpf_ktime_get_ns();
	in.pid = id >> 32;
	in.fd = fd;
	in.kind = INFLIGHT_SOCK;
	in.call = call;
	in.arg0 = buf;
	in.arg1 = len;
	in.arg2 = call == CP_SOCK_RECVFROM ? 0 : extra;
	in.peek = (call == CP_SOCK_RECVFROM && (extra & MSG_PEEK)) ||
		  (call == CP_SOCK_RECVMSG && (len & MSG_PEEK));
	in.sk = (__u64)sk;
	sk_read_info(sk, &in);
	dir = call_dir(call);
	if (dir != SOCK_DIR_NONE && sk_is_tcp(true, sk, in.family)) {
		struct tcp_sock *tp = kernel_cast(sk, struct tcp_sock);

		/* the call's first byte: snd_nxt is behind it while bytes
		 * written before are still unsent (Nagle, a full window) */
		in.tcp_seq = dir == SOCK_DIR_WRITE ? tp->write_seq : tp->copied_seq;
	}
	/* known to sk_data_ready before data arrives for this call */
	sock_track(sk, id >> 32);
	inflight_put(&in);
	return 0;
}

static __always_inline int sock_exit(struct cp_inflight *in, long ret)
{
	struct cp_sock_state *st = NULL;
	struct sock *sk;
	__u8 call;
	int dir;

	if (!in)
		return 0;
	if (in->kind != INFLIGHT_SOCK)
		goto out;
	call = in->call;
	sk = sk_ptr(in->sk);
	if ((call == CP_SOCK_ACCEPT || call == CP_SOCK_ACCEPT4) && ret >= 0) {
		/* the new connection is what the call is about */
		sk = fd_sock(ret);
		if (sk) {
			sk_read_info(sk, in);
			sock_track(sk, in->pid);
		}
		in->fd = ret;
	} else if (call == CP_SOCK_CONNECT) {
		sk_read_info(sk, in); /* the local port exists now */
	} else if (call == CP_SOCK_CLOSE && ret == 0) {
		__u64 key = in->sk;

		bpf_map_delete_elem(&sock_states, &key);
	}

	/* A payload only where protocol detection needs it: the first transfer
	 * after a turn of direction (decided at exit), or after a short one. */
	dir = call_dir(call);
	if (ret > 0 && dir == SOCK_DIR_WRITE && in->sock_type == SOCK_DGRAM && !in->rport &&
	    (in->family == AF_INET || in->family == AF_INET6)) {
		/* a socket's first send binds it: its port exists now */
		if (!in->lport)
			sk_read_info(sk, in);
		udp_dest(in, in->arg2);
	}
	if (dir == SOCK_DIR_READ && in->sock_type == SOCK_DGRAM) {
		bool inet = in->family == AF_INET || in->family == AF_INET6;

		udp_read_from(in, ret >= 0 && !in->rport && inet);
	}
	if (ret > 0 && dir != SOCK_DIR_NONE && cfg_payload_bytes) {
		__u64 key = in->sk;

		st = bpf_map_lookup_elem(&sock_states, &key);
	}
	return cp_sock_emit(in, ret, st, tls_current((__u32)bpf_get_current_pid_tgid(), dir, in),
			    dir == SOCK_DIR_WRITE && ret > 0 ? tcp_unsent(sk, in->family) : 0);
out:
	inflight_done(in);
	return 0;
}

/* epoll/poll/select: only the interval matters. */
static __always_inline int poll_enter(__u8 call)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct cp_inflight in = {};

	in.ts = bpf_ktime_get_ns();
	in.pid = id >> 32;
	in.kind = INFLIGHT_POLL;
	in.call = call;
	inflight_put(&in);
	return 0;
}

static __always_inline int poll_exit(struct cp_inflight *in, long ret)
{
	struct cp_ev_poll *e;

	if (!in)
		return 0;
	if (in->kind != INFLIGHT_POLL)
		goto out;
	e = ev_reserve(CP_EV_POLL, sizeof(*e), bpf_ktime_get_ns());
	if (!e)
		goto out;
	e->enter_ts = in->ts;
	e->ret = ret;
	e->phase = CP_PHASE_EXIT;
	e->call = in->call;
	__builtin_memset(e->__pad, 0, sizeof(e->__pad));
	ev_submit(e);
out:
	inflight_done(in);
	return 0;
}

/* Entry points for the raw_syscalls programs (syscalls.bpf.c). */
__noinline int cp_sock_enter(__u32 call, __u64 fd, __u64 buf, __u64 len, __u64 extra)
{
	if (call == CP_SOCK_CLOSE || call == CP_SOCK_SHUTDOWN)
		buf = len = 0; /* close(fd), shutdown(fd, how) */
	return sock_enter((int)fd, buf, len, extra, call);
}

__noinline int cp_sock_exit(struct cp_inflight *in, __s64 ret)
{
	return sock_exit(in, ret);
}

__noinline int cp_poll_enter(__u32 call)
{
	return poll_enter(call);
}

__noinline int cp_poll_exit(struct cp_inflight *in, __s64 ret)
{
	return poll_exit(in, ret);
}

SEC("tp_btf/io_uring_submit_req")
int BPF_PROG(io_uring_submit_req_btf, struct io_kiocb *req)
{
	EMPTY_GUARD();
	return uring_note(req, true);
}

SEC("raw_tp/io_uring_submit_req")
int BPF_PROG(io_uring_submit_req_raw, struct io_kiocb *req)
{
	EMPTY_GUARD();
	return uring_note(req, true);
}

SEC("tp_btf/io_uring_task_add")
int BPF_PROG(io_uring_task_add_btf, struct io_kiocb *req, int mask)
{
	EMPTY_GUARD();
	return uring_note(req, false);
}

SEC("raw_tp/io_uring_task_add")
int BPF_PROG(io_uring_task_add_raw, struct io_kiocb *req, int mask)
{
	EMPTY_GUARD();
	return uring_note(req, false);
}
