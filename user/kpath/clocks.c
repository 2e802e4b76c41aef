// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/* clocks.h: hosts' clock offsets from the TCP bytes between them. */
#include <netinet/in.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "clocks.h"
#include "kpath_internal.h"

#define CL_BUCKETS 4096 /* per table, a power of 2 */
#define CL_RING 8	/* sends or arrivals kept per address */
#define CL_THREADS 8192 /* threads whose last step is kept, a power of 2 */

/* An end of a connection: family, port, address (IPv4 in the first 4) */
struct cl_ep {
	uint16_t family, port;
	uint8_t addr[CP_ADDR_LEN];
};

struct cl_obs {
	uint64_t t;
	uint32_t seq, len;
	uint32_t host;
};

struct cl_bucket {
	struct cl_ep key;
	uint8_t n, next;
	struct cl_obs o[CL_RING];
};

enum { CL_SEND_BY_SENDER, CL_SEND_BY_RECEIVER, CL_ARR_BY_SENDER, CL_ARR_BY_RECEIVER, CL_TABLES };

/* A thread's last step known to precede its next send. */
struct cl_thread {
	uint64_t key; /* host << 32 | tid, + 1 (0: empty) */
	uint64_t ts;
};

struct kp_clocks {
	uint32_t nhosts;
	struct cl_thread th[CL_THREADS];
	struct cl_bucket *tab[CL_TABLES];
	/* for messages x → y: the largest (send - arrival), and how many */
	int64_t bound[KP_CLOCK_HOSTS][KP_CLOCK_HOSTS];
	uint64_t count[KP_CLOCK_HOSTS][KP_CLOCK_HOSTS];
};

struct kp_clocks *kp_clocks__new(uint32_t nhosts)
{
	struct kp_clocks *cl = calloc(1, sizeof(*cl));

	if (!cl)
		return NULL;
	cl->nhosts = nhosts < KP_CLOCK_HOSTS ? nhosts : KP_CLOCK_HOSTS;
	for (int i = 0; i < CL_TABLES; i++) {
		cl->tab[i] = calloc(CL_BUCKETS, sizeof(*cl->tab[i]));
		if (!cl->tab[i]) {
			kp_clocks__free(cl);
			return NULL;
		}
	}
	return cl;
}

void kp_clocks__free(struct kp_clocks *cl)
{
	if (!cl)
		return;
	for (int i = 0; i < CL_TABLES; i++)
		free(cl->tab[i]);
	free(cl);
}

static uint32_t ep_slot(const struct cl_ep *e)
{
	uint64_t w[2], h = (uint64_t)e->family << 16 ^ e->port;

	memcpy(w, e->addr, sizeof(w));
	h = (h ^ w[0]) * 0x9e3779b97f4a7c15ull;
	h = (h ^ w[1]) * 0xff51afd7ed558ccdull;
	return (uint32_t)(h >> 40) & (CL_BUCKETS - 1);
}

static bool ep_eq(const struct cl_ep *x, const struct cl_ep *y)
{
	return x->family == y->family && x->port == y->port &&
	       !memcmp(x->addr, y->addr, CP_ADDR_LEN);
}

static void put(struct kp_clocks *cl, int table, const struct cl_ep *e, const struct cl_obs *o)
{
	struct cl_bucket *b = &cl->tab[table][ep_slot(e)];

	if (!b->n || !ep_eq(&b->key, e)) {
		b->key = *e;
		b->n = b->next = 0;
	}
	b->o[b->next] = *o;
	b->next = (uint8_t)((b->next + 1) % CL_RING);
	if (b->n < CL_RING)
		b->n++;
}

/* x sent at ts, y had the byte at ta: c_y - c_x >= ts - ta */
static void bound(struct kp_clocks *cl, uint32_t x, uint32_t y, uint64_t ts, uint64_t ta)
{
	int64_t d = (int64_t)(ts - ta);

	if (!cl->count[x][y]++ || d > cl->bound[x][y])
		cl->bound[x][y] = d;
}

