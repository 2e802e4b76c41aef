// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/*
 * Socket syscalls of target threads (socket fds only, checked here: fd →
 * file → inode is a socket), epoll/poll/select waits, and sk_data_ready for
 * the sockets a target touched. One record per call, at exit, with enter_ts.
 * The calls are reached from the raw_syscalls programs (syscalls.bpf.c)
 * through cp_sock_enter/exit and cp_poll_enter/exit.
 */
#include "blocked.h"
#include "tls.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

#define AF_UNIX 1
/* unix_autobind(): offsetof(struct sockaddr_un, sun_path) + 6 */
#define UNIX_AUTOBIND_LEN 8
#define AF_INET 2
#define AF_INET6 10
#define S_IFMT 00170000
#define S_IFSOCK 0140000
#define IPPROTO_TCP 6
#define IPPROTO_UDP 17
#define SOCK_DGRAM 2
#define MSG_PEEK 2
#define TCP_ESTABLISHED 1
#define TCP_SYN_RECV 3
#define TCP_FIN_WAIT1 4
#define TCP_CLOSE 7
#define TCP_CLOSE_WAIT 8
#define TCP_LAST_ACK 9
#define TCP_LISTEN 10

/* The default capture: which target listens on a local TCP port (tgid, 0
 * for none), from its listen() or, for sockets listening before the
 * recording, from the recorder (rec_bpf__listen_port). */
__u32 listen_tgid[65536];
/* The same for a UDP port a target's socket is bound to, unconnected (a
 * datagram server): its datagrams are known before its first call. */
__u32 udp_tgid[65536];
/* the io_uring programs are attached: transfers outside socket syscalls
 * look for the request they are (uring_take) */
const volatile __u8 cfg_uring = 0;

/*
 * The socket behind a descriptor of the current task, or NULL. Direct loads
 * through BTF-typed pointers (KREAD in common.h): the task from
 * bpf_get_current_task_btf(), the file and the socket cast from the numbers
 * the fd table holds. The returned sock is such a pointer too.
 */
static __always_inline struct sock *file_sock(struct file *file);

static __always_inline struct sock *fd_sock(int fd)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct fdtable *fdt;
	struct file **fds, *file;

	if (fd < 0)
		return NULL;
	fdt = task->files->fdt;
	if (!fdt || (unsigned int)fd >= fdt->max_fds)
		return NULL;
	fds = fdt->fd;
	if (bpf_probe_read_kernel(&file, sizeof(file), &fds[fd]) || !file)
		return NULL;
	return file_sock(file);
}

/* The socket of a file (a number read from a table), or NULL. */
static __always_inline struct sock *file_sock(struct file *file)
{
	struct socket *sock;
	struct inode *inode;

	file = kernel_cast(file, struct file);
	inode = file->f_inode;
	if (!inode || (inode->i_mode & S_IFMT) != S_IFSOCK)
		return NULL;
	sock = kernel_cast(file->private_data, struct socket);
	if (!sock)
		return NULL;
	return sock->sk;
}

/* A socket's inode number (as ss and /proc/PID/fd show it), 0 when it has
 * no file any more (its owner closed it) or sk is NULL. */
static __always_inline __u64 sk_ino(struct sock *sk)
{
	struct socket *so;

	if (!sk)
		return 0;
	so = kernel_cast(sk, struct sock)->sk_socket;
	if (!so)
		return 0;
	return kernel_cast(so, struct socket_alloc)->vfs_inode.i_ino;
}

/* sk from a number (the inflight entry): a pointer fd_sock()-like code can
 * load through. */
static __always_inline struct sock *sk_ptr(__u64 sk)
{
	return kernel_cast(sk, struct sock);
}

static __always_inline bool sk_is_tcp(bool btf, struct sock *sk, __u16 family)
{
	return (family == AF_INET || family == AF_INET6) &&
	       KREAD(btf, sk, sk_protocol) == IPPROTO_TCP;
}

/* A TCP socket's bytes written but not yet sent (struct cp_ev_sock.unsent). */
static __always_inline __u32 tcp_unsent(struct sock *sk, __u16 family)
{
	struct tcp_sock *tp;

	if (!sk_is_tcp(true, sk, family))
		return 0;
	tp = kernel_cast(sk, struct tcp_sock);
	return tp->write_seq - tp->snd_nxt;
}

/* Family, type and the 4-tuple; addresses network order, ports host order.
 * btf: sk is a BTF-typed pointer (direct loads), else a raw_tp argument. */
static __always_inline void sk_info(bool btf, struct sock *sk, struct cp_inflight *in)
{
	__u16 family = KREAD(btf, sk, __sk_common.skc_family);

	in->family = family;
	in->sock_type = KREAD(btf, sk, sk_type);
	if (family == AF_INET) {
		__u32 a = KREAD(btf, sk, __sk_common.skc_rcv_saddr);
		__u32 b = KREAD(btf, sk, __sk_common.skc_daddr);

		__builtin_memcpy(in->laddr, &a, 4);
		__builtin_memcpy(in->raddr, &b, 4);
	} else if (family == AF_INET6) {
		if (btf) {
			__builtin_memcpy(in->laddr, &sk->__sk_common.skc_v6_rcv_saddr, 16);
			__builtin_memcpy(in->raddr, &sk->__sk_common.skc_v6_daddr, 16);
		} else {
			BPF_CORE_READ_INTO(&in->laddr, sk, __sk_common.skc_v6_rcv_saddr);
			BPF_CORE_READ_INTO(&in->raddr, sk, __sk_common.skc_v6_daddr);
		}
	}
	if (family == AF_INET || family == AF_INET6) {
		in->lport = KREAD(btf, sk, __sk_common.skc_num);
		in->rport = bpf_ntohs(KREAD(btf, sk, __sk_common.skc_dport));
		/* a connection the peer reset is unhashed, its local port
		 * number cleared (__inet_put_port): the source port stays */
		if (!in->lport)
			in->lport = bpf_ntohs(BPF_CORE_READ((struct inet_sock *)sk, inet_sport));
	}
}

static __always_inline void sk_read_info(struct sock *sk, struct cp_inflight *in)
{
	sk_info(true, sk, in);
}

/* An IPv4 address as the 16 bytes an AF_INET6 socket sees it as
 * (::ffff:a.b.c.d), or as itself for an AF_INET one. */
static __always_inline void addr4_put(__u8 *dst, __u32 a, __u16 family)
{
	if (family == AF_INET6) {
		__builtin_memset(dst, 0, 10);
		dst[10] = dst[11] = 0xff;
		__builtin_memcpy(dst + 12, &a, 4);
	} else {
		__builtin_memcpy(dst, &a, 4);
	}
}

/* A UDP datagram's addresses: the IP version (0 = none), ports host
 * order, addresses as in the packet (daddr: when known). */
struct cp_udp_from {
	__u8 ver;
	__u8 __pad;
	__u16 sport;
	__u16 dport;
	__u16 __pad2;
	__u8 saddr[16];
	__u8 daddr[16];
	__u64 ts; /* udp_senders: when the read took it */
};

/*
 * The addresses of a UDP datagram, from its headers (as udp_recvmsg()
 * reads the sender it reports): false when skb is not one.
 */
