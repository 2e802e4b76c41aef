// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/* The kernel-level critical path of one request (DESIGN.md 5): a backward
 * walk from the last response write to the request's start, bounded only by
 * that start (CPT figure 2c). Segments tile [start, end]. */
#include <netinet/in.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kpath_internal.h"

#include "walk_int.h"

/* A culprit record's comm, interned */
static const char *culprit_comm(struct kp *kp, struct kp_culprit *c)
{
	typeof(&kp->culprit_comms[0]) m =
	    &kp->culprit_comms[((uint32_t)c->tid * 0x9e3779b1u) >> 26];

	_Static_assert(sizeof(kp->culprit_comms) / sizeof(kp->culprit_comms[0]) == 64, "6 bits");
	if (!c->icomm) {
		if (!m->icomm || memcmp(m->comm, c->comm, CP_COMM_LEN)) {
			m->icomm = kp__intern_comm(kp, c->comm);
			memcpy(m->comm, c->comm, CP_COMM_LEN);
		}
		c->icomm = m->icomm;
	}
	return c->icomm;
}

static struct kp_culprit *iv_culprit(const struct kp_thread *th, const struct kp_iv *iv, uint32_t k)
{
	uint64_t abs = (uint64_t)iv->cul_first + k;

	if (abs < th->cul_base || abs >= th->cul_base + th->ncul)
		return NULL;
	return &th->cul[abs - th->cul_base];
}

static bool outside_culprits(const struct walk *w, const struct kp_thread *th,
			     const struct kp_iv *iv)
{
	int32_t serving_pid = w->kp->th[w->serving].pid;

	for (uint32_t k = 0; k < iv->ncul; k++) {
		const struct kp_culprit *c = iv_culprit(th, iv, k);

		if (c && c->pid != th->pid && c->pid != serving_pid && c->ns)
			return true;
	}
	return false;
}

/* ns * part / whole, exact without the division for a whole wait. */
static inline uint64_t cul_share(uint64_t ns, uint64_t part, uint64_t whole)
{
	uint64_t p;

	if (!whole)
		return ns;
	if (part == whole && !__builtin_mul_overflow(ns, whole, &p) && p <= 1ull << 53)
		return ns;
	return (uint64_t)((double)ns * (double)part / (double)whole);
}

/* The third frame outside the serving process: the peer's service (and
 * call). */
static int32_t kw__proc_frame(struct walk *w, uint32_t thread)
{
	struct kp *kp = w->kp;
	uint32_t proc = kp->th[thread].proc;

	if (proc == w->proc)
		return -1;
	if (proc != w->f3_proc || w->call != w->f3_call) {
		const char *svc = kp__proc_frame_service(kp, proc);

		if (svc && w->call && w->call[0]) {
			struct kp_proc *p = &kp->pr[proc];

			if (!p->call_frame || p->call_svc != svc ||
			    strncmp(p->call_of, w->call, KP_NAME_LEN)) {
				p->call_frame =
				    kw__join_interned(kp, svc, KP_NAME_LEN - 1, w->call, KP_NAME_LEN);
				p->call_svc = svc;
				memcpy(p->call_of, w->call, KP_NAME_LEN);
			}
			svc = p->call_frame;
		}
		if (!svc)
			return -1;
		w->f3 = svc;
		w->f3_proc = proc;
		w->f3_call = w->call;
	}
	return kw__str_ref(kp, w->f3);
}

static int kw__runqueue_seg(struct walk *w, uint32_t thread, const struct kp_iv *iv, uint64_t a,
			uint64_t t, bool interf, bool queued)
{
	struct kp *kp = w->kp;
	struct kp_thread *th = &kp->th[thread];
	uint64_t dur = iv->end - iv->start;
	int err;

	/* DESIGN: CPU waits of owned time are interference, so is an outside
	 * task taking an owned activation's CPU. */
	if (iv->ncul && (thread == w->serving || outside_culprits(w, th, iv)))
		interf = true;
	err = kw__seg_addq(kp, a, t, CP_CAT_RUNQUEUE, thread, iv->cpu, interf || queued, -1,
		       kw__proc_frame(w, thread), queued);

	if (err || t <= a)
		return err;
	for (uint32_t k = 0; k < iv->ncul; k++) {
		struct kp_culprit *c = iv_culprit(th, iv, k);
		uint64_t ns;

		if (!c)
			continue;
		/* the part of the wait this segment covers */
		ns = cul_share(c->ns, t - a, dur);
		if (ns > t - a)
			ns = t - a;
		err = kw__cul_add(kp, c->pid, c->tid, culprit_comm(kp, c), ns);
		if (err)
			return err;
	}
	return 0;
}

/* Ownership chains of a walk share their tails: answers cached per blocked
 * interval. */
#define KP_OWN_SLOTS 4096u

static const struct kp_own *own_get(const struct kp *kp, uint64_t key)
{
	uint32_t i = (uint32_t)((key * 0x9e3779b97f4a7c15ull) >> 52);

	if (!kp->own)
		return NULL;
	for (;; i = (i + 1) & (KP_OWN_SLOTS - 1)) {
		const struct kp_own *m = &kp->own[i];

		if (m->gen != kp->own_gen)
			return NULL;
		if (m->key == key)
			return m;
	}
}

static void own_put(struct kp *kp, uint64_t key, bool owned, uint32_t steps)
{
	uint32_t i = (uint32_t)((key * 0x9e3779b97f4a7c15ull) >> 52);

	_Static_assert(KP_OWN_SLOTS == 1u << 12, "the hash takes 12 bits");
	if (!kp->own && !(kp->own = calloc(KP_OWN_SLOTS, sizeof(*kp->own))))
		return; /* not kept: asked again */
	if (kp->nown >= KP_OWN_SLOTS / 2)
		return;
	while (kp->own[i].gen == kp->own_gen && kp->own[i].key != key)
		i = (i + 1) & (KP_OWN_SLOTS - 1);
	if (kp->own[i].gen != kp->own_gen)
		kp->nown++;
	kp->own[i] = (struct kp_own){key, kp->own_gen, (uint16_t)steps, owned};
}