static bool match(struct kp_clocks *cl, int table, const struct cl_ep *e, const struct cl_obs *o,
		  bool o_sends)
{
	const struct cl_bucket *b = &cl->tab[table][ep_slot(e)];
	bool any = false;

	if (!b->n || !ep_eq(&b->key, e))
		return false;
	for (uint32_t i = 0; i < b->n; i++) {
		const struct cl_obs *p = &b->o[i];
		const struct cl_obs *s = o_sends ? o : p, *a = o_sends ? p : o;

		if (p->host == o->host || (uint32_t)(a->seq - s->seq) >= s->len)
			continue;
		bound(cl, s->host, a->host, s->t, a->t);
		any = true;
	}
	return any;
}

static void send_obs(struct kp_clocks *cl, const struct cl_ep *from, const struct cl_ep *to,
		     const struct cl_obs *o)
{
	if (!match(cl, CL_ARR_BY_SENDER, from, o, true))
		match(cl, CL_ARR_BY_RECEIVER, to, o, true);
	put(cl, CL_SEND_BY_SENDER, from, o);
	put(cl, CL_SEND_BY_RECEIVER, to, o);
}

static void arrival_obs(struct kp_clocks *cl, const struct cl_ep *from, const struct cl_ep *to,
			const struct cl_obs *o)
{
	if (!match(cl, CL_SEND_BY_SENDER, from, o, false))
		match(cl, CL_SEND_BY_RECEIVER, to, o, false);
	put(cl, CL_ARR_BY_SENDER, from, o);
	put(cl, CL_ARR_BY_RECEIVER, to, o);
}

static bool ends(uint16_t family, uint16_t lport, uint16_t rport, const uint8_t *laddr,
		 const uint8_t *raddr, struct cl_ep *l, struct cl_ep *r)
{
	struct kp_addr a;

	if (family != AF_INET && family != AF_INET6)
		return false;
	kp__addr_of(&a, family, lport, rport, laddr, raddr);
	l->family = r->family = a.family;
	l->port = a.lport;
	r->port = a.rport;
	memcpy(l->addr, a.laddr, CP_ADDR_LEN);
	memcpy(r->addr, a.raddr, CP_ADDR_LEN);
	return true;
}

/* one stream transfer (recvmmsg/sendmmsg are several datagrams) */
static bool sock_read(uint8_t call)
{
	return kp__sock_read(call) && call != CP_SOCK_RECVMMSG;
}

static bool sock_write(uint8_t call)
{
	return kp__sock_write(call) && call != CP_SOCK_SENDMMSG;
}

static struct cl_thread *thread_slot(struct kp_clocks *cl, uint32_t host, uint32_t tid)
{
	uint64_t key = ((uint64_t)host << 32 | tid) + 1;
	struct cl_thread *t = &cl->th[(key * 0x9e3779b97f4a7c15ull) >> 51 & (CL_THREADS - 1)];

	if (t->key != key) {
		t->key = key;
		t->ts = 0;
	}
	return t;
}

/* A step of tid at ts: its next send began after it */
static void thread_step(struct kp_clocks *cl, uint32_t host, uint32_t tid, uint64_t ts)
{
	struct cl_thread *t = thread_slot(cl, host, tid);

	if (ts > t->ts)
		t->ts = ts;
}

/* The earliest a write's bytes can have left: their departure stamp where
 * the record has it (CP_SOCK_F_SENT_AT); else enter_ts may be late (the
 * default capture sees a call at its end), so the thread's last call end or
 * wakeup bounds it. 0: unknown. */
static uint64_t send_began(struct kp_clocks *cl, uint32_t host, const struct cp_ev_sock *e)
{
	struct cl_thread *t = thread_slot(cl, host, e->h.tid);
	uint64_t ts = t->ts;

	t->ts = e->h.ts;
	if (e->flags & CP_SOCK_F_SENT_AT)
		return e->enter_ts;
	return ts && ts <= e->enter_ts ? ts : 0;
}

