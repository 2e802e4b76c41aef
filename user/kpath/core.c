// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/* The kernel-path core: records in, requests out; dispatch, finishing,
 * pruning. */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"
#include "kpath_internal.h"

#define KP_PRUNE_EVERY 65536u

int kp__grow_to(void **arr, uint32_t *cap, uint32_t need, size_t elem)
{
	return grow_array(arr, cap, need, elem, 8);
}

int kp__win_more(void **arr, uint32_t *off, uint32_t *cap, uint32_t n, size_t elem)
{
	char *base = *arr ? (char *)*arr - (size_t)*off * elem : NULL;
	int err;

	if (*off + n < *cap)
		return 0;
	if (*off && *off >= n) {
		memmove(base, *arr, (size_t)n * elem);
		*arr = base;
		*off = 0;
		return 0;
	}
	err = kp__grow_to((void **)&base, cap, *off + n + 1, elem);
	if (err)
		return err;
	*arr = base + (size_t)*off * elem;
	return 0;
}

void kp__win_drop(void **arr, uint32_t *off, uint32_t *n, uint32_t drop, size_t elem)
{
	if (!drop)
		return;
	*arr = (char *)*arr + (size_t)drop * elem;
	*off += drop;
	*n -= drop;
}

/* A window grown for a busy stretch and now mostly empty (an idle
 * connection or thread) gives its memory back. used: its size before this
 * prune's drop. Judged by peak, the most held lately (decaying by an eighth
 * a prune), not by what a prune left: a busy window refills between prunes,
 * and shrinking it each time made it grow again (fresh pages faulted in). */
void kp__win_fit(void **arr, uint32_t *off, uint32_t *cap, uint32_t n, uint32_t used,
		 uint32_t *peak, size_t elem)
{
	uint32_t want;
	char *nb;

	*peak -= *peak / 8;
	if (used > *peak)
		*peak = used;
	want = *peak * 2 > 64 ? *peak * 2 : 64;
	if ((size_t)*cap * elem < (64u << 10) || (uint64_t)*peak * 8 >= *cap)
		return;
	nb = malloc((size_t)want * elem);
	if (!nb)
		return; /* keeps the big one */
	memcpy(nb, *arr, (size_t)n * elem);
	free((char *)*arr - (size_t)*off * elem);
	*arr = nb;
	*off = 0;
	*cap = want;
}

void kp__win_free(void **arr, uint32_t *off, size_t elem)
{
	if (*arr)
		free((char *)*arr - (size_t)*off * elem);
	*arr = NULL;
	*off = 0;
}

int kp__init(struct kp *kp, kp_emit_fn emit, void *arg)
{
	memset(kp, 0, sizeof(*kp));
	kp->emit = emit;
	kp->emit_arg = arg;
	return 0;
}

void kp__set_intern(struct kp *kp, kp_intern_fn fn, void *arg)
{
	kp->intern = fn;
	kp->intern_arg = arg;
}

const char *kp__intern(struct kp *kp, const char *s)
{
	if (kp->intern)
		return kp->intern(kp->intern_arg, s);
	if (!kp->own_intern && !(kp->own_intern = intern__new()))
		return NULL;
	return intern__get(kp->own_intern, s);
}

static const char *intern_bounded(struct kp *kp, struct u64map *seen, const char *s)
{
	uint64_t h;

	if (!kp->max_names || !s)
		return kp__intern(kp, s);
	h = hash__cstr(s) | 1;
	if (u64map__get(seen, h) == U64MAP_NONE &&
	    (seen->n >= kp->max_names || u64map__put(seen, h, 0)))
		return kp->other_names = kp__intern(kp, CP_OTHER_NAMES);
	return kp__intern(kp, s);
}

const char *kp__intern_name(struct kp *kp, const char *s)
{
	return intern_bounded(kp, &kp->names, s);
}

const char *kp__intern_comm(struct kp *kp, const char *s)
{
	return intern_bounded(kp, &kp->comms, s);
}

