// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/* SSL_read/SSL_write (and _ex), Go's crypto/tls: the entry keeps the buffer
 * for the socket hooks; a read's return records its plaintext when a socket
 * read inside it asked for it. */
#include "tls.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* with the 8-byte word zeroed past the data (as SOCK_SMALL) */
#define TLS_SMALL (offsetof(struct cp_ev_tls_read, payload) + CP_PAYLOAD_DEFAULT + 8)

/* An HTTP/2 connection over TLS, by SSL *: walk state and its socket. */
struct tls_h2_conn {
	struct cp_sock_state st;
	struct tls_sock c;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, struct tls_key);
	__type(value, struct tls_h2_conn);
} tls_h2 SEC(".maps");

/* On memory buffers (Node.js) no socket read is inside SSL_read: plaintext
 * goes out with fd -1 for the report to pair; tls_bio: each SSL *'s last
 * direction. */
__u64 tls_fd_bits[TARGET_WORDS]; /* tgids whose calls move the socket's bytes inside */

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, struct tls_key);
	__type(value, __u8);
} tls_bio SEC(".maps");

/* A handshake's connection, by SSL *: a library that reads ahead (nginx)
 * returns the first request with no socket read inside. */
struct tls_hs {
	struct tls_sock c;
	__u64 ts; /* when the handshake's last call began */
	__u8 fresh;
	__u8 __pad[7];
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, struct tls_key);
	__type(value, struct tls_hs);
} tls_hs SEC(".maps");

static __always_inline void tls_handshake_return(struct cp_tls_slot *s, const struct tls_key *k)
{
	struct tls_hs v = {};

	if (!s->nested) /* no socket read inside (a write's turn, memory buffers) */
		return;
	v.c.fd = s->fd;
	CONN_COPY(&v.c, s);
	v.ts = s->enter_ts;
	v.fresh = 1;
	bpf_map_update_elem(&tls_hs, k, &v, BPF_ANY);
	bpf_map_delete_elem(&tls_h2, k);
	bpf_map_delete_elem(&tls_bio, k);
	if (s->want_ssl == k->ssl)
		s->want_ssl = 0;
}

static __always_inline bool tls_fd_style(__u32 tgid)
{
	return pid_bit(tls_fd_bits, tgid);
}

/* Whether ssl's call of n bytes in direction dir is the first since a call
 * the other way, or follows a short one (CP_SHORT_READ). */
static __always_inline bool tls_bio_turn(const struct tls_key *k, __u8 dir, __s64 n)
{
	__u8 *last = bpf_map_lookup_elem(&tls_bio, k), v = dir;

	if (last && *last == dir)
		return false;
	if (n <= CP_SHORT_READ)
		v |= 0x80;
	if (last)
		*last = v;
	else
		bpf_map_update_elem(&tls_bio, k, &v, BPF_ANY);
	return true;
}

SEC("uprobe")
int tls_enter(struct pt_regs *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct cp_tls_slot *s;

	EMPTY_GUARD();
	/* a fork inherits the breakpoints before the recorder decides on it */
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
	s->nested = 0;
	tls_busy_set((__u32)id, true);
	return 0;
}

#define TLS_EMIT_SOCK 1	 /* s has the connection */
#define TLS_EMIT_WRITE 2 /* a write's plaintext, else a read's */

/* The plaintext prefix of a call that returned n bytes; h2: the connection's
 * HTTP/2 state or NULL; how: TLS_EMIT_*. Global: verified once, not again
 * along every path of each of the three programs calling it (~0.3 s each). */
__noinline int cp_tls_read_emit(struct cp_tls_slot *s, const struct tls_key *k, __s64 n,
				struct tls_h2_conn *h2, __u32 how)
{
	struct cp_ev_tls_read *e;
	__u32 limit = cfg_payload_bytes, d = !!(how & TLS_EMIT_WRITE);
	__u64 len = n, cap, pieces = 0, head[2] = {}, hn = n >= 16 ? 16 : 9;
	bool sock = how & TLS_EMIT_SOCK;