void kp_clocks__add(struct kp_clocks *cl, uint32_t host, const struct cp_hdr *rec, int64_t delta)
{
	struct cl_ep l, r;
	struct cl_obs o = {.host = host};

	if (host >= cl->nhosts)
		return;
	switch (rec->type) {
	case CP_EV_SCHED_WAKING:
		if (rec->size >= sizeof(struct cp_ev_sched_waking))
			thread_step(cl, host, ((const struct cp_ev_sched_waking *)rec)->wakee_tid,
				    rec->ts);
		return;
	case CP_EV_WAKEUP_NEW:
		if (rec->size >= sizeof(struct cp_ev_wakeup_new))
			thread_step(cl, host, ((const struct cp_ev_wakeup_new *)rec)->tid, rec->ts);
		return;
	case CP_EV_POLL:
	case CP_EV_FUTEX:
		thread_step(cl, host, rec->tid, rec->ts);
		return;
	default:
		break;
	}
	if (rec->type == CP_EV_SOCK && rec->size >= offsetof(struct cp_ev_sock, payload)) {
		const struct cp_ev_sock *e = (const void *)rec;
		uint64_t began;

		if (e->phase != CP_PHASE_EXIT)
			return;
		if (!sock_write(e->call)) {
			thread_step(cl, host, rec->tid, rec->ts);
		} else {
			began = send_began(cl, host, e);
			o.t = began + (uint64_t)delta;
			if (!began)
				return;
		}
		/* a stream's bytes, their sequence numbers known (0: not) */
		if (e->bytes <= 0 || e->sock_type != SOCK_STREAM || !e->tcp_seq ||
		    (e->flags & CP_SOCK_F_PEEK) ||
		    !ends(e->family, e->lport, e->rport, e->laddr, e->raddr, &l, &r))
			return;
		if (sock_write(e->call)) {
			o.seq = e->tcp_seq;
			o.len = (uint32_t)e->bytes;
			send_obs(cl, &l, &r, &o);
		} else if (sock_read(e->call)) {
			/* its last byte was there when it returned */
			o.t = rec->ts + (uint64_t)delta;
			o.seq = e->tcp_seq + (uint32_t)e->bytes - 1;
			arrival_obs(cl, &r, &l, &o);
		}
	} else if (rec->type == CP_EV_SK_DATA_READY &&
		   rec->size >= sizeof(struct cp_ev_sk_data_ready)) {
		const struct cp_ev_sk_data_ready *e = (const void *)rec;

		if (e->protocol != IPPROTO_TCP || !e->rcv_nxt ||
		    !ends(e->family, e->lport, e->rport, e->laddr, e->raddr, &l, &r))
			return;
		o.t = rec->ts + (uint64_t)delta;
		o.seq = e->rcv_nxt - 1;
		arrival_obs(cl, &r, &l, &o);
	}
}

bool kp_clocks__enough(const struct kp_clocks *cl, uint64_t n)
{
	bool any = false;

	for (uint32_t x = 0; x < cl->nhosts; x++)
		for (uint32_t y = x + 1; y < cl->nhosts; y++) {
			uint64_t a = cl->count[x][y], b = cl->count[y][x];

			/* a pair heard one way so far may hear back later */
			if ((a || b) && (a < n || b < n))
				return false;
			any |= a && b;
		}
	return any;
}

uint64_t kp_clocks__pair_messages(const struct kp_clocks *cl, uint32_t a, uint32_t b)
{
	if (a >= cl->nhosts || b >= cl->nhosts)
		return 0;
	return cl->count[a][b] + cl->count[b][a];
}

/* lo + (hi - lo) / 2, whichever is larger, without an overflow */
static int64_t middle(int64_t lo, int64_t hi)
{
	return lo <= hi ? lo + (int64_t)(((uint64_t)hi - (uint64_t)lo) / 2)
			: lo - (int64_t)(((uint64_t)lo - (uint64_t)hi) / 2);
}

/* c[h]: the correction added to h's times (c[ref] = 0), along the least
 * uncertain chains. Sums saturate: a forged recording's times can be
 * anything. */