void kp__free(struct kp *kp)
{
	for (uint32_t i = 0; i < kp->nth; i++) {
		struct kp_thread *t = &kp->th[i];

		kp__win_free((void **)&t->iv, &t->ivoff, sizeof(*t->iv));
		kp__win_free((void **)&t->cul, &t->culoff, sizeof(*t->cul));
		kp__win_free((void **)&t->pev, &t->pevoff, sizeof(*t->pev));
		kp__win_free((void **)&t->ctx, &t->ctxoff, sizeof(*t->ctx));
		free(t->bw.buf);
	}
	free(kp->probes);
	u64map__free(&kp->probemap);
	for (uint32_t i = 0; i < kp->npr; i++)
		free(kp->pr[i].listen);
	for (uint32_t i = 0; i < kp->ncn; i++) {
		struct kp_conn *c = &kp->cn[i];

		kp__win_free((void **)&c->wr, &c->wroff, sizeof(*c->wr));
		kp__win_free((void **)&c->dr, &c->droff, sizeof(*c->dr));
		free(c->runs);
		free(c->bw.buf);
		free(c->dq);
		kp__h2_free(c);
	}
	kp__pend_free(kp);
	free(kp->th);
	free(kp->pr);
	free(kp->cn);
	free(kp->closed);
	free(kp->freecn);
	free(kp->guessed);
	free(kp->freeth);
	free(kp->freepr);
	free(kp->src);
	free(kp->host_src);
	free(kp->host_nsrc);
	free(kp->loss);
	free(kp->lastdr);
	for (uint32_t i = 0; i < kp->nuq; i++)
		kp__win_free((void **)&kp->uq[i].e, &kp->uq[i].off, sizeof(*kp->uq[i].e));
	free(kp->uq);
	u64map__free(&kp->uqmap);
	u64map__free(&kp->uportmap);
	free(kp->ws);
	free(kp->culs);
	free(kp->strs);
	free(kp->own);
	free(kp->wcalls);
	intern__free(kp->own_intern);
	u64map__free(&kp->names);
	u64map__free(&kp->comms);
	u64map__free(&kp->thmap);
	u64map__free(&kp->prmap);
	u64map__free(&kp->cnmap);
	u64map__free(&kp->repmap);
	u64map__free(&kp->lepmap);
	u64map__free(&kp->fdmap);
	u64map__free(&kp->tlsmap);
	memset(kp, 0, sizeof(*kp));
}

int kp__add_source(struct kp *kp, const char *host_key, int64_t delta, const char *host_name,
		   const char *sku, uint32_t ncpus, const char *const *cpu_model)
{
	uint32_t cap = kp->nsrc, host = 0;
	struct kp_source *s;

	for (uint32_t i = 0; i < kp->nsrc; i++) {
		if (kp->src[i].host >= host)
			host = kp->src[i].host + 1;
	}
	for (uint32_t i = 0; i < kp->nsrc; i++) {
		if (host_key && !strncmp(kp->src[i].key, host_key, sizeof(kp->src[i].key) - 1)) {
			host = kp->src[i].host;
			break;
		}
	}
	if (kp__grow((void **)&kp->src, &cap, kp->nsrc + 1, sizeof(*kp->src)))
		return -ENOMEM;
	if (host)
		kp->multi_host = true;
	if (host >= kp->caphosts) {
		uint32_t cap = kp->caphosts;

		if (kp__grow((void **)&kp->host_nsrc, &cap, host + 1, sizeof(*kp->host_nsrc)))
			return -ENOMEM;
		cap = kp->caphosts;
		if (kp__grow((void **)&kp->host_src, &cap, host + 1, sizeof(*kp->host_src)))
			return -ENOMEM;
		memset(kp->host_nsrc + kp->caphosts, 0,
		       (cap - kp->caphosts) * sizeof(*kp->host_nsrc));
		kp->caphosts = cap;
	}
	if (!kp->host_nsrc[host]++)
		kp->host_src[host] = kp->nsrc;
	s = &kp->src[kp->nsrc];
	memset(s, 0, sizeof(*s));
	snprintf(s->key, sizeof(s->key), "%s", host_key ? host_key : "");
	s->host = host;
	s->delta = delta;
	s->host_name = host_name;
	s->sku = sku;
	s->ncpus = ncpus;
	s->cpu_model = cpu_model;
	return (int)kp->nsrc++;
}



/* host's first source (kp->host_src), or NULL */
static const struct kp_source *first_source(const struct kp *kp, uint32_t host)
{
	return host < kp->caphosts && kp->host_nsrc[host] ? &kp->src[kp->host_src[host]] : NULL;
}

const char *kp__host_name(const struct kp *kp, uint32_t host)
{
	const struct kp_source *s = first_source(kp, host);

	return s ? s->host_name : NULL;
}

uint64_t kp__host_uncertainty(const struct kp *kp, uint32_t host)
{
	const struct kp_source *s = first_source(kp, host);

	return s ? s->clock_unc : 0;
}

