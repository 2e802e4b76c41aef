// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/* Thread timelines (DESIGN.md 5): gapless running, runnable and blocked
 * intervals, for target threads only. */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kpath_internal.h"

#define KP_PEND_WAKE_NS 100000ull

/* pr_hint is set to prmap's answers and cleared at recycling: a matching
 * hint is the answer. */
uint32_t kp__proc_find(struct kp *kp, uint32_t host, int32_t pid)
{
	uint32_t *hint = &kp->pr_hint[(uint32_t)pid % KP_PR_HINTS], i = *hint;

	if (i < kp->npr && kp->pr[i].pid == pid && kp->pr[i].host == host)
		return i;
	i = u64map__get(&kp->prmap, (uint64_t)host << 32 | (uint32_t)pid);
	if (i != KP_NONE)
		*hint = i;
	return i;
}

static uint32_t slot_peek(void **arr, uint32_t n, uint32_t *cap, size_t elem, const uint32_t *freel,
			  uint32_t nfree)
{
	if (nfree)
		return freel[nfree - 1];
	if (kp__grow(arr, cap, n + 1, elem))
		return KP_NONE;
	return n;
}

static void slot_commit(uint32_t i, uint32_t *n, uint32_t *nfree)
{
	if (i == *n)
		(*n)++;
	else
		(*nfree)--;
}

static uint32_t proc_new(struct kp *kp, uint32_t host, int32_t pid)
{
	uint32_t i = slot_peek((void **)&kp->pr, kp->npr, &kp->cappr, sizeof(*kp->pr), kp->freepr,
			       kp->nfreepr);
	struct kp_proc *p;

	if (i == KP_NONE || u64map__put(&kp->prmap, (uint64_t)host << 32 | (uint32_t)pid, i))
		return KP_NONE;
	slot_commit(i, &kp->npr, &kp->nfreepr);
	p = &kp->pr[i];
	memset(p, 0, sizeof(*p));
	p->host = host;
	p->pid = pid;
	kp->pr_hint[(uint32_t)pid % KP_PR_HINTS] = i;
	return i;
}

uint32_t kp__proc(struct kp *kp, uint32_t host, int32_t pid)
{
	uint32_t i = kp__proc_find(kp, host, pid);

	return i != KP_NONE ? i : proc_new(kp, host, pid);
}

uint32_t kp__thread_find(const struct kp *kp, uint32_t host, int32_t tid)
{
	uint64_t key = (uint64_t)host << 32 | (uint32_t)tid;
	uint32_t i = kp->th_hint[(uint32_t)tid % KP_TH_HINTS];

	if (i < kp->nth && kp->th[i].key == key && kp->th[i].proc != KP_NONE)
		return i;
	return u64map__get(&kp->thmap, key);
}

static uint32_t thread_new(struct kp *kp, uint32_t host, int32_t pid, int32_t tid, uint32_t p)
{
	uint32_t i = slot_peek((void **)&kp->th, kp->nth, &kp->capth, sizeof(*kp->th), kp->freeth,
			       kp->nfreeth);
	uint64_t key = (uint64_t)host << 32 | (uint32_t)tid;
	struct kp_thread *t;

	if (i == KP_NONE || u64map__put(&kp->thmap, key, i))
		return KP_NONE;
	slot_commit(i, &kp->nth, &kp->nfreeth);
	t = &kp->th[i];
	memset(t, 0, sizeof(*t));
	t->key = key;
	t->host = host;
	t->pid = pid;
	t->tid = tid;
	t->proc = p;
	t->pend_waker = KP_NONE;
	t->pend_conn = KP_NONE;
	t->read_conn = KP_NONE;
	/* the newest state of the tid: what the map names too */
	kp->th_hint[(uint32_t)tid % KP_TH_HINTS] = i;
	return i;
}

uint32_t kp__thread(struct kp *kp, uint32_t host, int32_t pid, int32_t tid)
{
	uint64_t key = (uint64_t)host << 32 | (uint32_t)tid;
	uint32_t *hint = &kp->th_hint[(uint32_t)tid % KP_TH_HINTS];
	uint32_t i = *hint, p;

	if (i < kp->nth && kp->th[i].key == key && kp->th[i].proc != KP_NONE)
		return i;
	i = u64map__get(&kp->thmap, key);
	if (i != KP_NONE) {
		*hint = i;
		return i;
	}
	p = kp__proc(kp, host, pid);
	if (p == KP_NONE)
		return KP_NONE;
	return thread_new(kp, host, pid, tid, p);
}

