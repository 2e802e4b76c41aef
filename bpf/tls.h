/* SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only) */
/*
 * TLS plaintext (DESIGN.md section 3, uprobes on TLS library functions):
 * the socket records of a TLS connection carry ciphertext, useless to
 * protocol detection. The recorder attaches tls.bpf.c's uprobes to OpenSSL's
 * SSL_read / SSL_write (and their _ex forms) in each target process that
 * maps libssl; while a thread is inside one of them, its slot holds the
 * call's buffer, and the socket records sock.bpf.c emits meanwhile use it:
 * a write's payload is taken from the plaintext buffer, a read's payload is
 * left out and the plaintext is recorded at SSL_read's return
 * (CP_EV_TLS_READ), when it exists.
 */
#ifndef CRITPATH_BPF_TLS_H
#define CRITPATH_BPF_TLS_H

#include "common.h"
#include "syscalls.h" /* struct cp_inflight */

/* Whether the TLS programs are loaded (not --no-tls): the socket hooks
 * skip the check below when they are not. */
extern const volatile __u8 cfg_tls;

/* Threads inside a traced TLS call, one bit per tid (tids are below
 * PID_MAX_LIMIT, as tgids): the one check a socket call pays to know it is
 * not one, a load where a task-storage lookup would be a helper call. */
extern __u64 tls_busy_bits[TARGET_WORDS];

/* A thread's TLS call in progress, and what its socket reads found. */
struct cp_tls_slot {
	__u64 enter_ts;
	__u64 ssl; /* the call's SSL * (its connection) */
	__u64 buf;
	__u64 num;
	__u64 out; /* _ex: where the library stores the byte count */
	/* a socket read inside a read call on this SSL * was the first after
	 * a change of direction: its plaintext is recorded at the return of
	 * the read on the same SSL * that returns data (a record may take
	 * several calls of a non-blocking reader); 0: none wanted */
	__u64 want_ssl;
	__u64 want_ts; /* when that socket read began */
	/* a read on this SSL * returned what its handshake had read ahead,
	 * with no socket read inside: the next socket write inside a write
	 * on it is a change of direction all the same (its payload taken) */
	__u64 turn_ssl;
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

/* The current thread's TLS call, when it is inside one that moves data in
 * direction dir (SOCK_DIR_*), else NULL: a read inside SSL_write (or a
 * write inside SSL_read: a key update, a renegotiation) is protocol's own.
 * Inside a handshake (SSL_do_handshake) none is: its records keep their
 * ciphertext, which the report reads the handshake from. A socket read
 * there (in: the call) gives the SSL *'s connection, for the plaintext
 * the library took in with the handshake's last flight (tls.bpf.c). */
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

/* Go's crypto/tls (tls.bpf.c): the processes whose Read and Write are
 * probed, one bit per tgid (set by the recorder), and the goroutines
 * inside a Read: its buffer, *tls.Conn (the slot's ssl) and the connection
 * of a socket read it made. */
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

/* A connection's SSL * (Go: *tls.Conn), in its process: forked workers
 * have the same addresses. */
struct tls_key {
	__u64 ssl;
	__u32 tgid;
	__u32 pad;
};

/* A TLS connection's socket: its fd and 4-tuple as a socket read inside
 * one of its library calls gave them (CONN_COPY's field names). */
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

/* A Go connection's socket, by its *tls.Conn: the last one a socket read
 * inside its handshake or a Read gave (go_read_conn), for the Reads the
 * library answers from records read before (net/http's server reads the
 * client's Finished and its first request together in the handshake). */

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, struct tls_key);
	__type(value, struct tls_sock);
} go_conns SEC(".maps") __weak;

/* go_read_conn's work (tls.bpf.c) */
int cp_go_read_conn(__u64 g, __u32 tgid, const struct cp_inflight *in);

/* A socket read (in: its connection) by a thread of tgid, whose user
 * registers are regs: when it is made inside a Go Read or handshake (its
 * goroutine, in Go's g register, is in go_reads), the Read's plaintext is
 * that connection's, whichever thread the goroutine returns on, and so is
 * its *tls.Conn's (go_conns). */
static __always_inline void go_read_conn(struct pt_regs *regs, __u32 tgid,
					 const struct cp_inflight *in)
{
#if defined(__TARGET_ARCH_x86)
	if (cfg_tls && pid_bit(go_tls_bits, tgid))
		cp_go_read_conn(regs->r14, tgid, in);
#endif
}

#endif /* CRITPATH_BPF_TLS_H */