static bool ctx_ours(const struct walk *w, const struct kp_ctx *x);

/* The connection a thread born at `born` first worked for, or KP_NONE: a
 * thread created for a request (a thread or process per connection). */
static uint32_t born_for(const struct kp_thread *th, uint64_t born)
{
	for (uint32_t k = 0; k < th->nctx && k < KP_DEP_SCAN; k++)
		if (th->ctx[k].ts >= born && th->ctx[k].conn != KP_NONE)
			return th->ctx[k].conn;
	return KP_NONE;
}

/* A thread that created the request's thread: like the serving thread, its
 * time after the start is the request's where no call says otherwise. */
static bool adopted(const struct walk *w, uint32_t thread)
{
	for (uint32_t i = 0; i < w->nadopted; i++)
		if (w->adopted[i] == thread)
			return true;
	return false;
}

/* Forgets every answer kept (a new walk, or a new owner in this one) */
static void own_forget(struct kp *kp)
{
	kp->nown = 0;
	if (!++kp->own_gen) { /* wrapped: stamps of old walks could match */
		if (kp->own)
			memset(kp->own, 0, KP_OWN_SLOTS * sizeof(*kp->own));
		kp->own_gen = 1; /* never 0, the stamp of a slot never used */
	}
}

/* DESIGN: owned if the serving thread ran it after the start, or begun by a
 * wakeup from owned time, or it is the birth of a thread whose first calls
 * are for the request. */
static bool owned_uncached(const struct walk *w, uint32_t thread, int64_t idx)
{
	struct kp *kp = w->kp;
	uint64_t chain[KP_OWN_MAX_DEPTH]; /* the blocked interval met at each depth */
	uint32_t depth, n = 0;
	bool res = false;

	for (depth = 0; depth < KP_OWN_MAX_DEPTH; depth++) {
		const struct kp_thread *t = &kp->th[thread];
		const struct kp_own *m;
		const struct kp_iv *b;
		const struct kp_write *src;
		int64_t j = idx;

		if (thread == w->serving || (w->nadopted && adopted(w, thread))) {
			res = true;
			break;
		}
		while (j >= 0 && t->iv[j].state != KP_ST_BLOCKED)
			j--;
		if (j < 0)
			break;
		chain[n] = (uint64_t)thread << 32 | (uint32_t)j;
		m = own_get(kp, chain[n]);
		if (m) {
			if (depth + m->steps >= KP_OWN_MAX_DEPTH)
				return false;
			res = m->owned;
			depth += m->steps;
			break;
		}
		n++;
		b = &t->iv[j];
		if (b->reason == KP_BR_NEW) {
			struct kp_ctx x = {.conn = born_for(t, b->end)};

			/* created for a request: whose it is */
			if (x.conn != KP_NONE) {
				res = ctx_ours(w, &x);
				break;
			}
		}
		if (b->end < w->start)
			break;
		if (b->wake == KP_WK_TASK || b->wake == KP_WK_NEW) {
			if (b->waker == KP_NONE)
				break;
			thread = b->waker;
			idx = kp__tl_find(&kp->th[thread], b->end);
		} else if (b->wake == KP_WK_NET) {
			if (b->conn == w->conn) {
				res = true;
				break;
			}
			src = kw__net_source(kp, b->conn, b->end);
			if (!src)
				break;
			thread = src->thread;
			idx = kp__tl_find(&kp->th[thread], src->exit < b->end ? src->exit : b->end);
		} else if ((b->wake == KP_WK_TIMER || b->wake == KP_WK_DISK ||
			    b->reason == KP_BR_DISK) &&
			   b->reason != KP_BR_POLL) {
			/* sleeps, timed waits and disk reads end by
			 * themselves: the work goes on */
			idx = j - 1;
		} else {
			break;
		}
		if (idx < 0)
			break;
	}
	if (depth >= KP_OWN_MAX_DEPTH)
		return false;
	/* chain[i] was met at depth i, and the answer came at depth */
	for (uint32_t i = 0; i < n; i++)
		own_put(kp, chain[i], res, depth - i);
	return res;
}

static bool owned(struct walk *w, uint32_t thread, int64_t idx)
{
	const struct kp_thread *t = &w->kp->th[thread];
	int64_t j = idx;

	if (thread == w->serving || (w->nadopted && adopted(w, thread)))
		return true;
	if (thread == w->memo_thread && idx >= w->memo_block && idx <= w->memo_hi)
		return w->memo_owned;
	while (j >= 0 && t->iv[j].state != KP_ST_BLOCKED)
		j--;
	if (thread != w->memo_thread || j != w->memo_block) {
		w->memo_thread = thread;
		w->memo_block = j;
		w->memo_hi = idx;
		w->memo_owned = owned_uncached(w, thread, j);
	} else if (idx > w->memo_hi) {
		w->memo_hi = idx;
	}
	return w->memo_owned;
}




static int seg_add(struct kp *kp, uint64_t a, uint64_t b, uint8_t cat, uint32_t thread, int16_t cpu,
		   bool interf, int32_t peer, int32_t frame3)
{
	return kw__seg_addq(kp, a, b, cat, thread, cpu, interf, peer, frame3, false);
}

/* cpu time on a thread, split where its probed calls begin or end */
static int cpu_seg(struct walk *w, uint32_t thread, int16_t cpu, uint64_t a, uint64_t t,
		   bool interf, int32_t frame3, bool queued)
{
	struct kp *kp = w->kp;
	const struct kp_thread *th = &kp->th[thread];
	int64_t k = kp__tl_probe_at(th, t) - (int64_t)th->pev_base;
	int err = 0;

	while (t > a && !err) {
		uint64_t lo = a;

		if (k >= 0 && th->pev[k].ts > a)
			lo = th->pev[k].ts;
		err = kw__seg_addq(kp, lo, t, CP_CAT_CPU, thread, cpu, interf, -1, frame3, queued);
		t = lo;
		k--;
	}
	return err;
}