static int kp_prune(struct kp *kp)
{
	uint64_t mark = kp->now > KP_KEEP_NS ? kp->now - KP_KEEP_NS : 0;
	int err;

	for (uint32_t i = 0; i < kp->ncn; i++) {
		struct kp_conn *c = &kp->cn[i];

		if (c->h2 && c->role == KP_ROLE_SERVER) {
			err = kp__h2_prune(kp, i, &mark);
			if (err)
				return err;
			c = &kp->cn[i];
		}
		if (c->role != KP_ROLE_SERVER || c->phase == KP_PH_IDLE)
			continue;
		if (c->phase == KP_PH_WRITING && c->req.end + KP_IDLE_FINISH_NS < kp->now) {
			err = kp__conn_finish_req(kp, i);
			if (err)
				return err;
			continue;
		}
		/* an open request holds state back, but not past KP_HOLD_MAX_NS */
		if (c->req.start < mark && c->req.start + KP_HOLD_MAX_NS > kp->now)
			mark = c->req.start;
	}
	if (!mark)
		return 0;
	for (uint32_t i = 0; i < kp->nth; i++)
		kp__tl_prune(&kp->th[i], mark);
	for (uint32_t i = 0; i < kp->ncn; i++)
		kp__conn_prune(&kp->cn[i], mark);
	kp__conn_recycle(kp, mark);
	kp__tl_recycle(kp, mark);
	return 0;
}

static void set_comm(char *dst, const char *src)
{
	memcpy(dst, src, CP_COMM_LEN);
	dst[CP_COMM_LEN - 1] = '\0';
}

static int md_process(struct kp *kp, uint32_t host, const struct cp_md_process *m)
{
	uint32_t p = kp__proc(kp, host, (int32_t)m->h.pid);

	if (p == KP_NONE)
		return -ENOMEM;
	set_comm(kp->pr[p].comm, m->comm);
	kp->pr[p].comm_from_md = true;
	return 0;
}

static int md_hook(struct kp *kp, uint32_t host, const struct cp_md_hook *m, uint64_t ts)
{
	uint32_t p;

	if (strncmp(m->name, "tls pid ", 8) || !m->h.pid)
		return 0;
	if (m->status == CP_HOOK_UNAVAILABLE && !kp->tls_uncaptured++) {
		static const char said[] = "no TLS plaintext: "; /* record/tls.c's */
		const char *why = m->detail;
		size_t n = strnlen(why, sizeof(m->detail));

		if (n > sizeof(said) - 1 && !strncmp(why, said, sizeof(said) - 1)) {
			why += sizeof(said) - 1;
			n -= sizeof(said) - 1;
		}
		snprintf(kp->tls_uncaptured_why, sizeof(kp->tls_uncaptured_why), "pid %u: %.*s",
			 m->h.pid, (int)n, why);
	}
	if (m->status != CP_HOOK_ATTACHED)
		return 0;
	p = kp__proc(kp, host, (int32_t)m->h.pid);
	if (p == KP_NONE)
		return -ENOMEM;
	if (!kp->pr[p].tls_since)
		kp->pr[p].tls_since = ts ? ts : 1;
	return 0;
}

static int md_socket(struct kp *kp, uint32_t host, const struct cp_md_socket *m)
{
	uint32_t p = kp__proc(kp, host, (int32_t)m->h.pid);

	if (p == KP_NONE)
		return -ENOMEM;
	if (m->listening)
		return kp__proc_listen(kp, p, m->lport);
	return 0;
}

static int on_fork(struct kp *kp, uint32_t host, const struct cp_ev_process_fork *e)
{
	uint32_t t;

	if (kp__proc_find(kp, host, (int32_t)e->parent_pid) == KP_NONE)
		return 0;
	t = kp__thread_born(kp, host, (int32_t)e->child_pid, (int32_t)e->child_tid);
	if (t == KP_NONE)
		return -ENOMEM;
	set_comm(kp->th[t].comm, e->child_comm);
	return 0;
}

static int on_exec(struct kp *kp, uint32_t host, const struct cp_ev_process_exec *e)
{
	uint32_t t = kp__thread_find(kp, host, (int32_t)e->h.tid);
	const char *base, *fn = e->filename;
	size_t max = e->h.size > offsetof(struct cp_ev_process_exec, filename)
			 ? e->h.size - offsetof(struct cp_ev_process_exec, filename)
			 : 0;
	char comm[CP_COMM_LEN] = "";

	if (t == KP_NONE || !max)
		return 0;
	base = memrchr(fn, '/', strnlen(fn, max));
	base = base ? base + 1 : fn;
	snprintf(comm, sizeof(comm), "%.*s", (int)strnlen(base, max - (size_t)(base - fn)), base);
	memcpy(kp->th[t].comm, comm, CP_COMM_LEN);
	if (kp->th[t].tid == kp->th[t].pid && !kp->pr[kp->th[t].proc].comm_from_md)
		memcpy(kp->pr[kp->th[t].proc].comm, comm, CP_COMM_LEN);
	return 0;
}