static __always_inline bool skb_udp_from(bool btf, struct sk_buff *skb, struct cp_udp_from *f)
{
	__u8 ip[10]; /* iphdr up to protocol; ipv6hdr up to nexthdr */
	__u16 nh, th, ports[2];
	__u64 head;

	head = (__u64)KREAD(btf, skb, head);
	nh = KREAD(btf, skb, network_header);
	th = KREAD(btf, skb, transport_header);
	if (!head || nh == (__u16)~0U || th == (__u16)~0U ||
	    bpf_probe_read_kernel(ip, sizeof(ip), (void *)(head + nh)))
		return false;
	f->ver = ip[0] >> 4;
	if (f->ver == 4 && ip[9] == IPPROTO_UDP) {
		/* iphdr: saddr at 12, daddr at 16 */
		if (bpf_probe_read_kernel(f->saddr, 8, (void *)(head + nh + 12)))
			return false;
	} else if (f->ver == 6 && ip[6] == IPPROTO_UDP) {
		/* ipv6hdr: saddr at 8, daddr at 24 */
		if (bpf_probe_read_kernel(f->saddr, 32, (void *)(head + nh + 8)))
			return false;
	} else {
		return false;
	}
	if (bpf_probe_read_kernel(ports, sizeof(ports), (void *)(head + th)))
		return false;
	f->sport = bpf_ntohs(ports[0]);
	f->dport = bpf_ntohs(ports[1]);
	return true;
}

/* A datagram's addresses as the remote (its source) and, when local, the
 * local (its destination) end of a call or arrival on a socket of
 * in->family. */
static __always_inline void udp_from_put(struct cp_inflight *in, const struct cp_udp_from *f,
					 bool local)
{
	if (f->ver == 4) {
		__u32 a[2];

		__builtin_memcpy(a, f->saddr, 8); /* saddr, daddr adjacent */
		addr4_put(in->raddr, a[0], in->family);
		if (local)
			addr4_put(in->laddr, a[1], in->family);
	} else if (f->ver == 6 && in->family == AF_INET6) {
		__builtin_memcpy(in->raddr, f->saddr, CP_ADDR_LEN);
		if (local)
			__builtin_memcpy(in->laddr, f->daddr, CP_ADDR_LEN);
	} else {
		return;
	}
	in->rport = f->sport;
	if (local)
		in->lport = f->dport;
}

/*
 * A datagram that just arrived on a UDP socket: the receive queue's tail,
 * where __udp_enqueue_schedule_skb() put it before calling sk_data_ready.
 * Its source is the remote end and its destination the local one: an
 * unconnected socket's own addresses say neither (a wildcard, no peer).
 * A reader on another CPU may have moved the queue to its own
 * (udp_sk()->reader_queue) by now: then the sender is not known here, and
 * the read says it (udp_read_from).
 */
static __always_inline void udp_arrival(bool btf, struct sock *sk, struct cp_inflight *in)
{
	struct cp_udp_from f = {};
	struct sk_buff *skb;

	skb = KREAD(btf, sk, sk_receive_queue.prev);
	if (!skb || (__u64)skb == (__u64)&sk->sk_receive_queue)
		return;
	if (skb_udp_from(btf, skb, &f))
		udp_from_put(in, &f, true);
}

/* A sockaddr_in or sockaddr_in6 of in's family (user memory, or kernel
 * memory for !user) as in's remote end. */
static __always_inline void sockaddr_put(struct cp_inflight *in, const void *name, bool user)
{
	__u16 sa[2]; /* family, port */
	__u32 a4;
	long err;

	err = user ? bpf_probe_read_user(sa, sizeof(sa), name)
		   : bpf_probe_read_kernel(sa, sizeof(sa), name);
	if (err)
		return;
	if (sa[0] == AF_INET && in->family == AF_INET) {
		err = user ? bpf_probe_read_user(&a4, sizeof(a4), name + 4)
			   : bpf_probe_read_kernel(&a4, sizeof(a4), name + 4);
		if (err)
			return;
		addr4_put(in->raddr, a4, in->family);
	} else if (sa[0] == AF_INET6 && in->family == AF_INET6) {
		/* sockaddr_in6: the address after the flow info */
		err = user ? bpf_probe_read_user(in->raddr, CP_ADDR_LEN, name + 8)
			   : bpf_probe_read_kernel(in->raddr, CP_ADDR_LEN, name + 8);
		if (err)
			return;
	} else {
		return;
	}
	in->rport = bpf_ntohs(sa[1]);
}

/* Where an unconnected UDP socket's write goes: the call's own address
 * (sendto's dest_addr, its 5th argument; sendmsg's msg_name, in the msghdr
 * in->arg0 points to; sendmmsg's first message's). */
static __always_inline void udp_dest(struct cp_inflight *in, __u64 arg5)
{
	const void *name = NULL;

	if (in->call == CP_SOCK_SENDTO) {
		name = (const void *)arg5;
	} else if (in->call == CP_SOCK_SENDMSG || in->call == CP_SOCK_SENDMMSG) {
		/* struct mmsghdr begins with its msghdr */
		const void *msg = (const void *)in->arg0;

		if (bpf_probe_read_user(&name, sizeof(name),
					msg + offsetof(struct user_msghdr, msg_name)))
			return;
	}
	if (name)
		sockaddr_put(in, name, true);
}

static __always_inline int call_dir(__u8 call)
{
	switch (call) {
	case CP_SOCK_READ:
	case CP_SOCK_READV:
	case CP_SOCK_RECVFROM:
	case CP_SOCK_RECVMSG:
	case CP_SOCK_RECVMMSG:
		return SOCK_DIR_READ;
	case CP_SOCK_WRITE:
	case CP_SOCK_WRITEV:
	case CP_SOCK_SENDTO:
	case CP_SOCK_SENDMSG:
	case CP_SOCK_SENDMMSG:
		return SOCK_DIR_WRITE;
	}
	return SOCK_DIR_NONE;
}

/*
 * The sender of the datagram a target thread's read just took, by
 * pid_tgid, as udp_recvmsg() tells the cgroup recvmsg hooks (when the
 * caller asked for it: recvfrom's src_addr, recvmsg's msg_name), until the
 * read's record takes it (udp_read_from). Not from the datagram itself:
 * no tracepoint sees it in the reader's task (udp_recvmsg() copies a
 * linear one itself, and frees it on the CPU that made it).
 */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u64);
	__type(value, struct cp_udp_from);
} udp_senders SEC(".maps");

static __always_inline int on_udp_recvmsg(struct bpf_sock_addr *ctx, __u8 ver)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct cp_udp_from f = {};
	struct task_struct *task;
	__u16 code;

	if (cfg_empty_programs || !tgid_is_target(id >> 32))
		return 1; /* 1: the call goes on, its address untouched */
	/* the default capture records every datagram read, in a syscall or
	 * an io_uring request, at sock_recv_length right after this: its
	 * record takes the sender. --all-syscalls records read syscalls. */
	if (!cfg_lean) {
		/* --all-syscalls: the record is made at the call's exit, from
		 * its slot; none for a call begun before the recording. One
		 * record for a recvmmsg: its first message's sender. */
		struct cp_inflight *in = inflight_get();
		struct cp_udp_from *kept;

		task = bpf_get_current_task_btf();
		code = syscall_code(regs_syscall((struct pt_regs *)bpf_task_pt_regs(task)));
		if (code >> 8 != INFLIGHT_SOCK || call_dir(code & 0xff) != SOCK_DIR_READ)
			return 1;
		if (!in || in->kind != INFLIGHT_SOCK)
			return 1;
		kept = bpf_map_lookup_elem(&udp_senders, &id);
		if (kept && kept->ts >= in->ts)
			return 1;
	}
	f.ts = bpf_ktime_get_ns();
	f.ver = ver;
	f.sport = bpf_ntohs((__u16)ctx->user_port);
	if (ver == 4) {
		__u32 a = ctx->user_ip4;

		__builtin_memcpy(f.saddr, &a, 4);
	} else {
		__u32 a[4] = {ctx->user_ip6[0], ctx->user_ip6[1], ctx->user_ip6[2],
			      ctx->user_ip6[3]};

		__builtin_memcpy(f.saddr, a, 16);
	}
	bpf_map_update_elem(&udp_senders, &id, &f, BPF_ANY);
	return 1;
}

