// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/*
 * OpenSSL's SSL_read, SSL_read_ex, SSL_write and SSL_write_ex in target
 * processes (tls.h says why): one uprobe at the entry and one uretprobe at
 * the return of each, attached by the recorder per process
 * (user/record_tls.c) with enum cp_tls_call as the BPF cookie. The entry
 * keeps the call's buffer in the thread's slot for the socket hooks; the
 * return of a read records the plaintext when a socket read inside it
 * asked for it (the same economy as socket payloads: the first read after
 * a change of direction).
 */
#include "tls.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* The default payload's reservation holds the 8-byte word the copy zeroes
 * at the end of the data (as sock.bpf.c's SOCK_SMALL). */
#define TLS_SMALL (offsetof(struct cp_ev_tls_read, payload) + CP_PAYLOAD_DEFAULT + 8)

SEC("uprobe")
int tls_enter(struct pt_regs *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct cp_tls_slot *s;

	EMPTY_GUARD();
	/* attached per target process, but a target's fork inherits the
	 * breakpoints before the recorder knows whether to follow it */
	if (!tgid_is_target(id >> 32))
		return 0;
	s = bpf_task_storage_get(&tls_slots, bpf_get_current_task_btf(), 0,
				 BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!s) {
		count_drop();
		return 0;
	}
	s->enter_ts = bpf_ktime_get_ns();
	s->call = (__u8)bpf_get_attach_cookie(ctx);
	s->ssl = PT_REGS_PARM1(ctx);
	s->buf = PT_REGS_PARM2(ctx);
	s->num = PT_REGS_PARM3(ctx);
	s->out = PT_REGS_PARM4(ctx);
	s->active = 1;
	s->wrote = 0;
	tls_busy_set((__u32)id, true);
	return 0;
}

/* The plaintext prefix of a read that returned n bytes. */
static __always_inline void tls_read_emit(struct cp_tls_slot *s, __s64 n)
{
	struct cp_ev_tls_read *e;
	__u32 limit = s->h2 ? cfg_h2_payload_bytes : cfg_payload_bytes;
	__u64 len = n, cap, head = 0;

	/* a client's HTTP/2 preface, read before the server wrote anything
	 * that showed the connection speaks it: at HTTP/2's length too */
	if (!s->h2 && cfg_payload_bytes && n >= 8 &&
	    !bpf_probe_read_user(&head, sizeof(head), (const void *)s->buf) &&
	    head == 0x5448202a20495250ull) /* "PRI * HT" */
		limit = cfg_h2_payload_bytes;

	if (len > limit)
		len = limit;
	/* reserved at the default payload's size when that is the most
	 * --payload-bytes takes, as sock_emit does */
	if (limit <= CP_PAYLOAD_DEFAULT) {
		e = ring_reserve(TLS_SMALL);
		cap = CP_PAYLOAD_DEFAULT;
	} else {
		e = ring_reserve(sizeof(*e));
		cap = CP_PAYLOAD_MAX;
	}
	if (!e) {
		count_drop();
		return;
	}
	if (len > cap)
		len = cap;
	barrier_var(len);
	if (len > cap)
		len = 0;
	/* the padding after the data must not carry stale ring-buffer bytes */
	*(__u64 *)(e->payload + (len & 0x1f8)) = 0;
	if (len && bpf_probe_read_user(e->payload, len, (const void *)s->buf))
		len = 0;
	hdr_fill(&e->h, CP_EV_TLS_READ, CP_ALIGN(offsetof(struct cp_ev_tls_read, payload) + len),
		 bpf_ktime_get_ns());
	e->enter_ts = s->enter_ts;
	e->bytes = n;
	e->fd = s->fd;
	e->call = s->call;
	e->__pad = 0;
	CONN_COPY(e, s);
	e->payload_len = len;
	__builtin_memset(e->__pad2, 0, sizeof(e->__pad2));
	ev_submit(e);
}

SEC("uretprobe")
int tls_return(struct pt_regs *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct cp_tls_slot *s;
	__s64 n;

	EMPTY_GUARD();
	if (!tgid_is_target(id >> 32))
		return 0;
	tls_busy_set((__u32)id, false);
	s = bpf_task_storage_get(&tls_slots, bpf_get_current_task_btf(), 0, 0);
	if (!s || !s->active)
		return 0;
	s->active = 0;
	/* another connection's read (an event loop) leaves it for its own */
	if (tls_call_writes(s->call) || !s->want_ssl || s->want_ssl != s->ssl)
		return 0;
	n = (int)PT_REGS_RC(ctx);
	if (s->call == CP_TLS_SSL_READ_EX) {
		/* 1 on success, the count in *readbytes (a size_t) */
		__u64 got = 0;

		if (n != 1 || bpf_probe_read_user(&got, sizeof(got), (const void *)s->out))
			return 0;
		n = got;
	}
	if (n <= 0)
		return 0; /* no data yet (SSL_ERROR_WANT_READ): the next call's */
	s->want_ssl = 0;
	tls_read_emit(s, n);
	return 0;
}