static void enter_conn(struct walk *w, uint32_t conn)
{
	for (uint32_t i = 0; i < w->nentered; i++)
		if (w->entered[i] == conn)
			return;
	if (w->nentered < KP_WALK_ENTERED)
		w->entered[w->nentered] = conn;
	w->nentered++; /* counted past the end too: see ctx_ours */
}

/* Into thread's process: through its reply to our call, or back through its
 * own request. */
static void enter_call(struct walk *w, uint32_t thread, uint32_t conn,
		       const struct kp_write *src)
{
	const struct kp_conn *c = &w->kp->cn[conn];
	uint32_t proc = w->kp->th[thread].proc;
	uint32_t i;

	for (i = 0; i < w->ncalls && w->calls[i].proc != proc; i++)
		;
	if (c->role != KP_ROLE_CLIENT) {
		w->call = i < w->ncalls ? w->calls[i].call : NULL;
		return;
	}
	w->call = c->last_name;
	if (src && src->name) {
		w->call = src->name;
	} else if (c->peer != KP_NONE && w->kp->cn[c->peer].role == KP_ROLE_SERVER) {
		const struct kp_conn *s = &w->kp->cn[c->peer];

		if (s->phase == KP_PH_WRITING && s->req.name[0])
			w->call = s->req.name;
		else if (s->last_name[0])
			w->call = s->last_name;
	}
	if (i == w->ncalls && w->ncalls < KP_WALK_ENTERED)
		w->ncalls++;
	if (i < w->ncalls) {
		w->calls[i].proc = proc;
		w->calls[i].call = w->call;
	}
}

static bool ctx_mine(const struct walk *w, const struct kp_ctx *x)
{
	return x->conn == w->conn && (!x->sid_hi || (w->sid >= x->sid_lo && w->sid <= x->sid_hi));
}

static bool ctx_ours(const struct walk *w, const struct kp_ctx *x)
{
	uint32_t conn = x->conn;

	if (conn == w->conn)
		return ctx_mine(w, x);
	if (conn == KP_NONE || w->kp->cn[conn].role != KP_ROLE_SERVER)
		return true;
	for (uint32_t i = 0; i < w->nentered && i < KP_WALK_ENTERED; i++)
		if (w->entered[i] == conn)
			return true;
	/* past the calls remembered: do not guess */
	return w->nentered > KP_WALK_ENTERED;
}

/* Whether the thread works for another request in context k. */
static bool ctx_theirs(const struct walk *w, const struct kp_thread *th, int64_t k, bool own)
{
	if (own)
		return k >= 0 && !ctx_ours(w, &th->ctx[k]);
	return !(k >= 0 && ctx_mine(w, &th->ctx[k]));
}

static int64_t ctx_at(struct kp_thread *th, uint64_t t)
{
	int64_t k = th->ctx_hint < th->nctx ? (int64_t)th->ctx_hint : -1;

	if (k > 0 && th->ctx[k].ts >= t && th->ctx[k - 1].ts < t)
		k--;
	if (!(k >= 0 && th->ctx[k].ts < t &&
	      (k + 1 >= (int64_t)th->nctx || th->ctx[k + 1].ts >= t)))
		k = kp__tl_ctx_before(th, t);
	if (k >= 0)
		th->ctx_hint = (uint32_t)k;
	return k;
}

/* A request's cpu time on a thread: the calls decide whose it is where they
 * say (event loops, goroutines). */
static int ctx_cpu_seg(struct walk *w, uint32_t thread, int16_t cpu, uint64_t a, uint64_t t,
		       int32_t frame3, bool own)
{
	struct kp_thread *th = &w->kp->th[thread];
	int64_t k;
	int err = 0;

	if (!th->nctx)
		return cpu_seg(w, thread, cpu, a, t, !own, frame3, false);
	k = ctx_at(th, t);
	while (t > a && !err) {
		uint64_t lo = k >= 0 && th->ctx[k].ts > a ? th->ctx[k].ts : a;
		bool other = ctx_theirs(w, th, k, own);

		/* the stretches before alike too: one piece */
		while (lo > a && k >= 0 && ctx_theirs(w, th, k - 1, own) == other) {
			k--;
			lo = k >= 0 && th->ctx[k].ts > a ? th->ctx[k].ts : a;
		}
		err = cpu_seg(w, thread, cpu, lo, t, other, frame3, own && other);
		t = lo;
		if (k >= 0)
			th->ctx_hint = (uint32_t)k;
		k--;
	}
	return err;
}

static bool ctx_other(const struct walk *w, const struct kp_thread *th, int64_t k)
{
	return k >= 0 && th->ctx[k].conn != KP_NONE && !ctx_ours(w, &th->ctx[k]);
}

static bool arrival(struct kp *kp, uint32_t v, uint64_t end, uint64_t *ta,
		    const struct kp_write **src)
{
	const struct kp_conn *c = &kp->cn[v];

	*src = kw__net_source(kp, v, end);
	for (uint32_t i = c->ndr; i > 0; i--) {
		if (c->dr[i - 1].ts <= end) {
			*ta = c->dr[i - 1].ts;
			return true;
		}
	}
	if (!*src)
		return false;
	*ta = (*src)->exit < end ? (*src)->exit : end;
	return true;
}

/* The request's next dependency on th after t: a context begun by another
 * connection's read. */