SEC("cgroup/recvmsg4")
int udp_recvmsg4(struct bpf_sock_addr *ctx)
{
	return on_udp_recvmsg(ctx, 4);
}

SEC("cgroup/recvmsg6")
int udp_recvmsg6(struct bpf_sock_addr *ctx)
{
	return on_udp_recvmsg(ctx, 6);
}

/* A read on an unconnected UDP socket (use): its datagram's sender (the
 * socket has no peer of its own). Taken by every datagram read, used or
 * not. */
static __always_inline void udp_read_from(struct cp_inflight *in, bool use)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct cp_udp_from *f = bpf_map_lookup_elem(&udp_senders, &id);

	if (!f)
		return;
	if (use)
		udp_from_put(in, f, false);
	bpf_map_delete_elem(&udp_senders, &id);
}

/* Makes the socket known to sk_data_ready; returns its state. */
static __always_inline struct cp_sock_state *sock_track(struct sock *sk, __u32 tgid)
{
	__u64 key = (__u64)sk;
	struct cp_sock_state *st, fresh = {.tgid = tgid};

	st = bpf_map_lookup_elem(&sock_states, &key);
	if (st)
		return st;
	bpf_map_update_elem(&sock_states, &key, &fresh, BPF_NOEXIST);
	return bpf_map_lookup_elem(&sock_states, &key);
}

/* fd, buf (or iovec / msghdr), len (recvmsg's: its flags) of the call;
 * extra: recvfrom's flags, else its 5th argument (sendto's dest_addr). */
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

		in.tcp_seq = dir == SOCK_DIR_WRITE ? tp->snd_nxt : tp->copied_seq;
	}
	/* known to sk_data_ready before data arrives for this call */
	sock_track(sk, id >> 32);
	inflight_put(&in);
	return 0;
}

/* The iovec array of a msghdr in user memory. */
static __always_inline const struct iovec *msghdr_iov(const void *msg)
{
	void *p = NULL;

	bpf_probe_read_user(&p, sizeof(p), msg + offsetof(struct user_msghdr, msg_iov));
	return p;
}

/* The user iovec array of a vectored call (readv/writev, a msghdr's), or
 * NULL. */
static __always_inline const struct iovec *payload_iov(struct cp_inflight *in)
{
	const void *msg = (const void *)in->arg0;

	if (in->uring & URING_BUF)
		return NULL;
	switch (in->call) {
	case CP_SOCK_READV:
	case CP_SOCK_WRITEV:
		return msg;
	case CP_SOCK_RECVMSG:
	case CP_SOCK_SENDMSG:
		return msghdr_iov(msg);
	default:
		return NULL;
	}
}

/* The one user buffer of a call that moves bytes through one, or 0. */
static __always_inline __u64 payload_buf(struct cp_inflight *in)
{
	if (in->uring & URING_BUF)
		return in->arg0;
	switch (in->call) {
	case CP_SOCK_READ:
	case CP_SOCK_WRITE:
	case CP_SOCK_RECVFROM:
	case CP_SOCK_SENDTO:
		return in->arg0;
	default:
		return 0;
	}
}

/* Where the call's first bytes are in user memory, and at most how many. */
static __always_inline const void *payload_src(struct cp_inflight *in, __u64 *max)
{
	struct iovec iov = {};
	const void *msg = (const void *)in->arg0;
	const struct iovec *uiov;

	/* one buffer (a provided buffer, even for a recvmsg) */
	if (payload_buf(in))
		return msg;
	switch (in->call) {
	case CP_SOCK_RECVMMSG:
	case CP_SOCK_SENDMMSG: {
		unsigned int len = 0;

		bpf_probe_read_user(&len, sizeof(len), msg + offsetof(struct mmsghdr, msg_len));
		if (len < *max)
			*max = len;
		uiov = msghdr_iov(msg); /* the first message's */
		break;
	}
	default:
		uiov = payload_iov(in);
		break;
	}
	if (!uiov || bpf_probe_read_user(&iov, sizeof(iov), uiov))
		return NULL;
	if (iov.iov_len < *max)
		*max = iov.iov_len;
	return iov.iov_base;
}

/* The payload prefix into buf (CP_PAYLOAD_MAX bytes of ring buffer): its
 * length, 0 when there is none to take. tls: the call writes for an
 * SSL_write, whose plaintext buffer is the payload. */
static __always_inline __u64 sock_payload(struct cp_inflight *in, __u8 call, long ret, __u8 *buf,
					  __u64 cap, struct cp_tls_slot *tls, __u32 limit)
{
	__u64 max = call == CP_SOCK_RECVMMSG || call == CP_SOCK_SENDMMSG ? CP_PAYLOAD_MAX : ret;
	const void *src;
	__u64 len;

	if (tls)
		max = tls->num;
	if (max > limit)
		max = limit;
	src = tls ? (const void *)tls->buf : payload_src(in, &max);
	len = max;
	if (len > cap)
		len = cap;
	barrier_var(len);
	if (!src || !len || len > cap)
		return 0;
	/* zero the 8-byte word the data ends in: the alignment padding must
	 * not carry stale ring-buffer bytes into the file */
	*(__u64 *)(buf + (len & 0x1f8)) = 0;
	if (bpf_probe_read_user(buf, len, src))
		return 0;
	return len;
}

static __always_inline int sock_emit(struct cp_inflight *in, long ret, struct cp_sock_state *st,
				     struct cp_tls_slot *tls, __u32 unsent);

/* A payload that begins with a TLS record of application data (content
 * type 23, version 3.x) is ciphertext: its 5-byte header is all the report
 * reads of it (user/kpath/conn.c: tls_record_outside), and the rest, random
 * bytes, would not compress (Go's crypto/tls and --no-tls recordings:
 * about 200 bytes a request). Cut to the header, the padding zeroed. */
static __always_inline __u64 tls_ciphertext_cut(__u8 *p, __u64 len)
{
	if (len > 5 && p[0] == 23 && p[1] == 3 && p[2] >= 1 && p[2] <= 4) {
		*(__u64 *)p &= 0xffffffffffull;
		return 5;
	}
	return len;
}

#define GATHER_IOVS 8

/*
 * An HTTP/2 writer hands a frame's header and its payload over in separate
 * iovecs (Node.js: writev), so the first iovec alone ends in the middle of
 * the frames: the prefix is gathered from the first bytes of up to
 * GATHER_IOVS of them. buf has CP_PAYLOAD_MAX bytes of room past any offset
 * below CP_PAYLOAD_MAX (the reservation is twice the payload), so each
 * read's bounds are plain masks the verifier can follow.
 */
static __always_inline __u64 payload_gather(const struct iovec *uiov, long ret, __u8 *buf)
{
	__u64 max = ret, off = 0;

	if (max > cfg_h2_payload_bytes)
		max = cfg_h2_payload_bytes;
	if (max > CP_PAYLOAD_MAX)
		max = CP_PAYLOAD_MAX;
	for (int i = 0; i < GATHER_IOVS; i++) {
		struct iovec iov;
		__u64 n;

		if (off >= max || bpf_probe_read_user(&iov, sizeof(iov), &uiov[i]))
			break;
		n = iov.iov_len;
		if (n > max - off)
			n = max - off;
		if (n > CP_PAYLOAD_MAX)
			n = CP_PAYLOAD_MAX;
		barrier_var(n);
		if (!n || n > CP_PAYLOAD_MAX)
			continue;
		if (bpf_probe_read_user(buf + (off & (CP_PAYLOAD_MAX - 1)), n, iov.iov_base))
			break;
		off += n;
	}
	if (off > CP_PAYLOAD_MAX)
		off = CP_PAYLOAD_MAX;
	/* no stale ring-buffer bytes in the alignment padding after the data */
	for (int k = 0; k < 7 && ((off + k) & 7); k++)
		buf[(off + k) & (2 * CP_PAYLOAD_MAX - 1)] = 0;
	return off;
}

