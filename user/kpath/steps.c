// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/*
 * What the walk's steps are called and who they cost: thread and process
 * names, a service's frames, the peer write behind a network wakeup, and
 * the off-path culprits of run-queue and lock time.
 */
#include <netinet/in.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "walk_int.h"

/* A new id for a string (a segment's frame3 or peer), or -1 (s NULL:
 * ENOMEM). */
int32_t kw__str_ref(struct kp *kp, const char *s)
{
	if (!s || kp__grow((void **)&kp->strs, &kp->capstrs, kp->nstrs + 1, sizeof(*kp->strs)))
		return -1;
	kp->strs[kp->nstrs] = s;
	return (int32_t)kp->nstrs++;
}

/* "a b", a cut to alen bytes, b to blen, the whole to KP_NAME_LEN - 1 (what
 * snprintf "%.<alen>s %.<blen>s" made), interned; NULL on ENOMEM */
const char *kw__join_interned(struct kp *kp, const char *a, size_t alen, const char *b,
				 size_t blen)
{
	size_t n = strnlen(a, alen), m = strnlen(b, blen);
	char o[KP_NAME_LEN];

	if (n > KP_NAME_LEN - 1)
		n = KP_NAME_LEN - 1;
	memcpy(o, a, n);
	if (n < KP_NAME_LEN - 1)
		o[n++] = ' ';
	if (m > KP_NAME_LEN - 1 - n)
		m = KP_NAME_LEN - 1 - n;
	memcpy(o + n, b, m);
	o[n + m] = '\0';
	return kp__intern(kp, o);
}

const char *kp__thread_comm(struct kp *kp, uint32_t thread)
{
	static const char unknown[CP_COMM_LEN] = "?";
	struct kp_thread *t = &kp->th[thread];
	const char *s = unknown;

	if (t->comm[0])
		s = t->comm;
	else if (t->tid == t->pid && kp->pr[t->proc].comm[0])
		s = kp->pr[t->proc].comm;
	/* every candidate is a CP_COMM_LEN array: compared whole, in two words */
	if (!t->icomm || memcmp(s, t->icomm_of, CP_COMM_LEN)) {
		t->icomm = kp__intern(kp, s);
		memcpy(t->icomm_of, s, CP_COMM_LEN);
	}
	return t->icomm;
}

const char *kp__proc_frame_service(struct kp *kp, uint32_t proc)
{
	struct kp_proc *p = &kp->pr[proc];
	const char *comm = p->comm;
	/* one name for a tier, as its own requests have it */
	int32_t port = p->nlisten ? p->listen[0] : p->serves_unix ? KP_PORT_UNIX : 0;

	if (!comm[0]) {
		uint32_t ti = kp__thread_find(kp, p->host, p->pid);

		/* its main thread, not one of a process that took the pid since */
		comm = ti != KP_NONE && kp->th[ti].proc == proc ? kp->th[ti].comm : "";
	}
	/* comm is a CP_COMM_LEN array or "" */
	if (p->svc_ok && p->svc_port == port &&
	    (comm[0] ? !memcmp(p->svc_comm, comm, CP_COMM_LEN) : !p->svc_comm[0]))
		return p->isvc;
	kp__proc_service(kp, proc, port == KP_PORT_UNIX ? KP_PORT_UNIX : 0, p->svc, sizeof(p->svc));
	p->isvc = kp__intern(kp, p->svc);
	memset(p->svc_comm, 0, sizeof(p->svc_comm));
	if (comm[0])
		memcpy(p->svc_comm, comm, CP_COMM_LEN);
	p->svc_port = port;
	p->svc_ok = p->isvc != NULL;
	return p->isvc;
}

void kp__proc_service(const struct kp *kp, uint32_t proc, int32_t port, char *buf, size_t len)
{
	const struct kp_proc *p = &kp->pr[proc];
	const char *comm = p->comm;

	if (!comm[0]) {
		uint32_t ti = kp__thread_find(kp, p->host, p->pid);

		comm = ti != KP_NONE && kp->th[ti].proc == proc && kp->th[ti].comm[0]
			   ? kp->th[ti].comm
			   : NULL;
	}
	if (port == KP_PORT_UNIX) {
		if (comm)
			snprintf(buf, len, "%s:unix", comm);
		else
			snprintf(buf, len, "pid%d:unix", p->pid);
		return;
	}
	if (!port && p->nlisten)
		port = p->listen[0];
	if (comm && port)
		snprintf(buf, len, "%s:%u", comm, port);
	else if (comm)
		snprintf(buf, len, "%s", comm);
	else if (port)
		snprintf(buf, len, "pid%d:%u", p->pid, port);
	else
		snprintf(buf, len, "pid%d", p->pid);
}