static bool dep_find(const struct walk *w, struct kp_thread *th, uint64_t t, uint32_t *via,
		     uint64_t *ta, const struct kp_write **src)
{
	int64_t k = ctx_at(th, t);

	for (int64_t j = k + 1; j < (int64_t)th->nctx && j <= k + KP_DEP_SCAN; j++) {
		const struct kp_ctx *x = &th->ctx[j];

		if (x->conn == KP_NONE || !ctx_ours(w, x))
			continue;
		if (x->via == KP_NONE || x->via == w->conn)
			return false;
		*via = x->via;
		return arrival(w->kp, x->via, x->ts, ta, src);
	}
	return false;
}

/* Time on data arriving on v: into the peer's write, or a `network` blind
 * spot. */
static bool net_into_peer(struct walk *w, uint32_t v, uint64_t lo, bool own, uint32_t *thread,
			  uint64_t *t, int *err, const struct kp_write *src)
{
	struct kp *kp = w->kp;
	uint64_t t2;
	uint32_t pc;

	if (!src)
		src = kw__net_source(kp, v, *t);
	if (!src)
		return false;
	t2 = src->exit < *t ? src->exit : *t;
	/* bytes that arrived before their write began: clipped and counted */
	if (src->enter > *t + KP_SEND_SLACK_NS && src->thread != KP_NONE &&
	    kp->th[src->thread].host != kp->cn[v].host &&
	    src->enter - *t > KP_SEND_SLACK_NS + kp__host_uncertainty(kp, kp->cn[v].host) +
				  kp__host_uncertainty(kp, kp->th[src->thread].host)) {
		kp->skew_clipped++;
		if (src->enter - *t > kp->skew_clipped_max)
			kp->skew_clipped_max = src->enter - *t;
	}
	pc = kp__conn_peer(kp, v);
	if (pc != KP_NONE && kp->cn[pc].role == KP_ROLE_SERVER)
		enter_conn(w, pc);
	if (t2 < lo)
		t2 = lo;
	enter_call(w, src->thread, v, src);
	*err = seg_add(kp, t2, *t, CP_CAT_NETWORK, KP_NONE, -1, !own, kw__conn_peer_str(kp, v),
		       kw__proc_frame(w, src->thread));
	if (kp->want && !*err)
		*err = kw__call_wait(kp, v, t2, *t, true);
	*t = t2;
	*thread = src->thread;
	return true;
}

static int net_blind(struct walk *w, uint32_t v, uint64_t a, uint64_t t, bool own)
{
	struct kp *kp = w->kp;
	int32_t ps = kw__conn_peer_str(kp, v), fs = -1;
	int err;

	if (ps >= 0 && kp->cn[v].role == KP_ROLE_CLIENT && kp->cn[v].last_name[0])
		fs = kw__str_ref(kp, kw__join_interned(kp, kp__str(kp, ps), 40, kp->cn[v].last_name, 20));
	else if (ps >= 0)
		fs = kw__str_ref(kp, kp__intern(kp, kp__str(kp, ps)));
	err = seg_add(kp, a, t, CP_CAT_NETWORK, KP_NONE, -1, !own, ps, fs);
	if (kp->want && !err && v != KP_NONE)
		err = kw__call_wait(kp, v, a, t, kp->cn[v].peer != KP_NONE);
	return err;
}

static int dep_follow(struct walk *w, uint64_t lo, uint32_t *thread, uint64_t *t)
{
	struct kp *kp = w->kp;
	uint32_t v = w->cut_conn;
	const struct kp_conn *c = &kp->cn[v];
	uint64_t from = lo;
	int err = 0;

	w->cut_thread = KP_NONE;
	if (net_into_peer(w, v, lo, true, thread, t, &err, w->cut_src))
		return err;
	for (uint32_t i = c->nwr; i > 0; i--) {
		if (c->wr[i - 1].exit <= *t) {
			if (c->wr[i - 1].exit > lo) {
				from = c->wr[i - 1].exit;
				*thread = c->wr[i - 1].thread;
			}
			break;
		}
	}
	err = net_blind(w, v, from, *t, true);
	*t = from;
	return err;
}

static int queued_seg(struct walk *w, uint32_t thread, const struct kp_iv *iv, uint64_t a,
		      uint64_t t)
{
	int32_t f3 = kw__proc_frame(w, thread);

	switch (iv->state) {
	case KP_ST_RUNNING:
		return cpu_seg(w, thread, iv->cpu, a, t, true, f3, true);
	case KP_ST_RUNNABLE:
		return kw__runqueue_seg(w, thread, iv, a, t, true, true);
	case KP_ST_BLOCKED:
		return kw__seg_addq(w->kp, a, t, kw__block_category(iv), thread, -1, true, -1, f3, true);
	default:
		return kw__seg_addq(w->kp, a, t, CP_CAT_UNEXPLAINED, thread, -1, true, -1, f3, true);
	}
}

static bool waker_interferes(struct walk *w, uint32_t waker, uint64_t t)
{
	struct kp_thread *th = &w->kp->th[waker];
	int64_t idx = kp__tl_find(th, t), k;

	if (idx < 0 || !owned(w, waker, idx))
		return true;
	if (!th->nctx)
		return false;
	k = ctx_at(th, t);
	if (k >= 0 && th->ctx[k].conn == KP_NONE && k > 0 && t - th->ctx[k].ts < KP_RECENT_NS)
		k--;
	return ctx_other(w, th, k);
}