/*
 * HTTP/2 frames past the prefix. A server reads several streams' frames in
 * one transfer and writes several answers in one: a large DATA frame (a
 * POST body, a response) before the next stream's HEADERS put that HEADERS
 * past any prefix. So on an HTTP/2 connection the recorder follows the
 * frames through each transfer by their lengths, as the report does, and
 * appends to the prefix the pieces of the transfer past it that the report
 * needs: every frame header, and the header blocks of HEADERS,
 * PUSH_PROMISE and CONTINUATION frames (CP_SOCK_F_PIECES). Where the frames of a direction
 * are is kept in the socket's state from one transfer to the next; it is
 * found again, when lost, at a transfer that begins with a frame header.
 *
 * A subprogram of its own (verified once, not in each path of the inlined
 * sock_emit around it): the first H2_WALK_FRAMES frames the prefix shows
 * whole are read there in a plain loop, the rest from user memory in a
 * bpf_loop whose state is in the scratch map, where the pieces are built.
 * The plain loop costs the verifier about 5,000 instructions a turn in
 * every program that calls this one (the socket and TLS programs): at 64
 * turns, the whole prefix, that was 300K each and 1.7 s of every start.
 * 16 covers a transfer of 8 small responses (HEADERS and DATA each), and
 * h2_frame takes any frames after them from user memory, a read each.
 */
#define H2_HDR 9
#define H2_WALK_FRAMES 16  /* whole in the prefix, read there (more: h2_frame's) */
#define H2_LOOP_FRAMES 448 /* past it, at most */
/* room for pieces after a prefix: the reservation's H2_ROOM bytes past
 * CP_PAYLOAD_MAX, less the word of padding after them and an end piece */
#define H2_PIECES (H2_ROOM - 8 - sizeof(struct cp_sock_piece))
#define H2_FRAME_SANE (1u << 20)

struct h2_walk {
	__u64 buf;		      /* the transfer's buffer, or 0: iovecs */
	__u64 base[GATHER_IOVS];      /* the iovecs' bases */
	__u64 start[GATHER_IOVS + 1]; /* their offsets in the transfer; start[niov]: the end */
	__u64 ret;		      /* bytes moved */
	__s64 off;		      /* the next frame header (< 0: begun in the last transfer) */
	__u32 flat;		      /* bytes of the prefix */
	__u32 pos;		      /* bytes of pieces built */
	__u32 last;		      /* the last piece's header, in pieces */
	__u64 last_end;		      /* its end, in the transfer (0: none) */
	__u8 npart, lost, done;
	__u8 part[8]; /* the start of a header cut by the transfer's end */
};

/* User memory is read to an offset below H2_ROOM of pieces or hdr, at
 * most H2_ROOM - 1 bytes: bounds the verifier can follow. */
struct h2_scratch {
	/* the walk's state: in the map, not on the stack, so that bpf_loop's
	 * callback is verified once, not for each value it leaves there */
	struct h2_walk w;
	__u8 pieces[2 * H2_ROOM]; /* the pieces built */
	__u8 hdr[2 * H2_ROOM];	  /* a frame header read from user memory */
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct h2_scratch);
} h2_scratch SEC(".maps");

/* The length of the frame whose 9-byte header is at h, or -1 when h is not
 * one (a type past the extensions, the reserved bit, longer than any peer
 * sends): the frames were lost. */
static __always_inline __s64 h2_frame_len(const __u8 *h)
{
	__u32 flen = (__u32)h[0] << 16 | (__u32)h[1] << 8 | h[2];

	return h[3] > 0x10 || (h[5] & 0x80) || flen > H2_FRAME_SANE ? -1 : flen;
}

/* Where cp_h2_read puts the bytes: the pieces, or the frame header. */
#define H2_TO_HDR 0x80000000u

/*
 * n bytes at the transfer's offset off into the scratch buffer's pieces at
 * offset at (at + n < H2_ROOM), or to its hdr (at: H2_TO_HDR). 0, or
 * -1 when they are not all in the user memory the call moved. A subprogram
 * of its own: each iovec a step that reads its part of the bytes, if any.
 */
__noinline int cp_h2_read(__u64 off, __u32 at, __u32 n)
{
	__u32 zero = 0, got = 0;
	struct h2_scratch *s = bpf_map_lookup_elem(&h2_scratch, &zero);
	struct h2_walk *w;
	__u8 *region;

	if (!s)
		return -1;
	w = &s->w;
	region = at & H2_TO_HDR ? s->hdr : s->pieces;
	at &= H2_ROOM - 1;
	n &= H2_ROOM - 1;
	if (w->buf)
		return n && !bpf_probe_read_user(region + at, n, (void *)(w->buf + off)) ? 0 : -1;
	for (int j = 0; j < GATHER_IOVS; j++) {
		__u64 a = w->start[j], b = w->start[j + 1];
		__u64 lo = off > a ? off : a, hi = off + n < b ? off + n : b;
		__u32 m = (hi - lo) & (H2_ROOM - 1);

		if (lo >= hi)
			continue;
		if (bpf_probe_read_user(region + ((at + lo - off) & (H2_ROOM - 1)), m,
					(void *)(w->base[j] + (lo - a))))
			return -1;
		got += m;
	}
	return got == n ? 0 : -1;
}

/* The transfer's bytes [from, to) (past the prefix) as a piece, or as many
 * of them as there is room for. */
static __always_inline void h2_piece(struct h2_walk *w, struct h2_scratch *s, __u64 from, __u64 to)
{
	struct cp_sock_piece *ph;
	__u32 n, room;

	if (to <= from)
		return;
	if (w->last_end != from || !w->last_end) {
		if (w->pos + sizeof(*ph) > H2_PIECES)
			return;
		ph = (void *)&s->pieces[w->pos & (H2_ROOM - 1)];
		__builtin_memcpy(ph->off, &from, 4); /* little-endian */
		__builtin_memset(ph->len, 0, 2);
		w->last = w->pos;
		w->pos += sizeof(*ph);
	}
	room = H2_PIECES - w->pos;
	n = to - from < room ? to - from : room;
	if (!n || cp_h2_read(from, w->pos, n))
		return;
	ph = (void *)&s->pieces[w->last & (H2_ROOM - 1)];
	{
		__u16 len;

		__builtin_memcpy(&len, ph->len, 2);
		len += n;
		__builtin_memcpy(ph->len, &len, 2);
	}
	w->pos += n;
	w->last_end = from + n == to ? to : 0; /* a cut piece is not extended */
}

/* Frames of this type carry a header block, which the report decodes
 * (HPACK's tables change with every block): HEADERS, PUSH_PROMISE,
 * CONTINUATION. */
static __always_inline bool h2_has_block(__u8 type)
{
	return type == 1 || type == 5 || type == 9;
}

/* One frame past those the prefix shows whole (cp_h2_walk): its header at
 * w->off, read from user memory, the piece it needs, the next one's
 * offset. Returns 1 to stop. */