	if (!s || !k)
		return 0;

	/* HTTP/2 from here on: a preface, or on memory buffers any first plaintext */
	if (!h2 && cfg_payload_bytes &&
	    (s->h2 || (n >= 9 && !bpf_probe_read_user(head, hn, (const void *)s->buf) &&
		       sock_h2((const __u8 *)head, hn)))) {
		struct tls_h2_conn fresh = {};

		bpf_map_update_elem(&tls_h2, k, &fresh, BPF_NOEXIST);
		h2 = bpf_map_lookup_elem(&tls_h2, k);
	}
	if (h2) {
		limit = cfg_h2_payload_bytes;
		if (sock) { /* the connection, for the reads with no socket read */
			h2->c.fd = s->fd;
			CONN_COPY(&h2->c, s);
		}
	}
	if (len > limit)
		len = limit;
	/* sized as sock_emit does; on HTTP/2 with room for the pieces */
	if (h2) {
		e = ring_reserve(sizeof(*e) + H2_ROOM);
		cap = CP_PAYLOAD_MAX;
	} else if (limit <= CP_PAYLOAD_DEFAULT) {
		e = ring_reserve(TLS_SMALL);
		cap = CP_PAYLOAD_DEFAULT;
	} else {
		e = ring_reserve(sizeof(*e));
		cap = CP_PAYLOAD_MAX;
	}
	if (!e) {
		if (h2)
			h2->st.h2_sync = 0;
		count_drop();
		return 0;
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
	if (h2 && len)
		pieces = cp_h2_walk(&h2->st, (struct h2_room *)e->payload, s->buf, 0,
				    H2_XFER(n, len, d, 0));
	hdr_fill(&e->h, CP_EV_TLS_READ,
		 CP_ALIGN(offsetof(struct cp_ev_tls_read, payload) + len + pieces),
		 bpf_ktime_get_ns());
	e->enter_ts = s->enter_ts;
	e->bytes = n;
	e->call = s->call;
	e->flags = pieces ? CP_SOCK_F_PIECES : 0;
	if (sock) {
		e->fd = s->fd;
		CONN_COPY(e, s);
	} else if (h2 && h2->c.fd) {
		e->fd = h2->c.fd;
		CONN_COPY(e, &h2->c);
	} else { /* on memory buffers: the report finds the connection */
		e->fd = -1;
		e->family = e->lport = e->rport = 0;
		e->tcp_seq = 0;
		__builtin_memset(e->laddr, 0, CP_ADDR_LEN);
		__builtin_memset(e->raddr, 0, CP_ADDR_LEN);
	}
	e->payload_len = len;
	for (int i = 0; i < 6; i++)
		e->tls_id[i] = k->ssl >> (8 * i);
	ev_submit(e);
	return 0;
}

/* The bytes the returning call moved: the plain forms' return value; the
 * _ex forms return 1 and store a size_t through their last argument. */
static __always_inline __s64 tls_moved(struct pt_regs *ctx, struct cp_tls_slot *s)
{
	__s64 n = (int)PT_REGS_RC(ctx);
	__u64 got = 0;

	if (s->call != CP_TLS_SSL_READ_EX && s->call != CP_TLS_SSL_WRITE_EX &&
	    s->call != CP_TLS_SSL_READ_ANY && s->call != CP_TLS_SSL_WRITE_ANY)
		return n;
	if (n != 1 || bpf_probe_read_user(&got, sizeof(got), (const void *)s->out))
		return 0;
	return got;
}

SEC("uretprobe")
int tls_return(struct pt_regs *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct tls_h2_conn *h2;
	struct cp_tls_slot *s;
	struct tls_hs *hs;
	bool sock, bio;
	__u32 tgid;
	struct tls_key k = {};
	__s64 n;

	EMPTY_GUARD();
	if (!tgid_is_target(id >> 32))
		return 0;
	tls_busy_set((__u32)id, false);
	s = bpf_task_storage_get(&tls_slots, bpf_get_current_task_btf(), 0, 0);
	if (!s || !s->active)
		return 0;
	s->active = 0;
	tgid = id >> 32;
	k.ssl = s->ssl;
	k.tgid = tgid;
	if (s->nested && !tls_fd_style(tgid)) /* reads the socket inside */
		__sync_fetch_and_or(&tls_fd_bits[(tgid >> 6) & (TARGET_WORDS - 1)],
				    1ull << (tgid & 63));
	if (s->call == CP_TLS_SSL_HANDSHAKE) {
		tls_handshake_return(s, &k);
		return 0;
	}
	if (tls_call_writes(s->call)) {
		/* on memory buffers: the first write after a read, and every
		 * HTTP/2 write */
		n = tls_moved(ctx, s);
		if (n <= 0 || s->nested || tls_fd_style(tgid) || !cfg_payload_bytes)
			return 0;
		h2 = bpf_map_lookup_elem(&tls_h2, &k);
		if (tls_bio_turn(&k, SOCK_DIR_WRITE, n) || h2)
			cp_tls_read_emit(s, &k, n, h2, TLS_EMIT_WRITE);
		return 0;
	}
	/* another connection's read leaves it for its own, but HTTP/2's and
	 * memory buffers' reads are all recorded */
	if (!cfg_payload_bytes)
		return 0;
	sock = s->want_ssl && s->want_ssl == k.ssl;
	h2 = bpf_map_lookup_elem(&tls_h2, &k);
	bio = !sock && !tls_fd_style(tgid);
	hs = bio ? NULL : bpf_map_lookup_elem(&tls_hs, &k);
	if (sock && hs && hs->ts > s->want_ts) {
		/* the waiting socket read was an earlier connection's on this SSL * */
		sock = false;
		s->want_ssl = 0;
	}
	if (hs && !hs->fresh)
		hs = NULL;
	if (!sock && !bio && !hs && (!h2 || !h2->c.fd))
		return 0;
	n = tls_moved(ctx, s);
	if (n <= 0)
		return 0; /* no data yet (SSL_ERROR_WANT_READ): the next call's */
	if (hs) {
		/* the first data since the handshake: what it read ahead,
		 * unless a socket read inside brought it */
		hs->fresh = 0;
		if (!sock && s->nested && (!h2 || !h2->c.fd))
			return 0;
		if (!sock && !s->nested) {
			s->fd = hs->c.fd;
			CONN_COPY(s, &hs->c);
			s->turn_ssl = k.ssl;
			sock = true;
		}
	}
	if (sock)
		s->want_ssl = 0;
	if (bio && !tls_bio_turn(&k, SOCK_DIR_READ, n) && !h2)
		return 0;
	cp_tls_read_emit(s, &k, n, h2, sock ? TLS_EMIT_SOCK : 0);
	return 0;
}

/* Go's crypto/tls: calls keyed by goroutine (g moves between threads). Read's
 * return is a uprobe on each RET (a uretprobe breaks stack growth) or on its
 * memmove (CP_TLS_GO_AT_COPY). Register ABI, Go 1.17+. */
#if defined(__TARGET_ARCH_x86)
#define GO_RECV(x) ((x)->ax)
#define GO_BUF(x) ((x)->bx)
#define GO_LEN(x) ((x)->cx)
#define GO_RET(x) ((x)->ax)
#define GO_G(x) ((x)->r14)
#elif defined(__TARGET_ARCH_arm64)
#define GO_RECV(x) ((x)->regs[0])
#define GO_BUF(x) ((x)->regs[1])
#define GO_LEN(x) ((x)->regs[2])
#define GO_RET(x) ((x)->regs[0])
#define GO_G(x) ((x)->regs[28])
#endif

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct cp_tls_slot);
} go_scratch SEC(".maps");