static int enter_waker_call(struct walk *w, uint32_t thread, const struct kp_iv *iv, uint64_t t)
{
	struct kp *kp = w->kp;
	struct kp_thread *wt = &kp->th[iv->waker];
	int64_t k;

	if (iv->reason == KP_BR_SOCK && iv->conn != KP_NONE) {
		uint32_t pc = kp__conn_peer(kp, iv->conn);

		if (pc != KP_NONE && kp->cn[pc].role == KP_ROLE_SERVER &&
		    kp->cn[pc].proc == wt->proc) {
			enter_conn(w, pc);
			enter_call(w, iv->waker, iv->conn, NULL);
			return kp->want ? kw__call_wait(kp, iv->conn, iv->end, iv->end, true) : 0;
		}
	}
	k = wt->nctx ? ctx_at(wt, t) : -1;
	for (int64_t j = k; j >= 0 && j > k - 4; j--) {
		uint32_t pc = wt->ctx[j].conn, v;

		if (pc == KP_NONE)
			continue;
		if (kp->cn[pc].role != KP_ROLE_SERVER)
			return 0;
		v = kp__conn_peer(kp, pc);
		if (v != KP_NONE && kp->cn[v].role == KP_ROLE_CLIENT &&
		    kp->cn[v].proc == kp->th[thread].proc && kp->cn[v].ctx_owner1 == w->conn + 1) {
			enter_conn(w, pc);
			enter_call(w, iv->waker, v, NULL);
			return kp->want ? kw__call_wait(kp, v, iv->end, iv->end, true) : 0;
		}
		return 0;
	}
	return 0;
}

static int lock_seg(struct walk *w, uint32_t thread, int16_t cpu, uint64_t a, uint64_t t,
		    uint32_t holder)
{
	struct kp *kp = w->kp;
	const struct kp_thread *h = &kp->th[holder];
	int err = seg_add(kp, a, t, CP_CAT_LOCK, thread, cpu, true, -1, kw__proc_frame(w, thread));

	if (!err && t > a)
		err = kw__cul_add(kp, h->pid, h->tid, kp__thread_comm(kp, holder), t - a);
	return err;
}

/* A futex wait retried after timeouts until woken: a lock taken in timed
 * waits (a GIL). */
#define KP_RETRY_NS 1000000ull
/* glibc's condition variable is 48 bytes: a waiter waits on one of its two
 * group words (__g_signals), or on its internal lock, and then on the mutex
 * beside it; one thread's waits on words this close are one wait object. */
#define KP_WAIT_OBJECT_BYTES 64u

static bool same_wait(uint64_t a, uint64_t b)
{
	return (a > b ? a - b : b - a) < KP_WAIT_OBJECT_BYTES;
}

static uint32_t timed_lock_holder(const struct kp_thread *th, const struct kp_iv *iv)
{
	const struct kp_iv *end = th->iv + th->niv;

	for (const struct kp_iv *x = iv + 1; x < end && x <= iv + 4; x++) {
		if (x->start > iv->end + KP_RETRY_NS)
			break;
		if (x->state != KP_ST_BLOCKED)
			continue;
		if (x->reason != KP_BR_FUTEX || !same_wait(x->uaddr, iv->uaddr))
			break;
		if (x->wake == KP_WK_TASK)
			return x->waker;
		if (x->wake != KP_WK_TIMER)
			break;
		iv = x;
	}
	return KP_NONE;
}



/* A thread created for a connection a traced client made: the client's
 * thread is where the walk goes once the creator is back before the
 * client's first write, or at the accept's wakeup. */
static void note_connector(struct walk *w, uint32_t creator, uint32_t conn)
{
	struct kp *kp = w->kp;
	uint32_t pc = conn != KP_NONE && conn != w->conn ? kp__conn_peer(kp, conn) : KP_NONE;
	const struct kp_conn *c = pc != KP_NONE ? &kp->cn[pc] : NULL;

	w->creator = w->connector = KP_NONE;
	if (!c || c->role != KP_ROLE_CLIENT || !c->nwr || c->wr[0].thread == KP_NONE)
		return;
	w->creator = creator;
	w->connector = c->wr[0].thread;
	w->connect_ts = c->wr[0].enter;
}

static bool into_connector(struct walk *w, uint32_t *thread, uint64_t t)
{
	if (w->creator != *thread || kp__tl_find(&w->kp->th[w->connector], t) < 0)
		return false;
	*thread = w->connector;
	w->creator = w->connector = KP_NONE;
	return true;
}

/* A thread that created the request's thread, or took its work from a
 * queue (adopted): its time is the request's where no call says otherwise. */
static void adopt_thread(struct walk *w, uint32_t creator)
{
	if (w->nadopted >= KP_WALK_ENTERED || adopted(w, creator))
		return;
	w->adopted[w->nadopted++] = creator;
	/* answers through it, kept before, are older */
	w->memo_thread = KP_NONE;
	own_forget(w->kp);
}

/* Whether the thread's wait before ts was ended by the serving thread (or
 * one it handed the request to): the request's work was handed to it. */
static bool woken_by_request(struct walk *w, uint32_t thread, uint64_t ts)
{
	struct kp_thread *th = &w->kp->th[thread];

	for (int64_t i = kp__tl_find(th, ts); i >= 0 && th->iv[i].end + KP_RECENT_NS >= w->start;
	     i--) {
		const struct kp_iv *iv = &th->iv[i];

		if (iv->state != KP_ST_BLOCKED)
			continue;
		return iv->wake == KP_WK_TASK && iv->waker != KP_NONE &&
		       (iv->waker == w->serving || adopted(w, iv->waker));
	}
	return false;
}

/* DESIGN: a hand-off to a pool thread. The waker of a futex wait had
 * waited for a reply on a downstream call it made after the request's
 * start, having been handed the work by the request's thread, and the call
 * was this request's or nobody's (a pool thread works for no connection;
 * another request's call says it was not ours): the wait was for that
 * result, not for a lock. */
static bool handed_off(struct walk *w, uint32_t waker, const struct kp_iv *iv)
{
	struct kp *kp = w->kp;
	struct kp_thread *th = &kp->th[waker];

	for (int64_t i = kp__tl_find(th, iv->end); i >= 0 && th->iv[i].end >= w->start; i--) {
		const struct kp_iv *b = &th->iv[i];
		const struct kp_conn *c;

		if (b->state != KP_ST_BLOCKED || b->conn == KP_NONE ||
		    (b->wake != KP_WK_NET && b->reason != KP_BR_SOCK))
			continue;
		c = &kp->cn[b->conn];
		if (c->role != KP_ROLE_CLIENT || (c->ctx_owner1 && c->ctx_owner1 != w->conn + 1))
			return false;
		for (uint32_t k = c->nwr; k > 0 && c->wr[k - 1].exit >= w->start; k--)
			if (c->wr[k - 1].thread == waker && (k == 1 || c->wr[k - 2].exit < w->start))
				return woken_by_request(w, waker, c->wr[k - 1].enter);
		return false;
	}
	return false;
}