static long h2_frame(__u32 i, void *ctx)
{
	__u32 zero = 0;
	struct h2_scratch *s = bpf_map_lookup_elem(&h2_scratch, &zero);
	struct h2_walk *w;
	__u64 body, from, to;
	__u8 h[H2_HDR];
	__s64 off, flen;

	if (!s)
		return 1;
	w = &s->w;
	off = w->off;
	if (off >= (__s64)w->ret) {
		w->done = 1;
		return 1;
	}
	if (off < 0) {
		/* npart bytes of the header came in the last transfer; the rest
		 * begins this one (at least 9 of its bytes, or it too ends in
		 * the header: not followed) */
		__u32 np = w->npart;

		if (np > 8 || w->ret < H2_HDR - np || cp_h2_read(0, H2_TO_HDR, H2_HDR - np)) {
			w->lost = 1;
			return 1;
		}
#pragma unroll
		for (int k = 0; k < H2_HDR; k++)
			h[k] = k < np ? w->part[k & 7] : s->hdr[(k - np) & (CP_PAYLOAD_MAX - 1)];
	} else if ((__u64)off + H2_HDR > w->ret) {
		/* the header goes on in the next transfer */
		__u32 np = w->ret - off;

		if (np > 8)
			np = 8;
		if (!cp_h2_read(off, H2_TO_HDR, np)) {
			__builtin_memcpy(w->part, s->hdr, 8);
		} else {
			w->lost = 1;
			return 1;
		}
		w->npart = np;
		h2_piece(w, s, off > w->flat ? off : w->flat, w->ret);
		w->done = 1;
		return 1;
	} else if (!cp_h2_read(off, H2_TO_HDR, H2_HDR)) {
		__builtin_memcpy(h, s->hdr, H2_HDR);
	} else {
		w->lost = 1;
		return 1;
	}
	flen = h2_frame_len(h);
	if (flen < 0) {
		w->lost = 1;
		return 1;
	}
	/* HEADERS, PUSH_PROMISE and CONTINUATION: the block; others: the
	 * header */
	body = h2_has_block(h[3]) ? flen : 0;
	from = off > (__s64)w->flat ? off : w->flat;
	to = off + H2_HDR + body;
	if (to > w->ret)
		to = w->ret;
	h2_piece(w, s, from, to);
	w->off = off + H2_HDR + flen;
	w->npart = 0;
	return 0;
}

/*
 * Follows the frames of a transfer (xfer: H2_XFER) on an HTTP/2 connection
 * whose prefix is the record's payload p (with room for the pieces after
 * it); buf: the buffer, or uiov: the iovec array. Updates st's frame state
 * and appends the pieces (through the 8-byte word they end in, zeroed).
 * Returns their bytes, 0 for none.
 */
__noinline int cp_h2_walk(struct cp_sock_state *st, struct h2_room *p, __u64 buf, __u64 uiov,
			  __u64 xfer)
{
	__u32 zero = 0, flat = (xfer >> 1) & 0x3ff, d = xfer & 1;
	__u64 ret = xfer >> 12, n;
	bool end = xfer & (1 << 11);
	struct h2_scratch *s = bpf_map_lookup_elem(&h2_scratch, &zero);
	struct h2_walk *w;
	__u8 bit;

	if (!st || !p || !s || !flat || flat > CP_PAYLOAD_MAX)
		return 0;
	w = &s->w;
	__builtin_memset(w, 0, sizeof(*w));
	w->buf = buf;
	w->ret = ret;
	w->flat = flat;
	bit = 1 << d;
	if (st->h2_sync & bit) {
		w->npart = st->h2_npart[d] & 7;
		w->off = w->npart ? -(__s64)w->npart : st->h2_next[d];
		__builtin_memcpy(w->part, st->h2_part[d], 8);
	} else if (flat >= 24 && cp_h2_preface(p->b)) {
		w->off = 24; /* the client's preface */
	} else if (flat >= H2_HDR && !p->b[0] && p->b[3] <= 9 && !(p->b[5] & 0x80)) {
		w->off = 0; /* begins with a frame header (below 64 KiB), as the report assumes */
	} else {
		return 0;
	}
	/* the frames the prefix shows whole, read there: the ones after the
	 * first that goes on past it are bpf_loop's */
	if (!w->npart) {
		__s64 off = w->off;

		for (int i = 0; i < H2_WALK_FRAMES; i++) {
			const __u8 *h = &p->b[off & (CP_PAYLOAD_MAX - 1)];
			__s64 flen;

			if (off + H2_HDR > flat || off > CP_PAYLOAD_MAX - H2_HDR)
				break;
			flen = h2_frame_len(h);
			if (flen < 0) {
				w->lost = 1;
				break;
			}
			if (h2_has_block(h[3]) && off + H2_HDR + flen > flat)
				break; /* a header block that goes on past the prefix */
			off += H2_HDR + flen;
		}
		w->off = off;
		w->done = off >= (__s64)ret;
	}
	if (!buf && !w->done && !w->lost) {
		__u64 at = 0;
		bool stop = !uiov;

		/* the iovecs' offsets; past the last one read, empty ones */
		for (int i = 0; i < GATHER_IOVS; i++) {
			struct iovec v;

			w->start[i] = at;
			if (stop || at >= ret ||
			    bpf_probe_read_user(&v, sizeof(v), (void *)uiov + i * sizeof(v))) {
				stop = true;
				continue;
			}
			w->base[i] = (__u64)v.iov_base;
			at += v.iov_len;
		}
		w->start[GATHER_IOVS] = at;
	}
	if (!w->done && !w->lost)
		bpf_loop(H2_LOOP_FRAMES, h2_frame, NULL, 0);
	if (w->done && !w->lost) {
		st->h2_sync |= bit;
		st->h2_npart[d] = w->npart;
		st->h2_next[d] = w->npart ? 0 : w->off - ret;
		__builtin_memcpy(st->h2_part[d], w->part, 8);
	} else {
		st->h2_sync &= ~bit;
	}
	if (end && ret > flat) {
		/* a piece of no bytes at the transfer's end */
		struct cp_sock_piece *ph = (void *)&s->pieces[w->pos & (H2_ROOM - 1)];

		__builtin_memcpy(ph->off, &ret, 4);
		__builtin_memset(ph->len, 0, 2);
		w->pos += sizeof(*ph);
	}
	if (!w->pos)
		return 0;
	__builtin_memset(&s->pieces[w->pos & (H2_ROOM - 1)], 0, 8);
	n = ((flat + w->pos + 7) & ~7u) - flat;
	barrier_var(n);
	if (n >= H2_ROOM || bpf_probe_read_kernel(p->b + flat, n & (H2_ROOM - 1), s->pieces))
		return 0;
	return w->pos;
}

/* A payload of at most the default size; the reservation holds the 8-byte
 * word sock_payload() zeroes at the end of the data. */
#define PAYLOAD_SMALL CP_PAYLOAD_DEFAULT
#define SOCK_SMALL (offsetof(struct cp_ev_sock, payload) + PAYLOAD_SMALL + 8)

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

	/*
	 * Payload only where protocol detection needs it, to keep recordings
	 * small: the first read or write on a socket and the first one after a
	 * change of direction (the start of a request or of a response), among
	 * calls that moved bytes. Decided here at the exit, not at the start: a
	 * reader may begin its next read before another thread has written the
	 * previous response (a hand-off), and that read still starts a request.
	 * A call of at most CP_SHORT_READ bytes (a length prefix read alone)
	 * leaves the payload to the next call in its direction too.
	 */
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
	return sock_emit(in, ret, st, tls_current((__u32)bpf_get_current_pid_tgid(), dir, in),
			 dir == SOCK_DIR_WRITE && ret > 0 ? tcp_unsent(sk, in->family) : 0);
out:
	inflight_done(in);
	return 0;
}

/* A socket read inside a TLS read: ciphertext, no payload. When it is the
 * one that would have had one, the plaintext is recorded at the TLS call's
 * return (tls.bpf.c), with this read's connection. */
static __always_inline void tls_read_note(struct cp_tls_slot *tls, struct cp_inflight *in,
					  struct cp_sock_state *st)
{
	st->last_dir = SOCK_DIR_READ;
	st->last_short = 0;
	tls->want_ssl = tls->ssl;
	tls->want_ts = in->ts;
	tls->h2 = st->every;
	tls->fd = in->fd;
	CONN_COPY(tls, in);
}

/* The call's record; st: the socket's state, which says whether a payload
 * is taken (NULL: none); tls: the TLS call the thread is in, moving data
 * the same way as this call (NULL: none). */