static uint64_t tl_exit_at(const struct kp_thread *t)
{
	if (t->niv && t->iv[t->niv - 1].state == KP_ST_DEAD)
		return t->iv[t->niv - 1].start;
	return t->exit_ts ? t->exit_ts : KP_OPEN;
}

static bool tl_exited(const struct kp_thread *t)
{
	return tl_exit_at(t) != KP_OPEN;
}

/* Tids and pids are reused once reaped; the old state stays until
 * kp__tl_recycle. */
uint32_t kp__thread_born(struct kp *kp, uint32_t host, int32_t pid, int32_t tid)
{
	uint32_t i = kp__thread_find(kp, host, tid), p;

	if (i != KP_NONE && kp->th[i].pid == pid && !tl_exited(&kp->th[i]))
		return i;
	p = kp__proc_find(kp, host, pid);
	if (p == KP_NONE || (tid == pid && kp->pr[p].exited))
		p = proc_new(kp, host, pid);
	if (p == KP_NONE)
		return KP_NONE;
	return thread_new(kp, host, pid, tid, p);
}

static struct kp_iv *tl_cur(struct kp_thread *t)
{
	return t->niv && t->iv[t->niv - 1].end == KP_OPEN ? &t->iv[t->niv - 1] : NULL;
}

/* Closes the current interval at ts and opens one in state (backwards times
 * clamped). */
static struct kp_iv *tl_open(struct kp_thread *t, uint8_t state, uint64_t ts)
{
	struct kp_iv *c = tl_cur(t), *n;
	uint64_t start = ts;

	if (c) {
		c->end = ts < c->start ? c->start : ts;
		start = c->end;
	} else if (t->niv && start < t->iv[t->niv - 1].end) {
		start = t->iv[t->niv - 1].end;
	}
	if (kp__win_more((void **)&t->iv, &t->ivoff, &t->capiv, t->niv, sizeof(*t->iv)))
		return NULL;
	n = &t->iv[t->niv++];
	memset(n, 0, sizeof(*n));
	n->start = start;
	n->end = KP_OPEN;
	n->state = state;
	n->cpu = -1;
	n->waker = KP_NONE;
	n->conn = KP_NONE;
	return n;
}

static int tl_begin(struct kp_thread *t, uint8_t state)
{
	struct kp_iv *iv;

	if (t->niv)
		return 0;
	iv = tl_open(t, state, 0);
	return iv ? 0 : -ENOMEM;
}

static int tl_wake(struct kp_thread *t, uint64_t ts, uint8_t wake, uint32_t waker, uint32_t conn)
{
	struct kp_iv *c;

	if (tl_begin(t, KP_ST_BLOCKED))
		return -ENOMEM;
	c = tl_cur(t);
	if (!c)
		return 0; /* dead */
	if (c->state == KP_ST_RUNNING && c->start == ts && t->niv >= 2 &&
	    t->iv[t->niv - 2].state == KP_ST_BLOCKED && t->iv[t->niv - 2].end == ts &&
	    t->iv[t->niv - 2].wake == KP_WK_NONE) {
		/* an inferred switch-in at the same instant: put at its
		 * wakeup */
		c = &t->iv[t->niv - 2];
		c->wake = wake;
		c->waker = waker;
		if (conn != KP_NONE)
			c->conn = conn;
		return 0;
	}
	if (c->state == KP_ST_RUNNING) {
		t->pend_wake_ts = ts;
		t->pend_wake = wake;
		t->pend_waker = waker;
		t->pend_conn = conn;
		return 0;
	}
	if (c->state != KP_ST_BLOCKED)
		return 0; /* already runnable: a second wakeup changes nothing */
	c->wake = wake;
	c->waker = waker;
	if (conn != KP_NONE)
		c->conn = conn;
	return tl_open(t, KP_ST_RUNNABLE, ts) ? 0 : -ENOMEM;
}

static int tl_prev_culprit(struct kp *kp, uint32_t host, const struct cp_ev_sched_switch *e,
			   uint32_t next, uint64_t ts)
{
	const struct kp_thread *t = &kp->th[next];
	uint32_t prev = kp__thread_find(kp, host, (int32_t)e->prev_tid);
	struct cp_ev_runq_culprit c = {};

	if (t->niv < 2 || t->iv[t->niv - 2].state != KP_ST_RUNNABLE || t->iv[t->niv - 2].start > ts)
		return 0;
	c.h.tid = e->next_tid;
	c.h.pid = e->next_pid;
	c.culprit_pid = e->prev_pid;
	c.culprit_tid = e->prev_tid;
	c.ns = ts - t->iv[t->niv - 2].start;
	c.runnable_since = t->iv[t->niv - 2].start;
	if (prev != KP_NONE)
		memcpy(c.culprit_comm, kp->th[prev].comm, CP_COMM_LEN);
	return kp__tl_culprit(kp, host, &c, ts);
}