SEC("uprobe")
int go_tls_enter(struct pt_regs *ctx)
{
#ifdef GO_G
	__u64 id = bpf_get_current_pid_tgid();
	__u32 zero = 0, tgid = id >> 32;
	struct cp_tls_slot *s, *hs;
	struct tls_key k = {};
	struct go_key gk = {};
	struct tls_h2_conn *h2;
	__s64 n;

	EMPTY_GUARD();
	if (!tgid_is_target(tgid) || !cfg_payload_bytes)
		return 0;
	k.ssl = GO_RECV(ctx);
	k.tgid = tgid;
	s = bpf_map_lookup_elem(&go_scratch, &zero);
	if (!s)
		return 0;
	__builtin_memset(s, 0, sizeof(*s));
	s->enter_ts = bpf_ktime_get_ns();
	s->call = (__u8)bpf_get_attach_cookie(ctx);
	s->ssl = GO_RECV(ctx);
	s->buf = GO_BUF(ctx);
	if (s->call == CP_TLS_GO_HANDSHAKE) {
		/* a new connection, maybe in a closed one's memory: forget that one */
		bpf_map_delete_elem(&tls_h2, &k);
		bpf_map_delete_elem(&tls_bio, &k);
		bpf_map_delete_elem(&go_conns, &k);
	}
	if (s->call == CP_TLS_GO_READ || s->call == CP_TLS_GO_HANDSHAKE) {
		s->active = 1;
		gk.g = GO_G(ctx);
		gk.tgid = tgid;
		if (bpf_map_update_elem(&go_reads, &gk, s, BPF_ANY))
			count_drop();
		return 0;
	}
	/* a Write: the goroutine's handshake is over */
	gk.g = GO_G(ctx);
	gk.tgid = tgid;
	hs = bpf_map_lookup_elem(&go_reads, &gk);
	if (hs && hs->call == CP_TLS_GO_HANDSHAKE)
		hs->active = 0;
	/* Write writes all of b or fails: the plaintext is there at entry */
	n = (__s64)GO_LEN(ctx);
	if (n <= 0)
		return 0;
	h2 = bpf_map_lookup_elem(&tls_h2, &k);
	if (tls_bio_turn(&k, SOCK_DIR_WRITE, n) || h2)
		cp_tls_read_emit(s, &k, n, h2, TLS_EMIT_WRITE);
#endif
	return 0;
}