static __always_inline int sock_emit(struct cp_inflight *in, long ret, struct cp_sock_state *st,
				     struct cp_tls_slot *tls, __u32 unsent)
{
	const struct iovec *iov = NULL;
	struct cp_ev_sock *e;
	__u8 call = in->call;
	int dir = call_dir(call);
	__u64 len = 0, pieces = 0;
	__u32 limit;
	bool walk;

	/* a peek's bytes are the next read's (and MSG_TRUNC may have said
	 * more than its buffer holds): the payload is that read's. Every
	 * datagram is a message of its own, whatever came before it. */
	if (st && (ret <= 0 || dir == SOCK_DIR_NONE || !cfg_payload_bytes || in->peek ||
		   (st->last_dir == dir && !st->last_short && !st->every &&
		    in->sock_type != SOCK_DGRAM && !(tls && tls->turn_ssl == tls->ssl))))
		st = NULL;
	if (tls) {
		tls->nested = 1;
		if (st && tls->turn_ssl == tls->ssl)
			tls->turn_ssl = 0;
	}
	if (tls && dir == SOCK_DIR_READ) {
		if (st)
			tls_read_note(tls, in, st);
		st = NULL;
	}
	/* HTTP/2 takes a write call's plaintext once, at its first socket
	 * write: the ones after it would repeat the same first bytes */
	if (tls && st && st->every && tls->wrote)
		st = NULL;
	limit = st && st->every ? cfg_h2_payload_bytes : cfg_payload_bytes;
	/* HTTP/2, in the clear or a TLS write's plaintext: room for the
	 * pieces after the prefix */
	walk = st && st->every && (!tls || dir == SOCK_DIR_WRITE);
	/* Reserved in place (no scratch copy): at full size when a payload is
	 * taken, stored at hdr.size (the tail never reaches the file). */
	if (walk && !tls && (iov = payload_iov(in))) {
		e = ring_reserve(sizeof(*e) + H2_ROOM);
		if (!e) {
			st->h2_sync = 0;
			count_drop();
			goto out;
		}
		len = payload_gather(iov, ret, e->payload);
		st->last_dir = dir;
		st->last_short = 0;
	} else if (st && !walk && limit <= PAYLOAD_SMALL) {
		/* the default prefix: a reservation of its size (the ring
		 * buffer's space, and the consumer's reads, follow it) */
		e = ring_reserve(SOCK_SMALL);
		if (!e) {
			count_drop();
			goto out;
		}
		len = sock_payload(in, call, ret, e->payload, PAYLOAD_SMALL, tls, limit);
		if (len && !tls)
			len = tls_ciphertext_cut(e->payload, len);
		if (len) {
			st->last_dir = dir;
			st->last_short = ret <= CP_SHORT_READ;
			if (!st->every && sock_h2(e->payload, len)) {
				st->every = 1;
				/* the connection's first HTTP/2 bytes (a client's
				 * preface, SETTINGS and first streams' HEADERS) at
				 * the length its next transfers will have */
				if (len < (__u64)ret && cfg_h2_payload_bytes > len) {
					bpf_ringbuf_discard(e, 0);
					e = ring_reserve(sizeof(*e) + H2_ROOM);
					if (!e) {
						count_drop();
						goto out;
					}
					len =
					    sock_payload(in, call, ret, e->payload, CP_PAYLOAD_MAX,
							 tls, cfg_h2_payload_bytes);
					walk = true;
				}
			}
		}
	} else if (st) {
		/* on HTTP/2, with room for the pieces */
		e = walk ? ring_reserve(sizeof(*e) + H2_ROOM) : ring_reserve(sizeof(*e));
		if (!e) {
			st->h2_sync = 0;
			count_drop();
			goto out;
		}
		len = sock_payload(in, call, ret, e->payload, CP_PAYLOAD_MAX, tls, limit);
		if (len && !tls && !walk)
			len = tls_ciphertext_cut(e->payload, len);
		if (len) {
			st->last_dir = dir;
			st->last_short = ret <= CP_SHORT_READ;
			if (!st->every && sock_h2(e->payload, len))
				st->every = 1;
		}
	} else {
		e = ring_reserve(offsetof(struct cp_ev_sock, payload));
		if (!e) {
			count_drop();
			goto out;
		}
	}
	/* walk: the record has H2_ROOM bytes of room past its payload */
	if (walk && len && tls) /* an SSL_write's plaintext, all of it */
		pieces = cp_h2_walk(st, (struct h2_room *)e->payload, tls->buf, 0,
				    H2_XFER(tls->num, len, 1, 1));
	else if (walk && len)
		pieces = cp_h2_walk(st, (struct h2_room *)e->payload, iov ? 0 : payload_buf(in),
				    (__u64)iov, H2_XFER(ret, len, dir == SOCK_DIR_WRITE, 0));
	hdr_fill(&e->h, CP_EV_SOCK, CP_ALIGN(offsetof(struct cp_ev_sock, payload) + len + pieces),
		 bpf_ktime_get_ns());
	e->enter_ts = in->ts;
	e->bytes = ret;
	e->fd = in->fd;
	e->phase = CP_PHASE_EXIT;
	e->call = call;
	CONN_COPY(e, in);
	e->sock_type = in->sock_type;
	e->flags = (tls ? CP_SOCK_F_TLS : 0) | (in->peek ? CP_SOCK_F_PEEK : 0) |
		   (in->uring ? CP_SOCK_F_URING : 0) | (pieces ? CP_SOCK_F_PIECES : 0);
	if (tls && len) {
		tls->wrote = 1;
		if (tls->num > len)
			e->flags |= CP_SOCK_F_CUT;
	}
	if (in->family == AF_UNIX && in->sk) {
		struct unix_sock *u = kernel_cast(in->sk, struct unix_sock);
		struct unix_address *ua = u->addr;
		__u64 ino = sk_ino(&u->sk), peer = sk_ino(u->peer);

		/* the kernel sockets of both ends name the connection (a
		 * descriptor is reused for another socket) and pair them */
		__builtin_memcpy(e->laddr, &ino, sizeof(ino));
		__builtin_memcpy(e->raddr, &peer, sizeof(peer));

		/* not an autobind's name ("\0" and 5 hex digits: a client's
		 * with SO_PASSCRED, D-Bus's for one) */
		if (ua && ua->len != UNIX_AUTOBIND_LEN)
			e->flags |= CP_SOCK_F_BOUND;
	}
	e->unsent = unsent;
	e->payload_len = len;
	ev_submit(e);
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

/* Entry points for the raw_syscalls programs (syscalls.bpf.c): fd, buf (or
 * iovec / msghdr), len of a socket call of a target thread. */
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

/*
 * io_uring socket requests. Their data moves through sock_sendmsg and
 * sock_recvmsg as a syscall's does, but in the submitter's io_uring_enter,
 * its task work or an io-wq worker: no syscall registers say the fd or the
 * buffer. The request does: uring_note keeps them, per socket and
 * direction, for the transfer that follows (uring_take, on_sock_io), at
 * the request's submission (io_uring has prepared it: its buffer is in the
 * op's data) and at each poll wakeup that queues its retry. A recv with a
 * provided buffer (buffer select) has its buffer chosen at issue: the
 * transfer finds it in the request's message iterator then, and a
 * multishot recv's stays for each of its transfers. A close or shutdown is
 * kept for the state change it makes (uring_end, on_set_state).
 */
struct cp_uring_op {
	__u64 buf[2]; /* by direction: [SOCK_DIR_READ - 1], [SOCK_DIR_WRITE - 1] */
	/* struct io_kiocb *: a recv's with a provided buffer, a send's or
	 * sendmsg's (its destination, for an unconnected UDP socket); else 0 */
	__u64 req[2];
	__s32 fd[2];
	__u8 call[2];  /* enum cp_sock_call; 0 (accept, never one): none pending */
	__u8 multi[2]; /* a multishot recv: pending until replaced */
	__u8 end_call; /* CP_SOCK_CLOSE or SHUTDOWN pending (on_set_state), else 0 */
	__u8 __pad[3];
	__s32 end_fd;
	__u32 __pad2;
	__u64 end_ts; /* when it was submitted */
};

/* A close's state change follows its submission at once (the file's last
 * reference goes at the task's return to user space): one pending longer
 * did not change the state (a socket not connected), and its entry may
 * outlive its socket. */
#define URING_END_NS 1000000000ull

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u64); /* struct sock * */
	__type(value, struct cp_uring_op);
} uring_ops SEC(".maps");