int kp__tl_switch(struct kp *kp, uint32_t host, const struct cp_ev_sched_switch *e, uint64_t ts)
{
	uint32_t pi = kp__proc_find(kp, host, (int32_t)e->prev_pid);
	uint32_t ni = kp__proc_find(kp, host, (int32_t)e->next_pid);

	if (pi != KP_NONE && e->prev_tid) {
		uint32_t ti = kp__thread(kp, host, (int32_t)e->prev_pid, (int32_t)e->prev_tid);
		struct kp_thread *t;
		struct kp_iv *c;

		if (ti == KP_NONE)
			return -ENOMEM;
		t = &kp->th[ti];
		if (tl_begin(t, KP_ST_UNKNOWN))
			return -ENOMEM;
		c = tl_cur(t);
		if (c && c->state != KP_ST_RUNNING && c->state != KP_ST_UNKNOWN) {
			/* we missed its switch-in: it ran from some time we do not know */
			if (!tl_open(t, KP_ST_UNKNOWN, ts))
				return -ENOMEM;
		}
		if (e->prev_state == CP_PREV_PREEMPTED) {
			if (!tl_open(t, KP_ST_RUNNABLE, ts))
				return -ENOMEM;
		} else if (e->prev_state == CP_PREV_DEAD) {
			c = tl_open(t, KP_ST_DEAD, ts);
			if (!c)
				return -ENOMEM;
		} else {
			c = tl_open(t, KP_ST_BLOCKED, ts);
			if (!c)
				return -ENOMEM;
			if (e->prev_state_raw & 2) /* TASK_UNINTERRUPTIBLE */
				c->reason = KP_BR_DISK;
			if (t->pend_wake && t->pend_wake_ts <= ts &&
			    ts - t->pend_wake_ts <= KP_PEND_WAKE_NS) {
				uint8_t w = t->pend_wake;

				t->pend_wake = 0;
				if (tl_wake(t, ts, w, t->pend_waker, t->pend_conn))
					return -ENOMEM;
			}
		}
		t->pend_wake = 0;
	}
	if (ni != KP_NONE && e->next_tid) {
		uint32_t ti = kp__thread(kp, host, (int32_t)e->next_pid, (int32_t)e->next_tid);
		struct kp_thread *t;
		struct kp_iv *c;

		if (ti == KP_NONE)
			return -ENOMEM;
		t = &kp->th[ti];
		if (e->next_comm[0])
			memcpy(t->comm, e->next_comm, CP_COMM_LEN);
		t->comm[CP_COMM_LEN - 1] = '\0';
		if (tl_begin(t, KP_ST_UNKNOWN))
			return -ENOMEM;
		c = tl_open(t, KP_ST_RUNNING, ts);
		if (!c)
			return -ENOMEM;
		c->cpu = (int16_t)e->h.cpu;
		t->pend_wake = 0;
		kp->inferred_switches += !!(e->flags & CP_SW_INFERRED);
		if (e->flags & CP_SW_PREV_CULPRIT)
			return tl_prev_culprit(kp, host, e, ti, ts);
	}
	return 0;
}