void kp_clocks__solve(const struct kp_clocks *cl, uint32_t ref, struct kp_clock_est *est)
{
	uint32_t n = cl->nhosts;
	int64_t c[KP_CLOCK_HOSTS] = {0};
	uint64_t unc[KP_CLOCK_HOSTS], msgs[KP_CLOCK_HOSTS] = {0}, conflict[KP_CLOCK_HOSTS] = {0};
	bool done[KP_CLOCK_HOSTS] = {false}, reached[KP_CLOCK_HOSTS] = {false};
	enum kp_clock_basis basis[KP_CLOCK_HOSTS];

	for (uint32_t h = 0; h < KP_CLOCK_HOSTS; h++) {
		unc[h] = UINT64_MAX;
		basis[h] = KP_CLOCK_REALTIME;
	}
	if (ref >= n) {
		memset(est, 0, n * sizeof(*est));
		for (uint32_t h = 0; h < n; h++)
			est[h].basis = KP_CLOCK_REALTIME;
		return;
	}
	unc[ref] = 0;
	reached[ref] = true;
	basis[ref] = KP_CLOCK_REFERENCE;
	for (;;) {
		uint32_t x = KP_NONE;

		for (uint32_t h = 0; h < n; h++)
			if (reached[h] && !done[h] && (x == KP_NONE || unc[h] < unc[x]))
				x = h;
		if (x == KP_NONE)
			break;
		done[x] = true;
		for (uint32_t y = 0; y < n; y++) {
			int64_t lo, hi;
			uint64_t u;

			if (done[y] || !cl->count[x][y] || !cl->count[y][x])
				continue;
			/* c_y - c_x in [lo, hi] */
			lo = cl->bound[x][y];
			hi = i64__sub_sat(0, cl->bound[y][x]);
			u = lo <= hi ? (uint64_t)hi - (uint64_t)lo : (uint64_t)lo - (uint64_t)hi;
			u = unc[x] + u / 2 < u / 2 ? UINT64_MAX : unc[x] + u / 2;
			if (u >= unc[y] && reached[y])
				continue;
			reached[y] = true;
			unc[y] = u;
			c[y] = i64__add_sat(c[x], middle(lo, hi));
			msgs[y] = cl->count[x][y] + cl->count[y][x];
			conflict[y] = lo > hi ? (uint64_t)lo - (uint64_t)hi : 0;
			basis[y] = KP_CLOCK_MESSAGES;
		}
	}
	/* one way: the realtime offset moved into the bounds */
	for (bool moved = true; moved;) {
		moved = false;
		for (uint32_t y = 0; y < n; y++) {
			int64_t lo = INT64_MIN, hi = INT64_MAX, want = 0;
			uint64_t m = 0;

			if (reached[y])
				continue;
			for (uint32_t x = 0; x < n; x++) {
				if (!reached[x])
					continue;
				if (cl->count[x][y] && i64__add_sat(c[x], cl->bound[x][y]) > lo)
					lo = i64__add_sat(c[x], cl->bound[x][y]);
				if (cl->count[y][x] && i64__sub_sat(c[x], cl->bound[y][x]) < hi)
					hi = i64__sub_sat(c[x], cl->bound[y][x]);
				m += cl->count[x][y] + cl->count[y][x];
			}
			if (!m)
				continue;
			if (lo > hi) {
				want = middle(lo, hi);
				conflict[y] = (uint64_t)lo - (uint64_t)hi;
			} else {
				want = want < lo ? lo : want > hi ? hi : want;
			}
			c[y] = want;
			unc[y] = 0;
			msgs[y] = m;
			basis[y] = KP_CLOCK_ONE_WAY;
			reached[y] = moved = true;
		}
	}
	for (uint32_t h = 0; h < n; h++) {
		est[h].offset_ns = i64__sub_sat(0, c[h]);
		est[h].uncertainty_ns = reached[h] ? unc[h] : 0;
		est[h].messages = msgs[h];
		est[h].basis = basis[h];
		est[h].conflict_ns = conflict[h];
	}
}