/* The socket behind a fixed file (IOSQE_FIXED_FILE: the SQE's fd is an
 * index into the ring's registered files), or NULL: in a table of nodes
 * holding tagged file pointers, as this kernel has it; with another layout
 * (older kernels) none. */
static __always_inline struct sock *fixed_sock(struct io_kiocb *req, int idx)
{
	struct io_ring_ctx *ctx = BPF_CORE_READ(req, ctx);
	struct io_rsrc_node **nodes, *node = NULL;
	unsigned long fp;

	if (!uring_nodes_hold_files() ||
	    (unsigned int)idx >= BPF_CORE_READ(ctx, file_table.data.nr))
		return NULL;
	nodes = BPF_CORE_READ(ctx, file_table.data.nodes);
	if (bpf_probe_read_kernel(&node, sizeof(node), &nodes[idx & 0xffff]) || !node)
		return NULL;
	fp = BPF_CORE_READ(node, file_ptr);
	if (!(fp & ~3ul)) /* FFS_NOWAIT, FFS_ISREG in the low bits */
		return NULL;
	return file_sock((struct file *)(fp & ~3ul));
}

/* sk's entry, made (no request pending, no fd known) when it has none;
 * NULL when the map cannot take it. */
static __always_inline struct cp_uring_op *uring_op_of(struct sock *sk)
{
	struct cp_uring_op fresh = {.fd = {-1, -1}}, *op;
	__u64 key = (__u64)sk;

	op = bpf_map_lookup_elem(&uring_ops, &key);
	if (op)
		return op;
	bpf_map_update_elem(&uring_ops, &key, &fresh, BPF_NOEXIST);
	return bpf_map_lookup_elem(&uring_ops, &key);
}

/* An io_uring close or shutdown of fd, for the state change it makes
 * (on_set_state): a socket's, kept with the socket's transfers. */
static __always_inline int uring_end(int fd, __u8 call)
{
	struct sock *sk = fd_sock(fd);
	struct cp_uring_op *op = sk ? uring_op_of(sk) : NULL;

	if (!op)
		return 0;
	op->end_call = call;
	op->end_fd = fd;
	op->end_ts = bpf_ktime_get_ns();
	return 0;
}

/*
 * A request's transfer to come, kept for its socket: at its submission
 * (submit, in the submitter's task), or when a poll wakeup queues its retry
 * (io_uring_task_add, in the interrupt that brought the data): a multishot
 * recv armed before the recording is seen so, at each of its datagrams or
 * bytes. A retry's request has its file; its fd is not known there (the
 * wakeup wrote its poll mask over the CQE fields): the socket's last one.
 */
static __always_inline int uring_note(struct io_kiocb *req, bool submit)
{
	__u64 buf = 0, reqp = 0;
	void *data = (void *)req + bpf_core_field_offset(struct io_kiocb, cmd);
	__u8 multi = 0;
	struct cp_uring_op *op;
	struct sock *sk;
	__u64 flags;
	__u8 call;
	int fd, i;

	if (!tgid_is_target(submit ? bpf_get_current_pid_tgid() >> 32 : uring_req_tgid(req)))
		return 0;
	switch (BPF_CORE_READ(req, opcode)) {
	case IORING_OP_CLOSE:
		if (!submit)
			return 0;
		/* a descriptor's, not a fixed file's (file_slot) */
		if (BPF_CORE_READ((struct io_close *)data, file_slot))
			return 0;
		return uring_end(BPF_CORE_READ((struct io_close *)data, fd), CP_SOCK_CLOSE);
	case IORING_OP_SHUTDOWN:
		if (!submit || BPF_CORE_READ(req, flags) & REQ_F_FIXED_FILE)
			return 0;
		return uring_end(BPF_CORE_READ(req, cqe.fd), CP_SOCK_SHUTDOWN);
	case IORING_OP_RECV:
		call = CP_SOCK_RECVFROM;
		break;
	case IORING_OP_SEND:
	case IORING_OP_SEND_ZC:
		call = CP_SOCK_SENDTO;
		break;
	case IORING_OP_RECVMSG:
		call = CP_SOCK_RECVMSG;
		break;
	case IORING_OP_SENDMSG:
	case IORING_OP_SENDMSG_ZC:
		call = CP_SOCK_SENDMSG;
		break;
	case IORING_OP_READ:
		call = CP_SOCK_READ;
		break;
	case IORING_OP_WRITE:
		call = CP_SOCK_WRITE;
		break;
	case IORING_OP_READV:
		call = CP_SOCK_READV;
		break;
	case IORING_OP_WRITEV:
		call = CP_SOCK_WRITEV;
		break;
	default:
		return 0;
	}
	/* the low flag bits are the SQE's (IOSQE_FIXED_FILE_BIT, ...) */
	flags = BPF_CORE_READ(req, flags);
	if (flags & REQ_F_BUFFER_SELECT) {
		if (call != CP_SOCK_RECVFROM && call != CP_SOCK_RECVMSG)
			return 0;
		reqp = (__u64)req;
		/* the SQE's ioprio: IORING_RECV_MULTISHOT */
		multi = !!(BPF_CORE_READ((struct io_sr_msg *)data, flags) & 2);
	}
	fd = -1;
	if (!submit) {
		sk = file_sock(BPF_CORE_READ(req, file));
	} else if (flags & REQ_F_FIXED_FILE) {
		/* the SQE's fd, an index into the ring's table: no descriptor */
		sk = fixed_sock(req, BPF_CORE_READ(req, cqe.fd));
	} else {
		fd = BPF_CORE_READ(req, cqe.fd); /* the SQE's until completion */
		sk = fd_sock(fd);
	}
	op = sk ? uring_op_of(sk) : NULL;
	if (!op)
		return 0;
	if (!reqp && (call == CP_SOCK_READ || call == CP_SOCK_WRITE || call == CP_SOCK_READV ||
		      call == CP_SOCK_WRITEV))
		buf = BPF_CORE_READ((struct io_rw *)data, addr);
	else if (!reqp)
		buf = (__u64)BPF_CORE_READ((struct io_sr_msg *)data, buf);
	if (call == CP_SOCK_SENDTO || call == CP_SOCK_SENDMSG)
		reqp = (__u64)req; /* its destination: its message header's msg_name */
	i = (call_dir(call) - 1) & 1;
	op->buf[i] = buf;
	op->req[i] = reqp;
	if (submit)
		op->fd[i] = fd;
	else if (op->fd[i] < 0) /* the socket's last, either way; -1 in a fresh entry */
		op->fd[i] = op->fd[i ^ 1];
	op->call[i] = call;
	op->multi[i] = multi;
	return 0;
}

/* The provided buffer a recv request on sk is issued with: its message
 * iterator's (one user buffer, as a single buffer's import makes it), or
 * 0. The request must still be sk's: a multishot one is kept while it
 * lasts, and its memory is reused after. */