int kp__tl_waking(struct kp *kp, uint32_t host, const struct cp_ev_sched_waking *e, uint64_t ts)
{
	uint32_t wi = kp__thread(kp, host, (int32_t)e->wakee_pid, (int32_t)e->wakee_tid);
	uint32_t waker = KP_NONE, conn = KP_NONE;
	uint8_t wake;

	if (wi == KP_NONE)
		return -ENOMEM;
	if (e->waker_ctx == CP_CTX_TASK && e->waker_tid)
		waker = kp__thread_find(kp, host, (int32_t)e->waker_tid);
	if (waker == KP_NONE && e->h.cpu < KP_MAX_CPUS &&
	    (e->waker_ctx == CP_CTX_TASK ||
	     (e->waker_ctx == CP_CTX_SOFTIRQ && e->softirq_vec == CP_SOFTIRQ_NET_RX)) &&
	    (size_t)host * KP_MAX_CPUS + e->h.cpu < kp->nlastdr) {
		/* arriving data wakes its reader from the same softirq right
		 * after sk_data_ready */
		const struct kp_lastdr *d = &kp->lastdr[(size_t)host * KP_MAX_CPUS + e->h.cpu];

		if (d->conn != KP_NONE && d->ts <= ts && ts - d->ts <= KP_DR_WINDOW_NS)
			conn = d->conn;
	}
	if (waker != KP_NONE)
		wake = KP_WK_TASK;
	else if (conn != KP_NONE)
		wake = KP_WK_NET;
	else if (e->waker_ctx == CP_CTX_SOFTIRQ && e->softirq_vec == CP_SOFTIRQ_NET_RX)
		wake = KP_WK_NET;
	else if (e->waker_ctx == CP_CTX_SOFTIRQ &&
		 (e->softirq_vec == CP_SOFTIRQ_TIMER || e->softirq_vec == CP_SOFTIRQ_HRTIMER))
		wake = KP_WK_TIMER;
	else if (e->waker_ctx == CP_CTX_SOFTIRQ && e->softirq_vec == CP_SOFTIRQ_BLOCK)
		wake = KP_WK_DISK;
	else if (e->waker_ctx == CP_CTX_HARDIRQ)
		wake = KP_WK_TIMER; /* hrtimers fire in hardirq; D-state blocks say disk */
	else if (e->waker_ctx == CP_CTX_TASK)
		wake = KP_WK_TASK; /* a thread we do not trace */
	else
		wake = KP_WK_OTHER;
	return tl_wake(&kp->th[wi], ts, wake, waker, conn);
}

int kp__tl_new(struct kp *kp, uint32_t host, const struct cp_ev_wakeup_new *e, uint64_t ts)
{
	uint32_t parent = kp__thread_find(kp, host, (int32_t)e->h.tid);
	uint32_t ci = kp__thread_born(kp, host, (int32_t)e->pid, (int32_t)e->tid);
	struct kp_thread *t;
	struct kp_iv *c;

	if (ci == KP_NONE)
		return -ENOMEM;
	t = &kp->th[ci];
	if (t->niv)
		return 0;
	c = tl_open(t, KP_ST_BLOCKED, ts);
	if (!c)
		return -ENOMEM;
	c->reason = KP_BR_NEW;
	c->wake = KP_WK_NEW;
	c->waker = parent;
	return tl_open(t, KP_ST_RUNNABLE, ts) ? 0 : -ENOMEM;
}

int kp__tl_culprit(struct kp *kp, uint32_t host, const struct cp_ev_runq_culprit *e, uint64_t ts)
{
	uint32_t ti = kp__thread_find(kp, host, (int32_t)e->h.tid);
	struct kp_thread *t;
	struct kp_culprit *c;
	struct kp_iv *iv = NULL;

	if (ti == KP_NONE)
		return 0;
	/* pid 0: wakeup latency, without a culprit */
	if (!e->culprit_pid && strncmp(e->culprit_comm, "[other]", CP_COMM_LEN))
		return 0;
	t = &kp->th[ti];
	for (uint32_t k = t->niv; k > 0 && k + 4 > t->niv; k--) {
		if (t->iv[k - 1].state == KP_ST_RUNNABLE) {
			iv = &t->iv[k - 1];
			break;
		}
	}
	if (!iv)
		return 0;
	if (kp__win_more((void **)&t->cul, &t->culoff, &t->capcul, t->ncul, sizeof(*t->cul)))
		return -ENOMEM;
	c = &t->cul[t->ncul];
	c->ts = ts;
	c->ns = e->ns;
	c->pid = (int32_t)e->culprit_pid;
	c->tid = (int32_t)e->culprit_tid;
	memcpy(c->comm, e->culprit_comm, CP_COMM_LEN);
	c->comm[CP_COMM_LEN - 1] = '\0';
	if (!e->culprit_pid && !strncmp(e->culprit_comm, "[other]", CP_COMM_LEN))
		memcpy(c->comm, KP_OTHER_TASKS, sizeof(KP_OTHER_TASKS));
	c->icomm = NULL;
	if (!iv->ncul || iv->cul_first + iv->ncul != t->cul_base + t->ncul)
		iv->cul_first = (uint32_t)(t->cul_base + t->ncul), iv->ncul = 0;
	iv->ncul++;
	t->ncul++;
	return 0;
}

