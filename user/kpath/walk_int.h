/* SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only) */
/* One request's walk (walk.c), shared with steps.c. */
#ifndef CRITPATH_WALK_INT_H
#define CRITPATH_WALK_INT_H

#include "kpath_internal.h"

#define KP_WALK_MAX_STEPS 1000000u
#define KP_WALK_MAX_JUMPS 64u /* jumps in a row without time moving back */
#define KP_OWN_MAX_DEPTH 256u
#define KP_WALK_ENTERED 8u
#define KP_WALK_RET 16u
#define KP_DEP_SCAN 8 /* contexts looked at for a request's next dependency */
#define KP_RECENT_NS 2000000ull /* a waker's work this recent says whose it is */

struct walk {
	struct kp *kp;
	uint32_t conn;	  /* the request's connection */
	uint32_t sid;	  /* its HTTP/2 stream, 0 for none */
	uint32_t serving; /* the thread that read the request */
	uint32_t proc;	  /* the serving process */
	uint64_t start;
	const char *call; /* the downstream call the walk went through, or NULL */
	uint32_t memo_thread;
	int64_t memo_block;
	int64_t memo_hi;
	bool memo_owned;
	/* the last third frame named (proc_frame): process, call, string */
	uint32_t f3_proc;
	const char *f3_call;
	const char *f3;
	uint32_t entered[KP_WALK_ENTERED];
	uint32_t nentered;
	struct {
		uint32_t proc;
		const char *call;
	} calls[KP_WALK_ENTERED];
	uint32_t ncalls;
	/* Interference entered from a waiter (SCENARIOS.md 4, 8). */
	struct {
		uint32_t thread;
		uint64_t floor;
	} ret[KP_WALK_RET];
	uint32_t nret;
	/* A thread busy while this request's dependency waited (SCENARIOS.md
	 * 9). */
	uint32_t cut_thread, cut_conn;
	uint64_t cut_ts;
	const struct kp_write *cut_src; /* the traced peer's write that carried it, or NULL */
	bool cut_queued; /* the thread worked for others meanwhile (not only waited for a CPU) */
	/* Threads that created a thread for the request */
	uint32_t adopted[KP_WALK_ENTERED];
	uint32_t nadopted;
	/* The last creator entered, when a traced client connected to it: the
	 * client's thread and its first write on the connection (the creator
	 * cannot have worked for it before). */
	uint32_t creator, connector;
	uint64_t connect_ts;
	/* An event loop's wait for the request's timer (DESIGN.md 5): from
	 * when it left the request to the timer's expiry, the request's own
	 * sleep; the loop's work after the expiry is interference. */
	uint32_t timer_thread;
	uint64_t timer_from, timer_exp;
	/* the last thread and next own context timer_gap said no to */
	uint32_t timer_no_thread;
	int64_t timer_no_next;
};

static inline bool same_stack(const struct kp_thread *t, int64_t x, int64_t y)
{
	const struct kp_probe_ev *a = &t->pev[x - (int64_t)t->pev_base];
	const struct kp_probe_ev *b = &t->pev[y - (int64_t)t->pev_base];

	return a->depth == b->depth && !memcmp(a->stack, b->stack, a->depth * sizeof(a->stack[0]));
}

/* Two string ids name the same string (or both none) */
static inline bool same_str(const struct kp *kp, int32_t x, int32_t y)
{
	return x == y || (x >= 0 && y >= 0 && kp->strs[x] == kp->strs[y]);
}

static inline __attribute__((always_inline)) int kw__seg_addq(struct kp *kp, uint64_t a, uint64_t b,
							  uint8_t cat, uint32_t thread, int16_t cpu,
							  bool interf, int32_t peer, int32_t frame3,
							  bool queued)
{
	struct kp_wseg *s;
	int64_t pev;

	if (b <= a)
		return 0;
	/* the probed calls active on the thread at the segment's end */
	pev = thread != KP_NONE ? kp__tl_probe_at(&kp->th[thread], b) : -1;
	if (kp->nws) {
		/* the last one added is the next in time: extend it when alike */
		s = &kp->ws[kp->nws - 1];
		if (s->start == b && s->cat == cat && s->thread == thread && s->cpu == cpu &&
		    s->interference == interf && same_str(kp, s->peer, peer) &&
		    same_str(kp, s->frame3, frame3) &&
		    s->queued == queued && !s->ncul && cat != CP_CAT_RUNQUEUE &&
		    cat != CP_CAT_LOCK &&
		    (s->pev == pev ||
		     (s->pev >= 0 && pev >= 0 && same_stack(&kp->th[thread], s->pev, pev)))) {
			s->start = a;
			return 0;
		}
	}
	if (kp__grow((void **)&kp->ws, &kp->capws, kp->nws + 1, sizeof(*kp->ws)))
		return -ENOMEM;
	s = &kp->ws[kp->nws++];
	memset(s, 0, sizeof(*s));
	s->start = a;
	s->end = b;
	s->cat = cat;
	s->thread = thread;
	s->cpu = cpu;
	s->interference = interf;
	s->peer = peer;
	s->frame3 = frame3;
	s->queued = queued;
	s->pev = pev;
	s->cul_first = kp->nculs;
	return 0;
}

static inline uint8_t kw__block_category(const struct kp_iv *iv)
{
	if (iv->reason == KP_BR_DISK || iv->wake == KP_WK_DISK)
		return CP_CAT_DISK;
	if (iv->wake == KP_WK_TIMER)
		return CP_CAT_SLEEP;
	if (iv->wake == KP_WK_NET)
		return CP_CAT_NETWORK;
	return CP_CAT_UNEXPLAINED;
}

static inline int32_t kw__str_ref(struct kp *kp, const char *s)
{
	if (!s || kp__grow((void **)&kp->strs, &kp->capstrs, kp->nstrs + 1, sizeof(*kp->strs)))
		return -1;
	kp->strs[kp->nstrs] = s;
	return (int32_t)kp->nstrs++;
}

static inline int kw__cul_add(struct kp *kp, int32_t pid, int32_t tid, const char *comm, uint64_t ns)
{
	struct cp_culprit *c;

	for (uint32_t i = kp->ws[kp->nws - 1].cul_first; i < kp->nculs; i++) {
		if (kp->culs[i].tid == tid && kp->culs[i].pid == pid) {
			kp->culs[i].ns += ns;
			return 0;
		}
	}
	/* comm is interned (or NULL: ENOMEM) */
	if (kp__grow((void **)&kp->culs, &kp->capculs, kp->nculs + 1, sizeof(*kp->culs)))
		return -ENOMEM;
	c = &kp->culs[kp->nculs++];
	c->pid = pid;
	c->tid = tid;
	c->comm = comm;
	c->ns = ns;
	kp->ws[kp->nws - 1].ncul++;
	return 0;
}

/* steps.c and walk.c, for each other */
const struct kp_write *kw__net_source(struct kp *kp, uint32_t conn, uint64_t ts);
int32_t kw__conn_peer_str(struct kp *kp, uint32_t conn);
const char *kw__join_interned(struct kp *kp, const char *a, size_t alen, const char *b, size_t blen);
/* With want: the walk waited on conn for a reply until t, in [a, t] of the
 * segment last added (a == t: in none); ignored unless conn is a TCP call */
int kw__call_wait(struct kp *kp, uint32_t conn, uint64_t a, uint64_t t, bool stitched);

#endif /* CRITPATH_WALK_INT_H */