static __always_inline __u64 uring_selected(struct io_kiocb *req, struct sock *sk)
{
	struct io_async_msghdr *m;

	if (!uring_msghdr_embedded() ||
	    file_sock(BPF_CORE_READ(req, file)) != sk)
		return 0;
	m = BPF_CORE_READ(req, async_data);
	if (!m || BPF_CORE_READ(m, msg.msg_iter.iter_type) !=
		      bpf_core_enum_value(enum iter_type, ITER_UBUF))
		return 0;
	return (__u64)BPF_CORE_READ(m, msg.msg_iter.ubuf);
}

/* The submitted request this transfer on sk is, if one is pending in its
 * direction: its call, fd and buffer into in; a send's request (for its
 * destination, uring_dest), else 0. */
static __always_inline __u64 uring_take(struct sock *sk, int dir, struct cp_inflight *in)
{
	__u64 key = (__u64)sk, req;
	struct cp_uring_op *op = bpf_map_lookup_elem(&uring_ops, &key);
	int i = (dir - 1) & 1;

	if (!op || !op->call[i])
		return 0;
	req = op->req[i];
	in->call = op->call[i];
	in->fd = op->fd[i];
	in->uring = URING_REQ;
	if (req && dir == SOCK_DIR_READ) {
		/* a multishot recvmsg's iterator is past the header, name and
		 * control it puts first in the buffer: at the payload */
		in->arg0 = uring_selected((struct io_kiocb *)req, sk);
		in->uring |= URING_BUF;
	} else {
		in->arg0 = op->buf[i];
	}
	if (!op->multi[i])
		op->call[i] = 0;
	return dir == SOCK_DIR_WRITE ? req : 0;
}

/* Where an io_uring send or sendmsg on an unconnected UDP socket goes: the
 * address it was submitted with, which its preparation copied into the
 * request's message header (kernel memory, unlike a syscall's). */
static __always_inline void uring_dest(struct cp_inflight *in, struct io_kiocb *req)
{
	struct io_async_msghdr *m;
	void *name;

	if (!uring_msghdr_embedded())
		return;
	m = BPF_CORE_READ(req, async_data);
	name = m ? BPF_CORE_READ(m, msg.msg_name) : NULL;
	if (name)
		sockaddr_put(in, name, false);
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

/* An io_uring close or shutdown of sk is pending (the state change is
 * its): its call and fd into in. */
static __always_inline bool uring_end_take(struct sock *sk, struct cp_inflight *in)
{
	__u64 key = (__u64)sk;
	struct cp_uring_op *op = bpf_map_lookup_elem(&uring_ops, &key);

	if (!op || !op->end_call || bpf_ktime_get_ns() - op->end_ts > URING_END_NS)
		return false;
	in->call = op->end_call;
	in->fd = op->end_fd;
	in->uring = URING_REQ;
	op->end_call = 0;
	return true;
}

/* go_read_conn's work, in a process whose Go TLS is probed (g: the
 * goroutine). A global function: its early returns would otherwise each
 * carry on into the socket programs' inlined record-making, which the
 * verifier then followed once for each (128K instructions of
 * sock_recv_length's). */
__noinline int cp_go_read_conn(__u64 g, __u32 tgid, const struct cp_inflight *in)
{
	struct tls_key ck = {};
	struct tls_sock gc = {};
	struct go_key gk = {};
	struct cp_tls_slot *s;

	if (!in)
		return 0;
	gk.g = g;
	gk.tgid = tgid;
	s = bpf_map_lookup_elem(&go_reads, &gk);
	if (!s || !s->active)
		return 0;
	s->fd = in->fd;
	CONN_COPY(s, in);
	s->nested = 1;
	ck.ssl = s->ssl;
	ck.tgid = tgid;
	gc.fd = in->fd;
	CONN_COPY(&gc, in);
	bpf_map_update_elem(&go_conns, &ck, &gc, BPF_ANY);
	return 0;
}

/*
 * The default capture's socket records (blocked.h): sock_sendmsg and
 * sock_recvmsg report every socket's data as it moves, in the task that
 * moves it, so only socket I/O runs a program, not every syscall. The
 * call, fd and buffer come from the task's syscall registers, or for an
 * io_uring request's transfer from its submission (uring_take); another
 * transfer outside a traced call (sendfile) is a plain read or write with
 * fd -1 and no payload. Failed calls (EAGAIN) are not recorded.
 */
static __always_inline int on_sock_io(struct sock *sk, int ret, int flags, int dir)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct task_struct *task;
	struct cp_inflight in = {};
	struct cp_sock_state *st;
	struct pt_regs *regs;
	__u32 unsent = 0;
	__u64 blocked, sent = 0;
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
	blocked = code ? blk_take(task, code, in.fd) : 0;
	if (ret < 0 || (ret == 0 && dir == SOCK_DIR_WRITE))
		return 0; /* an io_uring request's EAGAIN: it is retried later */
	if (!code && cfg_uring)
		sent = uring_take(sk, dir, &in);
	st = bpf_sk_storage_get(&sock_slots, sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
	if (st && !st->tgid)
		st->tgid = id >> 32;
	in.ts = blocked ? blocked : bpf_ktime_get_ns();
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

		/* the sequence of the call's first byte, as the exit of the
		 * raw_syscalls capture records it */
		if (dir == SOCK_DIR_WRITE) {
			in.tcp_seq = tp->write_seq - ret;
			unsent = tp->write_seq - tp->snd_nxt;
		} else {
			in.tcp_seq = tp->copied_seq - (flags & MSG_PEEK ? 0 : ret);
		}
	}
	in.peek = dir == SOCK_DIR_READ && (flags & MSG_PEEK);
	if (dir == SOCK_DIR_READ && code)
		go_read_conn(regs, id >> 32, &in);
	return sock_emit(&in, ret, st, tls_current((__u32)id, dir, &in), unsent);
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

/*
 * Connections begin and end in TCP's state changes (inet_sock_set_state),
 * not in syscall tracepoints: any of those would put every syscall of the
 * host on the kernel's slow path (~50 ns each). A target's listen() records
 * its port; a connection that becomes established on it is known from then
 * on (its first data may arrive before the first read); a target's close()
 * or shutdown() that sends a FIN or RST is a CP_SOCK_CLOSE / SHUTDOWN record
 * with the call's fd. Connects and accepts are not recorded (kpath tells a
 * connection's side from its listening ports and who spoke first), nor are
 * Unix-domain closes.
 */
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
	/* the call's own socket, under its lock in the target's close() or
	 * shutdown(): not another socket whose packets the same task happens
	 * to process meanwhile (loopback), and not the peer's FIN or RST */
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
	return sock_emit(&in, 0, NULL, NULL, 0);
}

SEC("tp_btf/inet_sock_set_state")
int BPF_PROG(inet_sock_set_state_btf, const struct sock *sk, const int oldstate, const int newstate)
{
	EMPTY_GUARD();
	return on_set_state((struct sock *)sk, oldstate, newstate);
}

/*
 * The default capture knows a target's socket from its state in the socket
 * (sock_slots, made by its first read or write or when it was accepted),
 * or, before any, from its local port: one a target listens on. So
 * the data arrivals of the host's other sockets cost one load each, not a
 * hash lookup. Unix-domain peers wake their readers from their own task:
 * nothing to tie to a network wakeup.
 */
static __always_inline bool lean_sock_known(struct sock *sk)
{
	struct cp_sock_state *st = bpf_sk_storage_get(&sock_slots, sk, 0, 0);
	__u16 family = sk->__sk_common.skc_family;
	__u32 tgid;

	if (family != AF_INET && family != AF_INET6)
		return false;
	if (st)
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

	if (btf && cfg_lean) {
		if (!lean_sock_known(sk))
			return 0;
	} else if (!bpf_map_lookup_elem(&sock_states, &key)) {
		return 0;
	}
	e = ev_reserve(CP_EV_SK_DATA_READY, sizeof(*e), bpf_ktime_get_ns());
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
	ev_submit(e);
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