static uint32_t probe_name(struct kp *kp, uint32_t host, uint32_t id, const char *sym)
{
	uint64_t key = (uint64_t)host << 32 | id;
	uint32_t i = u64map__get(&kp->probemap, key);

	if (i == KP_NONE) {
		if (kp__grow((void **)&kp->probes, &kp->capprobes, kp->nprobes + 1,
			     sizeof(*kp->probes)))
			return KP_NONE;
		i = kp->nprobes;
		snprintf(kp->probes[i].name, KP_NAME_LEN, "probe%u", id);
		kp->probes[i].iname = kp__intern(kp, kp->probes[i].name);
		if (!kp->probes[i].iname || u64map__put(&kp->probemap, key, i))
			return KP_NONE;
		kp->nprobes++;
	}
	if (sym && sym[0]) {
		snprintf(kp->probes[i].name, KP_NAME_LEN, "%s", sym);
		kp->probes[i].iname = kp__intern(kp, kp->probes[i].name);
		if (!kp->probes[i].iname)
			return KP_NONE;
	}
	return i;
}

int kp__tl_probe_def(struct kp *kp, uint32_t host, const struct cp_md_probe *m)
{
	char sym[sizeof(m->symbol) + 1];

	memcpy(sym, m->symbol, sizeof(m->symbol));
	sym[sizeof(m->symbol)] = '\0';
	return probe_name(kp, host, m->probe_id, sym) == KP_NONE ? -ENOMEM : 0;
}

int kp__tl_probe(struct kp *kp, uint32_t host, const struct cp_ev_uprobe *e, uint64_t ts)
{
	uint32_t ti = kp__thread(kp, host, (int32_t)e->h.pid, (int32_t)e->h.tid);
	uint32_t name = probe_name(kp, host, e->probe_id, NULL);
	struct kp_probe_ev *ev;
	struct kp_thread *t;

	if (ti == KP_NONE || name == KP_NONE)
		return -ENOMEM;
	t = &kp->th[ti];
	if (e->phase == CP_PHASE_ENTER) {
		if (t->pdepth < KP_PROBE_DEPTH)
			t->pstack[t->pdepth] = name;
		if (t->pdepth < UINT8_MAX)
			t->pdepth++;
	} else {
		for (int d = (t->pdepth < KP_PROBE_DEPTH ? t->pdepth : KP_PROBE_DEPTH) - 1; d >= 0;
		     d--) {
			if (t->pstack[d] == name) {
				t->pdepth = (uint8_t)d;
				break;
			}
		}
	}
	if (kp__win_more((void **)&t->pev, &t->pevoff, &t->cappev, t->npev, sizeof(*t->pev)))
		return -ENOMEM;
	ev = &t->pev[t->npev++];
	ev->ts = ts;
	ev->depth = t->pdepth < KP_PROBE_DEPTH ? t->pdepth : KP_PROBE_DEPTH;
	memcpy(ev->stack, t->pstack, sizeof(ev->stack));
	return 0;
}

int64_t kp__tl_probe_at_any(const struct kp_thread *t, uint64_t ts)
{
	uint32_t lo = kp__lower_bound_from_end(t->pev, t->npev, sizeof(*t->pev),
					       offsetof(struct kp_probe_ev, ts), ts);

	return lo ? (int64_t)(t->pev_base + lo - 1) : -1;
}

/* thread works for conn (KP_NONE: nobody's) from ts on */
static bool ctx_same(const struct kp_ctx *c, uint32_t conn, uint32_t lo, uint32_t hi)
{
	return c->conn == conn && c->sid_lo == lo && c->sid_hi == hi;
}

static int ctx_set(struct kp_thread *t, uint64_t ts, uint32_t conn, uint32_t lo, uint32_t hi,
		   uint32_t via)
{
	struct kp_ctx *c;

	if (t->nctx && t->ctx[t->nctx - 1].ts == ts && t->ctx[t->nctx - 1].via != KP_NONE &&
	    t->ctx[t->nctx - 1].via != t->ctx[t->nctx - 1].conn &&
	    t->ctx[t->nctx - 1].conn != conn && via == KP_NONE) {
		/* a reply read for one request, then a response for another:
		 * the read stays the first's */
		ts++;
	} else if (t->nctx && t->ctx[t->nctx - 1].ts >= ts) {
		c = &t->ctx[t->nctx - 1];
		if (via != KP_NONE || c->conn != conn)
			c->via = via;
		c->conn = conn;
		c->sid_lo = lo;
		c->sid_hi = hi;
		if (t->nctx > 1 && ctx_same(c - 1, conn, lo, hi) &&
		    (c->via == KP_NONE || c->via == conn || c[-1].via == c->via))
			t->nctx--;
		return 0;
	}
	/* no change (nobody's is where every thread starts); but a reply read
	 * for the same request is kept: its arrival may be the dependency */
	if (t->nctx ? ctx_same(&t->ctx[t->nctx - 1], conn, lo, hi) &&
			  (via == KP_NONE || via == conn || t->ctx[t->nctx - 1].via == via)
		    : conn == KP_NONE)
		return 0;
	if (kp__win_more((void **)&t->ctx, &t->ctxoff, &t->capctx, t->nctx, sizeof(*t->ctx)))
		return -ENOMEM;
	c = &t->ctx[t->nctx++];
	c->ts = ts;
	c->conn = conn;
	c->sid_lo = lo;
	c->sid_hi = hi;
	c->via = via;
	return 0;
}