SEC("uprobe")
int go_tls_return(struct pt_regs *ctx)
{
#ifdef GO_G
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = id >> 32;
	struct tls_key k = {};
	struct go_key gk = {};
	struct tls_h2_conn *h2;
	struct cp_tls_slot *s;
	struct tls_sock *gc;
	__s64 n;

	EMPTY_GUARD();
	if (!tgid_is_target(tgid))
		return 0;
	gk.g = GO_G(ctx);
	gk.tgid = tgid;
	s = bpf_map_lookup_elem(&go_reads, &gk);
	if (!s || !s->active || s->call != CP_TLS_GO_READ)
		return 0;
	if (bpf_get_attach_cookie(ctx) & CP_TLS_GO_AT_COPY) {
		if (GO_RECV(ctx) != s->buf)
			return 0; /* not into b: not the copy of its plaintext */
		n = (__s64)GO_LEN(ctx);
		s->buf = GO_BUF(ctx);
	} else {
		n = (__s64)GO_RET(ctx);
	}
	s->active = 0;
	if (n <= 0)
		return 0;
	k.ssl = s->ssl;
	k.tgid = tgid;
	h2 = bpf_map_lookup_elem(&tls_h2, &k);
	if (!tls_bio_turn(&k, SOCK_DIR_READ, n) && !h2)
		return 0;
	/* its connection: from a socket read inside it or an earlier Read,
	 * else the report finds it */
	if (!s->nested) {
		gc = bpf_map_lookup_elem(&go_conns, &k);
		if (gc) {
			s->fd = gc->fd;
			CONN_COPY(s, gc);
			s->nested = 1;
		}
	}
	cp_tls_read_emit(s, &k, n, h2, s->nested ? TLS_EMIT_SOCK : 0);
#endif
	return 0;
}

/* go_read_conn's work. Global: inlined, each early return would be verified
 * through the socket programs' record building. */
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