static int walk_iv(struct walk *w, uint32_t *thread, const struct kp_iv *iv, uint64_t a,
		   uint64_t *t, uint64_t lo, bool own, bool *lock_chain, uint32_t *jumps,
		   bool *jumped)
{
	struct kp *kp = w->kp;
	struct kp_thread *th = &kp->th[*thread];
	int err = 0;

	switch (iv->state) {
	case KP_ST_RUNNING:
	case KP_ST_RUNNABLE:
		/* DESIGN: interference through a futex wait is `lock` */
		if (!own && *lock_chain && iv->state == KP_ST_RUNNING) {
			err = lock_seg(w, *thread, iv->cpu, a, *t, *thread);
		} else if (iv->state == KP_ST_RUNNABLE) {
			err = kw__runqueue_seg(w, *thread, iv, a, *t, !own, false);
		} else {
			err = ctx_cpu_seg(w, *thread, iv->cpu, a, *t, kw__proc_frame(w, *thread), own);
		}
		return err;
	case KP_ST_BLOCKED:
		break;
	default:
		return seg_add(kp, a, *t, CP_CAT_UNEXPLAINED, *thread, -1, !own, -1,
			       kw__proc_frame(w, *thread));
	}
	if (iv->end > *t || *jumps >= KP_WALK_MAX_JUMPS)
		return seg_add(kp, a, *t, kw__block_category(iv), *thread, -1, !own, -1,
			       kw__proc_frame(w, *thread));
	if (iv->wake == KP_WK_NEW && iv->waker != KP_NONE) {
		/* DESIGN: a creation is a hand-off, followed into the creator
		 * (within the floor the walk has: interference stays so) */
		if (own) {
			adopt_thread(w, iv->waker);
			note_connector(w, iv->waker, born_for(th, iv->end));
		}
		*thread = iv->waker;
		*jumped = true;
		return 0;
	}
	if (iv->wake == KP_WK_TASK && iv->waker != KP_NONE && iv->reason == KP_BR_FUTEX && own &&
	    handed_off(w, iv->waker, iv)) {
		adopt_thread(w, iv->waker);
		*thread = iv->waker;
		*jumped = true;
		return 0;
	}
	if ((iv->wake == KP_WK_TASK || iv->wake == KP_WK_NEW) && iv->waker != KP_NONE) {
		/* a lock holder is reached through a futex wait */
		if (iv->reason == KP_BR_FUTEX)
			*lock_chain = true;
		if (iv->reason == KP_BR_SOCK || iv->reason == KP_BR_POLL)
			err = enter_waker_call(w, *thread, iv, *t);
		if (err)
			return err;
		if (iv->start > lo && w->nret < KP_WALK_RET &&
		    (!own || waker_interferes(w, iv->waker, *t))) {
			w->ret[w->nret].thread = *thread;
			w->ret[w->nret].floor = iv->start;
			w->nret++;
		}
		*thread = iv->waker;
		*jumped = true;
		return 0;
	}
	if (iv->wake == KP_WK_NET && iv->conn != w->conn &&
	    net_into_peer(w, iv->conn, lo, own, thread, t, &err, NULL)) {
		*lock_chain = false;
		*jumped = true;
		return err;
	}
	if (iv->wake == KP_WK_NET && iv->conn != KP_NONE && kp__conn_listening(&kp->cn[iv->conn]) &&
	    into_connector(w, thread, *t)) {
		*jumped = true;
		return 0;
	}
	if (iv->wake == KP_WK_NET && iv->conn != KP_NONE &&
	    (iv->conn == w->conn || kp->cn[iv->conn].role == KP_ROLE_SERVER)) {
		return seg_add(kp, a, *t, CP_CAT_NETWORK, KP_NONE, -1, !own,
			       kw__str_ref(kp, kp__conn_addr(&kp->cn[iv->conn], false)), -1);
	}
	/* data from an untraced peer: a network blind spot too */
	if (iv->wake == KP_WK_NET || (iv->reason == KP_BR_SOCK && iv->wake == KP_WK_NONE) ||
	    ((iv->reason == KP_BR_SOCK || iv->reason == KP_BR_POLL) && iv->wake == KP_WK_TASK &&
	     iv->waker == KP_NONE && iv->conn != KP_NONE))
		return net_blind(w, iv->conn, a, *t, own);
	if (iv->reason == KP_BR_FUTEX && iv->wake == KP_WK_TIMER && iv->uaddr) {
		uint32_t h = timed_lock_holder(th, iv);

		if (h != KP_NONE && h != *thread)
			return lock_seg(w, *thread, -1, a, *t, h);
	}
	return seg_add(kp, a, *t, kw__block_category(iv), *thread, -1, !own, -1,
		       kw__proc_frame(w, *thread));
}

static inline bool dep_poll(const struct walk *w, const struct kp_iv *iv, uint64_t t)
{
	return iv->state == KP_ST_BLOCKED && iv->reason == KP_BR_POLL && iv->end <= t &&
	       (iv->wake == KP_WK_TASK || (iv->wake == KP_WK_NET && iv->conn != w->conn));
}

/* Time on a thread working for other requests: interference back to when the
 * next dependency arrived. */