static int tl_call(struct kp *kp, uint32_t thread, uint64_t end, uint32_t before, uint32_t lo,
		   uint32_t hi, uint32_t after, uint32_t via)
{
	struct kp_thread *t = &kp->th[thread];
	int err = 0;

	if (before != KP_NONE) {
		/* a response stretch begun by another connection's read
		 * depends on it, unless polled since */
		const struct kp_ctx *l = t->nctx ? &t->ctx[t->nctx - 1] : NULL;
		uint32_t bvia = t->read_ts && t->read_ts == t->last_call && t->read_conn != before &&
					!(l && l->ts == t->last_call && l->conn != KP_NONE &&
					  l->conn != before) &&
					!(l && l->ts > t->read_ts && l->conn == KP_NONE)
				    ? t->read_conn
				    : KP_NONE;

		err = ctx_set(t, t->last_call && t->last_call <= end ? t->last_call : end, before,
			      lo, hi, bvia);
	}
	if (!err)
		err = ctx_set(t, end, after, 0, 0, via);
	if (end > t->last_call)
		t->last_call = end;
	return err;
}

int kp__tl_call(struct kp *kp, uint32_t thread, uint64_t end, uint32_t before, uint32_t after)
{
	return tl_call(kp, thread, end, before, 0, 0, after, KP_NONE);
}

int kp__tl_call_read(struct kp *kp, uint32_t thread, uint64_t enter, uint64_t end, uint32_t after,
		     uint32_t via)
{
	struct kp_thread *t = &kp->th[thread];

	if (after == via && after != KP_NONE && enter < end && enter > t->last_call &&
	    (!t->nctx || t->ctx[t->nctx - 1].ts < enter)) {
		for (uint32_t k = t->niv; k > 0 && k + 4 > t->niv; k--) {
			const struct kp_iv *iv = &t->iv[k - 1];

			if (iv->end != KP_OPEN && iv->end <= enter)
				break;
			if (iv->state == KP_ST_BLOCKED && iv->end > enter) {
				end = enter;
				break;
			}
		}
	}
	return tl_call(kp, thread, end, KP_NONE, 0, 0, after, via);
}

int kp__tl_idle(struct kp *kp, uint32_t thread, uint64_t enter)
{
	struct kp_thread *t = &kp->th[thread];

	/* not before what its calls said since (a damaged stream) */
	if (!t->nctx || t->ctx[t->nctx - 1].ts >= enter)
		return 0;
	return ctx_set(t, enter, KP_NONE, 0, 0, KP_NONE);
}

int kp__tl_call_streams(struct kp *kp, uint32_t thread, uint64_t end, uint32_t before,
			uint32_t sid_lo, uint32_t sid_hi)
{
	return tl_call(kp, thread, end, before, sid_lo, sid_hi, KP_NONE, KP_NONE);
}

int64_t kp__tl_ctx_before(const struct kp_thread *t, uint64_t ts)
{
	return (int64_t)kp__lower_bound_from_end(t->ctx, t->nctx, sizeof(*t->ctx),
						 offsetof(struct kp_ctx, ts), ts) -
	       1;
}

int kp__tl_seen_running(struct kp *kp, uint32_t thread, uint32_t cpu)
{
	struct kp_thread *t = &kp->th[thread];
	struct kp_iv *iv;

	if (t->niv)
		return 0;
	iv = tl_open(t, KP_ST_RUNNING, 0);
	if (!iv)
		return -ENOMEM;
	iv->cpu = (int16_t)cpu;
	return 0;
}

int kp__tl_exit(struct kp *kp, uint32_t host, const struct cp_hdr *h, uint64_t ts)
{
	const struct cp_ev_process_exit *e = (const void *)h;
	uint32_t ti = kp__thread_find(kp, host, (int32_t)h->tid);
	uint32_t pi = kp__proc_find(kp, host, (int32_t)h->pid);
	struct kp_iv *c;

	if (h->size >= sizeof(*e) && e->group_dead && pi != KP_NONE && !kp->pr[pi].exited) {
		int err;

		kp->pr[pi].exited = true;
		kp->npr_exited++;
		err = kp__conn_proc_exit(kp, pi, ts);
		if (err)
			return err;
	}
	if (ti == KP_NONE)
		return 0;
	c = tl_cur(&kp->th[ti]);
	if (c && c->state == KP_ST_DEAD)
		return 0;
	if (c && c->state == KP_ST_RUNNING) {
		/* still on its CPU: the switch-out (prev_state dead) ends it */
		kp->th[ti].exit_ts = ts;
		return 0;
	}
	return tl_open(&kp->th[ti], KP_ST_DEAD, ts) ? 0 : -ENOMEM;
}

