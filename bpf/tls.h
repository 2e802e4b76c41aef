/* SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only) */
/* TLS plaintext: a thread inside SSL_read/SSL_write holds the buffer in its
 * slot; socket writes take their payload from it. */
#ifndef CRITPATH_BPF_TLS_H
#define CRITPATH_BPF_TLS_H

#include "common.h"
#include "syscalls.h" /* struct cp_inflight */

/* the TLS programs are loaded (not --no-tls) */
extern const volatile __u8 cfg_tls;

/* Threads inside a TLS call, a bit per tid: a load, not a helper call. */
extern __u64 tls_busy_bits[TARGET_WORDS];

/* A thread's TLS call in progress, and what its socket reads found. */
struct cp_tls_slot {
	__u64 enter_ts;
	__u64 ssl; /* the call's SSL * (its connection) */
	__u64 buf;
	__u64 num;
	__u64 out; /* _ex: where the library stores the byte count */
	__u64 want_ssl; /* a read's plaintext is wanted (a turn of direction); 0: none */
	__u64 want_ts;	/* when that socket read began */
	__u64 turn_ssl; /* the handshake's read-ahead came back: the next write turns */
	__u8 call;   /* enum cp_tls_call */
	__u8 active; /* inside the call */
	__u8 h2;     /* want_ssl's connection speaks HTTP/2: the longer prefix */
	__u8 wrote;  /* a socket write inside this write call took the payload */
	__s32 fd; /* that socket read's */
	__u16 family;
	__u16 lport;
	__u16 rport;
	__u8 nested; /* a socket call ran inside this call */
	__u8 __pad2;
	__u32 tcp_seq;
	__u8 laddr[CP_ADDR_LEN];
	__u8 raddr[CP_ADDR_LEN];
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct cp_tls_slot);
} tls_slots SEC(".maps") __weak;

static __always_inline void tls_busy_set(__u32 tid, bool on)
{
	__u64 *w = &tls_busy_bits[(tid >> 6) & (TARGET_WORDS - 1)];

	if (on)
		__sync_fetch_and_or(w, 1ull << (tid & 63));
	else
		__sync_fetch_and_and(w, ~(1ull << (tid & 63)));
}

static __always_inline bool tls_call_writes(__u8 call)
{
	return cp_tls_call_writes(call);
}

/* The thread's TLS call if it moves data in direction dir, else NULL (a read
 * inside SSL_write is the protocol's own); a handshake's read notes the socket. */
static __always_inline struct cp_tls_slot *tls_current(__u32 tid, int dir,
						       const struct cp_inflight *in)
{
	struct cp_tls_slot *s;

	if (!cfg_tls || !pid_bit(tls_busy_bits, tid))
		return NULL;
	s = bpf_task_storage_get(&tls_slots, bpf_get_current_task_btf(), 0, 0);
	if (!s || !s->active)
		return NULL;
	if (s->call == CP_TLS_SSL_HANDSHAKE) {
		if (dir == SOCK_DIR_READ) {
			s->fd = in->fd;
			CONN_COPY(s, in);
			s->nested = 1;
		}
		return NULL;
	}
	if (tls_call_writes(s->call) != (dir == SOCK_DIR_WRITE))
		return NULL;
	return s;
}

/* Go processes whose Read/Write are probed, and goroutines inside a Read. */
extern __u64 go_tls_bits[TARGET_WORDS];

struct go_key {
	__u64 g;
	__u32 tgid;
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, struct go_key);
	__type(value, struct cp_tls_slot);
} go_reads SEC(".maps") __weak;

/* SSL * (Go: *tls.Conn) with its process: forked workers share addresses. */
struct tls_key {
	__u64 ssl;
	__u32 tgid;
	__u32 pad;
};

/* A TLS connection's socket, from a socket read inside one of its calls. */
struct tls_sock {
	__s32 fd;
	__u16 family;
	__u16 lport;
	__u16 rport;
	__u16 __pad;
	__u32 tcp_seq;
	__u8 laddr[CP_ADDR_LEN];
	__u8 raddr[CP_ADDR_LEN];
};

/* A Go connection's socket, for Reads answered from buffered records. */

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, struct tls_key);
	__type(value, struct tls_sock);
} go_conns SEC(".maps") __weak;

/* go_read_conn's work (tls.bpf.c) */
int cp_go_read_conn(__u64 g, __u32 tgid, const struct cp_inflight *in);

/* A socket read inside a Go Read or handshake names its connection. */
static __always_inline void go_read_conn(struct pt_regs *regs, __u32 tgid,
					 const struct cp_inflight *in)
{
#if defined(__TARGET_ARCH_x86)
	if (cfg_tls && pid_bit(go_tls_bits, tgid))
		cp_go_read_conn(regs->r14, tgid, in);
#endif
}

#endif /* CRITPATH_BPF_TLS_H */