static bool dep_cut(struct walk *w, uint32_t thread, const struct kp_iv *iv, uint64_t t,
		    uint64_t lo, bool other)
{
	struct kp_thread *th = &w->kp->th[thread];
	const struct kp_write *src = NULL;
	uint64_t ta;
	uint32_t v;

	if (!dep_find(w, th, t, &v, &ta, &src))
		return false;
	if (!other && v == iv->conn)
		return false; /* the poll wait ended with the dependency itself */
	if (ta > t)
		ta = t;
	if (ta <= lo)
		return false;
	w->cut_thread = thread;
	w->cut_conn = v;
	w->cut_ts = ta;
	w->cut_src = src;
	w->cut_queued = true;
	return true;
}

/* DESIGN: a reply read without a block. The thread waited for a CPU, and
 * its next call read a reply to the request's downstream call that came
 * during the wait: the reply is the dependency, the CPU wait only after it. */
static bool reply_in_wait(struct walk *w, uint32_t thread, const struct kp_iv *iv, uint64_t t,
			  uint64_t lo)
{
	struct kp_thread *th = &w->kp->th[thread];
	int64_t k = th->nctx ? ctx_at(th, t) : -1;
	const struct kp_write *src = NULL;
	const struct kp_ctx *x;
	uint64_t ta;

	if (k + 1 >= (int64_t)th->nctx)
		return false;
	x = &th->ctx[k + 1];
	if (x->via == KP_NONE || x->via == w->conn || w->kp->cn[x->via].role != KP_ROLE_CLIENT ||
	    !ctx_mine(w, x) || !arrival(w->kp, x->via, x->ts, &ta, &src) || ta > t ||
	    ta <= lo || ta <= iv->start)
		return false;
	w->cut_thread = thread;
	w->cut_conn = x->via;
	w->cut_ts = ta;
	w->cut_src = src;
	w->cut_queued = false;
	return true;
}

/* The timer's expiry: the end of a wait a timer ended after `from`, if the
 * loop read nothing new between it and t (a loop runs the timers that are
 * due before it polls again: a read after it means ours was not due yet).
 * Else not seen (the loop was busy when it expired): t, the gap all the
 * timer's, an upper bound. */
static uint64_t timer_expiry(struct kp_thread *th, uint64_t from, uint64_t t)
{
	int64_t i = kp__tl_find(th, t);
	int64_t k = ctx_at(th, t);

	for (; i >= 0 && th->iv[i].end > from; i--) {
		const struct kp_iv *iv = &th->iv[i];

		if (iv->state != KP_ST_BLOCKED || iv->wake != KP_WK_TIMER || iv->end > t)
			continue;
		for (; k >= 0 && th->ctx[k].ts > iv->end; k--)
			if (th->ctx[k].via != KP_NONE)
				return t;
		return iv->end;
	}
	return t;
}

/* Whether the thread blocked in a poll wait inside (from, t) */
static bool polled_in(struct kp_thread *th, uint64_t from, uint64_t t)
{
	for (int64_t i = kp__tl_find(th, t); i >= 0 && th->iv[i].end > from; i--)
		if (th->iv[i].state == KP_ST_BLOCKED && th->iv[i].reason == KP_BR_POLL &&
		    th->iv[i].start < t)
			return true;
	return false;
}

/* Whether a request read on another connection after `from` was answered
 * before t: a loop runs ready work in order, so ours was not merely
 * queued. */
static bool overtaken(const struct walk *w, const struct kp_thread *th, uint64_t from, uint64_t t)
{
	int64_t k = kp__tl_ctx_before(th, t);

	for (int64_t i = k; i >= 0 && th->ctx[i].ts > from; i--) {
		const struct kp_ctx *x = &th->ctx[i];

		/* a response's stretch (no read began it), then its read */
		if (x->conn == KP_NONE || x->conn == w->conn || x->via != KP_NONE ||
		    w->kp->cn[x->conn].role != KP_ROLE_SERVER)
			continue;
		for (int64_t j = i - 1; j >= 0 && th->ctx[j].ts > from; j--)
			if (th->ctx[j].conn == x->conn && th->ctx[j].via == x->conn)
				return true;
	}
	return false;
}

/* DESIGN: a request an event loop answers from a timer. At t the loop works
 * for others; the request's next own work began with a write (no read of a
 * reply, no new bytes of its own), its last own work before t is its last
 * context after the start, else its read (a loop that runs handlers as
 * callbacks after the read: asyncio), and the loop waited in a poll in
 * between or answered a request read after it: work merely queued behind
 * others' would have run before either. The time between is its timer. */
static bool timer_gap(struct walk *w, uint32_t thread, uint64_t t, uint64_t lo)
{
	struct kp_thread *th = &w->kp->th[thread];
	int64_t k = ctx_at(th, t), j, i;
	uint64_t from, read;

	for (j = k + 1; j < (int64_t)th->nctx && j <= k + KP_DEP_SCAN; j++) {
		const struct kp_ctx *x = &th->ctx[j];

		if (x->conn == KP_NONE || !ctx_ours(w, x))
			continue;
		if (!ctx_mine(w, x) || x->via != KP_NONE)
			return false;
		break;
	}
	if (j >= (int64_t)th->nctx || j > k + KP_DEP_SCAN)
		return false;
	/* the answer for this next context, asked at a later t: still no */
	if (thread == w->timer_no_thread && j == w->timer_no_next)
		return false;
	w->timer_no_thread = thread;
	w->timer_no_next = j;
	for (i = k; i >= 0 && th->ctx[i + 1].ts > lo; i--) {
		if (ctx_mine(w, &th->ctx[i]))
			break;
		if (th->ctx[i].conn != KP_NONE && ctx_ours(w, &th->ctx[i]))
			return false; /* a call for it in between: not a timer */
	}
	read = w->kp->cn[w->conn].req.first_read_exit;
	if (i >= 0 && th->ctx[i + 1].ts > lo && th->ctx[i + 1].ts >= read)
		from = th->ctx[i + 1].ts;
	else if (!w->sid)
		from = read;
	else
		return false;
	if (from <= lo || from >= t || !(polled_in(th, from, t) || overtaken(w, th, from, t)))
		return false;
	w->timer_thread = thread;
	w->timer_from = from;
	w->timer_exp = timer_expiry(th, from, t);
	return true;
}