void kp__tl_annotate(struct kp *kp, uint32_t thread, uint64_t enter, uint64_t exit, uint8_t reason,
		     uint64_t uaddr, uint32_t conn)
{
	struct kp_thread *t = &kp->th[thread];

	for (uint32_t k = t->niv; k > 0; k--) {
		struct kp_iv *iv = &t->iv[k - 1];

		if (iv->end != KP_OPEN && iv->end <= enter)
			break;
		if (iv->state != KP_ST_BLOCKED || iv->start >= exit)
			continue;
		if (iv->reason == KP_BR_NONE ||
		    (reason == KP_BR_FUTEX && iv->reason == KP_BR_DISK)) {
			iv->reason = reason;
			iv->uaddr = uaddr;
		}
		if (conn != KP_NONE && iv->conn == KP_NONE)
			iv->conn = conn;
	}
}

/* A poll wait ended by an untraced waker was for the bytes then read from
 * conn. */
void kp__tl_poll_source(struct kp *kp, uint32_t thread, uint64_t enter, uint32_t conn)
{
	struct kp_thread *t = &kp->th[thread];

	for (uint32_t k = t->niv; k > 0; k--) {
		struct kp_iv *iv = &t->iv[k - 1];

		if (iv->state != KP_ST_BLOCKED || iv->end == KP_OPEN || iv->end > enter)
			continue;
		if (iv->reason == KP_BR_POLL && iv->conn == KP_NONE &&
		    ((iv->wake == KP_WK_TASK && iv->waker == KP_NONE) || iv->wake == KP_WK_NET))
			iv->conn = conn;
		return;
	}
}

int64_t kp__tl_find(struct kp_thread *t, uint64_t ts)
{
	uint32_t n = t->niv, h, lo, hi, step = 1;

	if (!n)
		return -1;
	h = t->find_hint < n ? t->find_hint : n - 1;
	if (t->iv[h].end >= ts) { /* the first interval ending at or after ts is at or before h */
		hi = h;
		while (hi >= step && t->iv[hi - step].end >= ts) {
			hi -= step;
			step *= 2;
		}
		lo = hi >= step ? hi - step + 1 : 0;
	} else { /* after h */
		lo = h + 1;
		while (lo + step - 1 < n && t->iv[lo + step - 1].end < ts) {
			lo += step;
			step *= 2;
		}
		hi = lo + step - 1 < n ? lo + step - 1 : n;
	}
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (t->iv[mid].end < ts)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo >= n || t->iv[lo].start >= ts)
		return -1;
	t->find_hint = lo;
	return lo;
}

static uint32_t drop_before_last(const void *arr, uint32_t n, size_t elem, size_t off,
				 uint64_t before)
{
	const char *a;
	uint32_t drop = 0;

	if (n < 2) /* arr may be NULL: no arithmetic on it */
		return 0;
	a = (const char *)arr + off;
	while (drop + 1 < n && kp__key_at(a, elem, drop + 1) < before)
		drop++;
	return drop;
}

void kp__tl_prune(struct kp_thread *t, uint64_t before)
{
	uint32_t drop = 0, cdrop = 0;

	while (drop + 1 < t->niv && t->iv[drop].end < before)
		drop++;
	kp__win_drop((void **)&t->iv, &t->ivoff, &t->niv, drop, sizeof(*t->iv));
	kp__win_fit((void **)&t->iv, &t->ivoff, &t->capiv, t->niv, t->niv + drop, &t->ivpeak,
		    sizeof(*t->iv));
	t->find_hint = t->find_hint > drop ? t->find_hint - drop : 0;
	while (cdrop < t->ncul && t->cul[cdrop].ts + KP_DR_WINDOW_NS < before)
		cdrop++;
	kp__win_drop((void **)&t->cul, &t->culoff, &t->ncul, cdrop, sizeof(*t->cul));
	t->cul_base += cdrop;
	cdrop = drop_before_last(t->pev, t->npev, sizeof(*t->pev), offsetof(struct kp_probe_ev, ts),
				 before);
	kp__win_drop((void **)&t->pev, &t->pevoff, &t->npev, cdrop, sizeof(*t->pev));
	t->pev_base += cdrop;
	cdrop =
	    drop_before_last(t->ctx, t->nctx, sizeof(*t->ctx), offsetof(struct kp_ctx, ts), before);
	kp__win_drop((void **)&t->ctx, &t->ctxoff, &t->nctx, cdrop, sizeof(*t->ctx));
	t->ctx_hint = t->ctx_hint > cdrop ? t->ctx_hint - cdrop : 0;
}