static int on_syscall_block(struct kp *kp, uint32_t host, const struct cp_hdr *h, uint64_t enter,
			    uint64_t ts, uint8_t reason, uint64_t uaddr)
{
	uint32_t t = kp__thread(kp, host, (int32_t)h->pid, (int32_t)h->tid);

	if (t == KP_NONE || kp__tl_seen_running(kp, t, h->cpu))
		return -ENOMEM;
	kp__tl_annotate(kp, t, enter, ts, reason, uaddr, KP_NONE);
	return 0;
}

#define NEED(type)                                                                                 \
	do {                                                                                       \
		if (rec->size < sizeof(type))                                                      \
			return 0;                                                                  \
	} while (0)

static int dispatch(struct kp *kp, uint32_t si, const struct cp_hdr *rec, uint64_t ts)
{
	const struct kp_source *src = &kp->src[si];
	uint32_t host = src->host;

	switch (rec->type) {
	case CP_EV_SCHED_SWITCH:
		NEED(struct cp_ev_sched_switch);
		return kp__tl_switch(kp, host, (const struct cp_ev_sched_switch *)rec, ts);
	case CP_EV_SCHED_WAKING: {
		const struct cp_ev_sched_waking *e = (const void *)rec;

		NEED(struct cp_ev_sched_waking);
		if (kp__proc(kp, host, (int32_t)e->wakee_pid) == KP_NONE)
			return -ENOMEM;
		return kp__tl_waking(kp, host, e, ts);
	}
	case CP_EV_WAKEUP_NEW: {
		const struct cp_ev_wakeup_new *e = (const void *)rec;

		NEED(struct cp_ev_wakeup_new);
		if (kp__proc(kp, host, (int32_t)e->pid) == KP_NONE)
			return -ENOMEM;
		return kp__tl_new(kp, host, e, ts);
	}
	case CP_EV_PROCESS_FORK:
		NEED(struct cp_ev_process_fork);
		return on_fork(kp, host, (const void *)rec);
	case CP_EV_PROCESS_EXEC:
		if (rec->size <= offsetof(struct cp_ev_process_exec, filename))
			return 0;
		return on_exec(kp, host, (const void *)rec);
	case CP_EV_PROCESS_EXIT:
		return kp__tl_exit(kp, host, rec, ts);
	case CP_EV_FUTEX: {
		const struct cp_ev_futex *e = (const void *)rec;

		NEED(struct cp_ev_futex);
		if (e->phase != CP_PHASE_EXIT && e->phase != CP_PHASE_BLOCKED)
			return 0;
		return on_syscall_block(kp, host, rec, e->enter_ts + (uint64_t)src->delta, ts,
					KP_BR_FUTEX, e->uaddr);
	}
	case CP_EV_POLL: {
		const struct cp_ev_poll *e = (const void *)rec;
		int err;

		NEED(struct cp_ev_poll);
		if (e->phase != CP_PHASE_EXIT && e->phase != CP_PHASE_BLOCKED)
			return 0;
		err = on_syscall_block(kp, host, rec, e->enter_ts + (uint64_t)src->delta, ts,
				       KP_BR_POLL, 0);
		if (!err) {
			/* an event loop's wait belongs to nobody's request */
			uint32_t ti = kp__thread(kp, host, (int32_t)rec->pid, (int32_t)rec->tid);

			if (ti == KP_NONE)
				return -ENOMEM;
			err = kp__tl_idle(kp, ti, e->enter_ts + (uint64_t)src->delta);
			if (!err && e->phase == CP_PHASE_EXIT)
				err = kp__tl_call(kp, ti, ts, KP_NONE, KP_NONE);
		}
		return err;
	}
	case CP_EV_SOCK: {
		const struct cp_ev_sock *e = (const void *)rec;
		size_t room = rec->size - offsetof(struct cp_ev_sock, payload);
		struct cp_ev_sock copy;

		if (rec->size < offsetof(struct cp_ev_sock, payload))
			return 0;
		if (e->payload_len > room) {
			/* a record shorter than its payload_len says: use what is there */
			memcpy(&copy, e, rec->size);
			copy.payload_len = (uint16_t)room;
			e = &copy;
		}
		return kp__conn_sock(kp, si, e, ts, e->enter_ts + (uint64_t)src->delta);
	}
	case CP_EV_TLS_READ: {
		const struct cp_ev_tls_read *e = (const void *)rec;
		size_t room = rec->size - offsetof(struct cp_ev_tls_read, payload);
		struct cp_ev_tls_read copy;

		if (rec->size < offsetof(struct cp_ev_tls_read, payload))
			return 0;
		if (e->payload_len > room) {
			/* as for CP_EV_SOCK: use what is there */
			memcpy(&copy, e, rec->size);
			copy.payload_len = (uint16_t)room;
			e = &copy;
		}
		return kp__conn_tls_read(kp, host, e, ts);
	}
	case CP_EV_SK_DATA_READY:
		NEED(struct cp_ev_sk_data_ready);
		return kp__conn_dready(kp, host, (const void *)rec, ts);
	case CP_EV_RUNQ_CULPRIT:
		NEED(struct cp_ev_runq_culprit);
		return kp__tl_culprit(kp, host, (const void *)rec, ts);
	case CP_EV_UPROBE:
		NEED(struct cp_ev_uprobe);
		return kp__tl_probe(kp, host, (const void *)rec, ts);
	case CP_MD_PROBE:
		NEED(struct cp_md_probe);
		return kp__tl_probe_def(kp, host, (const void *)rec);
	case CP_MD_PROCESS:
		NEED(struct cp_md_process);
		return md_process(kp, host, (const void *)rec);
	case CP_MD_HOOK:
		NEED(struct cp_md_hook);
		return md_hook(kp, host, (const void *)rec, ts);
	case CP_MD_THREAD: {
		const struct cp_md_thread *m = (const void *)rec;
		uint32_t t;

		NEED(struct cp_md_thread);
		t = kp__thread(kp, host, (int32_t)m->h.pid, (int32_t)m->h.tid);
		if (t == KP_NONE)
			return -ENOMEM;
		set_comm(kp->th[t].comm, m->comm);
		return 0;
	}
	case CP_MD_SOCKET:
		NEED(struct cp_md_socket);
		return md_socket(kp, host, (const void *)rec);
	case CP_MD_LOSS: {
		const struct cp_md_loss *m = (const void *)rec;

		NEED(struct cp_md_loss);
		return kp__loss_add(kp, host, m->start_ns + (uint64_t)src->delta,
				    m->end_ns + (uint64_t)src->delta);
	}
	default:
		return 0; /* block, hooks, and types added later */
	}
}