int kp__walk(struct kp *kp, uint32_t conn)
{
	struct kp_conn *c = &kp->cn[conn];
	struct walk w = {.kp = kp,
			 .conn = conn,
			 .sid = c->req.sid,
			 .serving = c->req.reader,
			 .proc = c->proc,
			 .start = c->req.start,
			 .memo_thread = KP_NONE,
			 .f3_proc = KP_NONE,
			 .cut_thread = KP_NONE,
			 .creator = KP_NONE,
			 .connector = KP_NONE,
			 .timer_thread = KP_NONE,
			 .timer_no_thread = KP_NONE};
	uint64_t t = c->req.end, S = c->req.start;
	uint32_t thread = c->req.writer, jumps = 0, steps = 0;
	bool lock_chain = false;
	int err = 0;

	kp->nws = kp->nculs = kp->nstrs = kp->nwcalls = 0;
	own_forget(kp);
	while (t > S && !err) {
		uint64_t lo = w.nret ? w.ret[w.nret - 1].floor : S;
		struct kp_thread *th;
		bool jumped = false;
		int64_t idx;

		if (t <= lo) {
			thread = w.ret[--w.nret].thread;
			lock_chain = false;
			continue;
		}
		th = &kp->th[thread];
		idx = kp__tl_find(th, t);
		if (idx < 0 || ++steps > KP_WALK_MAX_STEPS) {
			err = seg_add(kp, lo, t, CP_CAT_UNEXPLAINED, thread, -1, w.nret > 0, -1, -1);
			t = lo;
			if (steps > KP_WALK_MAX_STEPS)
				break;
			continue;
		}
		while (idx >= 0 && t > lo && !err) {
			const struct kp_iv *iv = &th->iv[idx];
			uint64_t a = iv->start > lo ? iv->start : lo;
			bool own = false;

			if (thread == w.creator && t <= w.connect_ts) {
				if (into_connector(&w, &thread, t)) {
					jumped = true;
					break;
				}
				w.creator = KP_NONE; /* its thread unknown then */
			}
			if (thread == w.creator && a < w.connect_ts)
				a = w.connect_ts;
			if (w.timer_thread == thread && t <= w.timer_exp) {
				uint64_t from = w.timer_from > lo ? w.timer_from : lo;

				err = seg_add(kp, from, t, CP_CAT_SLEEP, thread, -1, false, -1,
					      kw__proc_frame(&w, thread));
				t = from;
				w.timer_thread = KP_NONE;
				jumped = true;
				break;
			}
			if (w.timer_thread == thread && a < w.timer_exp)
				a = w.timer_exp;
			if (w.cut_thread == thread && t <= w.cut_ts) {
				err = dep_follow(&w, lo, &thread, &t);
				jumped = true;
				break;
			}
			if (w.cut_thread == thread) {
				if (a < w.cut_ts)
					a = w.cut_ts;
				/* a wait for a CPU after the reply came: still that */
				if (!w.cut_queued && iv->state == KP_ST_RUNNABLE)
					err = kw__runqueue_seg(&w, thread, iv, a, t, false, false);
				else
					err = queued_seg(&w, thread, iv, a, t);
			} else {
				bool other = false, mine = false;

				if (!w.nret && th->nctx) {
					/* working for the request by its
					 * calls owns the time */
					int64_t k = ctx_at(th, t);

					other = ctx_other(&w, th, k);
					mine = k >= 0 && th->ctx[k].conn != KP_NONE && !other;
					/* and the stretches before it alike, at once */
					while (k > 0 && th->ctx[k].ts > a && !other &&
					       iv->state == KP_ST_RUNNING &&
					       !ctx_other(&w, th, k - 1) &&
					       (th->ctx[k - 1].conn != KP_NONE) == mine)
						k--;
					/* (a wait is one: its end says whose it was) */
					if (k >= 0 && th->ctx[k].ts > a && iv->state != KP_ST_BLOCKED)
						a = th->ctx[k].ts;
				}
				own = !w.nret && (mine || owned(&w, thread, idx));
				if (own)
					lock_chain = false;
				if (own && (other || dep_poll(&w, iv, t)) && w.cut_thread == KP_NONE &&
				    dep_cut(&w, thread, iv, t, lo, other))
					continue;
				if (own && iv->state == KP_ST_RUNNABLE && w.cut_thread == KP_NONE &&
				    reply_in_wait(&w, thread, iv, t, lo))
					continue;
				if (own && (other || dep_poll(&w, iv, t)) && w.timer_thread == KP_NONE &&
				    w.cut_thread == KP_NONE && timer_gap(&w, thread, t, lo))
					continue;
				if (own && other)
					err = queued_seg(&w, thread, iv, a, t);
				else
					err = walk_iv(&w, &thread, iv, a, &t, lo, own, &lock_chain, &jumps,
						      &jumped);
			}
			if (jumped)
				break;
			t = a;
			jumps = 0;
			if (t <= iv->start)
				idx--;
		}
		if (jumped) {
			jumps++;
			continue;
		}
		if (t > lo && !err) {
			/* ran off the start of what we know of this thread */
			err = seg_add(kp, lo, t, CP_CAT_UNEXPLAINED, thread, -1, w.nret > 0, -1, -1);
			t = lo;
		}
	}
	if (err)
		return err;
	/* back to front → time order */
	for (uint32_t i = 0, j = kp->nws ? kp->nws - 1 : 0; i < j; i++, j--) {
		struct kp_wseg tmp = kp->ws[i];

		kp->ws[i] = kp->ws[j];
		kp->ws[j] = tmp;
	}
	return 0;
}