static void pin_thread(struct kp *kp, uint32_t i)
{
	if (i != KP_NONE)
		kp->th[i].pinned = kp->pin_stamp;
}

/* What a walk can still reach an exited thread through: open requests and
 * connections' last writes. */
static void pin_referenced(struct kp *kp)
{
	if (!++kp->pin_stamp)
		kp->pin_stamp = 1; /* 0 is the stamp of a slot never pinned */
	for (uint32_t i = 0; i < kp->ncn; i++) {
		const struct kp_conn *c = &kp->cn[i];

		if (c->role == KP_ROLE_SERVER && c->phase != KP_PH_IDLE) {
			pin_thread(kp, c->req.reader);
			pin_thread(kp, c->req.writer);
		}
		for (uint32_t k = 0; k < c->nwr; k++)
			pin_thread(kp, c->wr[k].thread);
		if (c->proc != KP_NONE)
			kp->pr[c->proc].pinned = kp->pin_stamp;
	}
}

static void thread_recycle(struct kp *kp, uint32_t i)
{
	struct kp_thread *t = &kp->th[i];

	if (u64map__get(&kp->thmap, t->key) == i)
		u64map__del(&kp->thmap, t->key);
	kp__win_free((void **)&t->iv, &t->ivoff, sizeof(*t->iv));
	kp__win_free((void **)&t->cul, &t->culoff, sizeof(*t->cul));
	kp__win_free((void **)&t->pev, &t->pevoff, sizeof(*t->pev));
	kp__win_free((void **)&t->ctx, &t->ctxoff, sizeof(*t->ctx));
	free(t->bw.buf);
	if (kp->th_hint[(uint32_t)t->tid % KP_TH_HINTS] == i)
		kp->th_hint[(uint32_t)t->tid % KP_TH_HINTS] = KP_NONE;
	memset(t, 0, sizeof(*t));
	t->proc = KP_NONE;
	kp->freeth[kp->nfreeth++] = i;
	kp->threads_recycled++;
}

static void proc_recycle(struct kp *kp, uint32_t i)
{
	struct kp_proc *p = &kp->pr[i];
	uint64_t key = (uint64_t)p->host << 32 | (uint32_t)p->pid;

	if (u64map__get(&kp->prmap, key) == i)
		u64map__del(&kp->prmap, key);
	if (kp->pr_hint[(uint32_t)p->pid % KP_PR_HINTS] == i)
		kp->pr_hint[(uint32_t)p->pid % KP_PR_HINTS] = KP_NONE;
	free(p->listen);
	memset(p, 0, sizeof(*p));
	kp->freepr[kp->nfreepr++] = i;
	kp->npr_exited--;
	kp->procs_recycled++;
}

void kp__tl_recycle(struct kp *kp, uint64_t mark)
{
	uint64_t before = mark > KP_KEEP_NS ? mark - KP_KEEP_NS : 0;
	bool any = kp->npr_exited > 0;

	for (uint32_t i = 0; i < kp->nth && !any; i++) {
		const struct kp_thread *t = &kp->th[i];

		any = t->proc != KP_NONE && tl_exit_at(t) < before;
	}
	/* room for every slot to be free: recycling never fails half-way */
	if (!any || kp__grow((void **)&kp->freeth, &kp->capfreeth, kp->nth, sizeof(*kp->freeth)) ||
	    kp__grow((void **)&kp->freepr, &kp->capfreepr, kp->npr, sizeof(*kp->freepr)))
		return;
	pin_referenced(kp);
	for (uint32_t i = 0; i < kp->nth; i++) {
		const struct kp_thread *t = &kp->th[i];

		if (t->proc == KP_NONE)
			continue;
		if (tl_exit_at(t) < before && t->pinned != kp->pin_stamp)
			thread_recycle(kp, i);
		else
			kp->pr[t->proc].pinned = kp->pin_stamp;
	}
	for (uint32_t i = 0; i < kp->npr && kp->npr_exited; i++) {
		const struct kp_proc *p = &kp->pr[i];

		if (p->exited && p->pinned != kp->pin_stamp)
			proc_recycle(kp, i);
	}
}
