/* SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only) */
/* What the socket files share: a descriptor's socket, a socket's addresses,
 * a UDP datagram's sender, the socket's state. */
#ifndef CRITPATH_BPF_SOCK_H
#define CRITPATH_BPF_SOCK_H

#include "blocked.h"
#include "tls.h"

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

static __always_inline struct sock *file_sock(struct file *file);

/* The current task's socket at fd, or NULL; a BTF-typed pointer (direct loads). */

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

/* sk from a number (the inflight entry), as a BTF-typed pointer. */
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

/* Family, type and the 4-tuple (addresses network order, ports host order). */
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
		/* a reset connection's local port is cleared (__inet_put_port) */
		if (!in->lport)
			in->lport = bpf_ntohs(BPF_CORE_READ((struct inet_sock *)sk, inet_sport));
	}
}

static __always_inline void sk_read_info(struct sock *sk, struct cp_inflight *in)
{
	sk_info(true, sk, in);
}

/* An IPv4 address as its family's socket sees it (::ffff:a.b.c.d on AF_INET6). */
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

/* A UDP datagram's addresses (ver 0: none; ports host order). */
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

/* A UDP datagram's addresses from its headers; false when skb is not one. */
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

/* A datagram's source as the remote end and, when local, its destination. */
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

/* A datagram just queued on a UDP socket: the queue's tail (an unconnected
 * socket's own addresses say nothing). A reader may have taken the queue
 * already (reader_queue): then the read says it (udp_read_from). */
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

/* A sockaddr_in/_in6 of in's family as its remote end. */
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

/* An unconnected UDP write's destination: sendto's dest_addr or msg_name. */
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

/* The sender of a target's UDP read, by pid_tgid, from the cgroup recvmsg
 * hook until the read's record takes it: no tracepoint sees the datagram in
 * the reader's task. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u64);
	__type(value, struct cp_udp_from);
} udp_senders SEC(".maps") __weak;


/* An unconnected UDP read's sender (use); taken by every datagram read. */
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

#endif /* CRITPATH_BPF_SOCK_H */