/* The peer's write whose bytes ended thread's block on conn at ts. */
const struct kp_write *kw__net_source(struct kp *kp, uint32_t conn, uint64_t ts)
{
	uint32_t peer, rcv = 0;
	bool have;

	if (conn == KP_NONE)
		return NULL;
	peer = kp__conn_peer(kp, conn);
	if (peer == KP_NONE)
		return NULL;
	if (kp->cn[conn].a.proto == IPPROTO_UDP)
		return kp__conn_dgram_for(&kp->cn[peer], ts,
					  kp->cn[peer].host == kp->cn[conn].host);
	have = kp__conn_dready_at(&kp->cn[conn], ts, &rcv);
	return kp__conn_write_for(&kp->cn[peer], ts, rcv, have);
}

int kw__cul_add(struct kp *kp, int32_t pid, int32_t tid, const char *comm, uint64_t ns)
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

/* The third frame of segments outside the serving process: the peer's
 * service (and the call made to it). A new id on every use; the string is
 * made once for a run of uses alike. */
int32_t kw__proc_frame(struct walk *w, uint32_t thread)
{
	struct kp *kp = w->kp;
	uint32_t proc = kp->th[thread].proc;

	if (proc == w->proc)
		return -1;
	if (proc != w->f3_proc || w->call != w->f3_call) {
		const char *svc = kp__proc_frame_service(kp, proc);

		/* with a call: what snprintf(" %s") after the service made,
		 * kept in the process while its calls repeat */
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

int32_t kw__conn_peer_str(struct kp *kp, uint32_t conn)
{
	if (conn == KP_NONE)
		return -1;
	/* name the server end of the hop: the downstream, whichever side we are on */
	return kw__str_ref(kp, kp__conn_addr(&kp->cn[conn], kp->cn[conn].role == KP_ROLE_SERVER));
}

uint8_t kw__block_category(const struct kp_iv *iv)
{
	if (iv->reason == KP_BR_DISK || iv->wake == KP_WK_DISK)
		return CP_CAT_DISK;
	if (iv->wake == KP_WK_TIMER)
		return CP_CAT_SLEEP;
	if (iv->wake == KP_WK_NET)
		return CP_CAT_NETWORK;
	return CP_CAT_UNEXPLAINED;
}

/* A culprit record's comm, interned */
static const char *culprit_comm(struct kp *kp, struct kp_culprit *c)
{
	typeof(&kp->culprit_comms[0]) m =
	    &kp->culprit_comms[((uint32_t)c->tid * 0x9e3779b1u) >> 26];

	_Static_assert(sizeof(kp->culprit_comms) / sizeof(kp->culprit_comms[0]) == 64, "6 bits");
	if (!c->icomm) {
		if (!m->icomm || memcmp(m->comm, c->comm, CP_COMM_LEN)) {
			m->icomm = kp__intern(kp, c->comm);
			memcpy(m->comm, c->comm, CP_COMM_LEN);
		}
		c->icomm = m->icomm;
	}
	return c->icomm;
}

/* The k-th culprit of a run-queue interval, or NULL when the timeline has
 * already pruned it. */
static struct kp_culprit *iv_culprit(const struct kp_thread *th, const struct kp_iv *iv, uint32_t k)
{
	uint64_t abs = (uint64_t)iv->cul_first + k;

	if (abs < th->cul_base || abs >= th->cul_base + th->ncul)
		return NULL;
	return &th->cul[abs - th->cul_base];
}

/* Did a task of neither the waiting thread's process nor the serving
 * process hold the CPU during this run-queue wait? */
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

/* ns * part / whole in doubles, as it always was; a segment covering the
 * whole wait skips the division (a tenth of the walk's time): ns * whole /
 * whole is ns exactly while ns * whole fits a double's 53-bit mantissa. */
static inline uint64_t cul_share(uint64_t ns, uint64_t part, uint64_t whole)
{
	uint64_t p;

	if (!whole)
		return ns;
	if (part == whole && !__builtin_mul_overflow(ns, whole, &p) && p <= 1ull << 53)
		return ns;
	return (uint64_t)((double)ns * (double)part / (double)whole);
}

int kw__runqueue_seg(struct walk *w, uint32_t thread, const struct kp_iv *iv, uint64_t a,
			uint64_t t, bool interf, bool queued)
{
	struct kp *kp = w->kp;
	struct kp_thread *th = &kp->th[thread];
	uint64_t dur = iv->end - iv->start;
	int err;

	/* DESIGN: the serving thread owns what it *ran* after the start; while
	 * it waited for a CPU the culprits ran, so that wait is interference.
	 * Another thread's activation begun by an owned wakeup is the
	 * request's own, but not the time a task from outside took its CPU
	 * (a hog, another service): that is interference there too. Its own
	 * process's and the serving process's threads do not count: they are
	 * the request's hand-offs (a waker finishing its slice) or its peers. */
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