int kp__add_record(struct kp *kp, uint32_t src, const struct cp_hdr *rec)
{
	uint64_t ts;
	int err;

	if (src >= kp->nsrc || rec->size < sizeof(*rec))
		return -EINVAL;
	ts = rec->ts + (uint64_t)kp->src[src].delta;
	if (rec->type < CP_MD_PROCESS) {
		if (ts > kp->now)
			kp->now = ts;
		if (!kp->src[src].first_ts)
			kp->src[src].first_ts = ts;
	}
	err = dispatch(kp, src, rec, ts);
	if (err)
		return err;
	/* queued requests go out once their wait is over */
	if (kp->pend_head < kp->npend &&
	    (kp->no_loss_wait || kp->pend[kp->pend_head].req->end_ns + KP_LOSS_LAG_NS <= kp->now ||
	     kp->pend_bytes > KP_PEND_MAX_BYTES))
		kp__pend_flush(kp, kp->no_loss_wait);
	if (kp->err)
		return kp->err;
	kp->records++;
	if (++kp->since_prune >= KP_PRUNE_EVERY || kp->now >= kp->pruned_at + KP_KEEP_NS) {
		kp->since_prune = 0;
		kp->pruned_at = kp->now;
		return kp_prune(kp);
	}
	return 0;
}

int kp__advance(struct kp *kp, uint32_t src, uint64_t ts)
{
	if (src >= kp->nsrc)
		return -EINVAL;
	ts += (uint64_t)kp->src[src].delta;
	if (ts > kp->now)
		kp->now = ts;
	if (kp->pend_head < kp->npend &&
	    (kp->no_loss_wait || kp->pend[kp->pend_head].req->end_ns + KP_LOSS_LAG_NS <= kp->now))
		kp__pend_flush(kp, kp->no_loss_wait);
	if (kp->err)
		return kp->err;
	if (kp->now >= kp->pruned_at + KP_ADVANCE_PRUNE_NS) {
		kp->since_prune = 0;
		kp->pruned_at = kp->now;
		return kp_prune(kp);
	}
	return 0;
}

int kp__finish(struct kp *kp)
{
	for (uint32_t i = 0; i < kp->ncn; i++) {
		int err = kp__conn_finish_open(kp, i);

		if (err)
			return err;
	}
	kp__pend_flush(kp, true);
	return kp->err;
}
