// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/*
 * Requests out of the kernel path: the walk's segments become a struct
 * cp_request, which waits KP_LOSS_LAG_NS of stream time before it goes to
 * the emit callback, so a loss window the recorder writes after the fact
 * (it notices drops ~100 ms late, and the record sits at that time in the
 * stream) still marks the requests it overlaps partial (DESIGN.md sections
 * 6 and 8: nothing lost without saying so).
 *
 * Pipelined requests (several in one read, kpath_conn.c) share one walk:
 * they go out one by one, each with its own name and id, all with the
 * read-then-write exchange's start, end and critical path.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "kpath_internal.h"

static const struct kp_source *host_source(const struct kp *kp, uint32_t host)
{
	for (uint32_t i = 0; i < kp->nsrc; i++)
		if (kp->src[i].host == host)
			return &kp->src[i];
	return NULL;
}

/* kp->loss stays sorted by end; windows of one host tile its time, so a
 * new one almost always goes last. */
int kp__loss_add(struct kp *kp, uint32_t host, uint64_t start, uint64_t end)
{
	uint32_t i;

	if (end < start)
		end = start;
	if (kp__grow((void **)&kp->loss, &kp->caploss, kp->nloss + 1, sizeof(*kp->loss)))
		return -ENOMEM;
	for (i = kp->nloss; i > 0 && kp->loss[i - 1].end > end; i--)
		;
	memmove(&kp->loss[i + 1], &kp->loss[i], (kp->nloss - i) * sizeof(*kp->loss));
	kp->loss[i].host = host;
	kp->loss[i].start = start;
	kp->loss[i].end = end;
	kp->nloss++;
	if (end - start > kp->loss_maxlen)
		kp->loss_maxlen = end - start;
	if (kp->pend_early)
		kp->loss_after_early = true;
	return 0;
}

static bool overlaps_loss(const struct kp *kp, uint32_t host, uint64_t a, uint64_t b)
{
	uint32_t lo = 0, hi = kp->nloss;

	/* the first window ending at or after a */
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (kp->loss[mid].end < a)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (uint32_t i = lo; i < kp->nloss; i++) {
		const struct kp_loss *l = &kp->loss[i];

		/* sorted by end: past b + the longest window, none can start <= b */
		if (l->end > b && l->end - b > kp->loss_maxlen)
			break;
		if (l->host == host && l->start <= b)
			return true;
	}
	return false;
}

/* "pid:conn:n" without printf: it is written for every request */
static void put_u(char **o, uint64_t v)
{
	char t[24];
	int n = 0;

	do
		t[n++] = (char)('0' + v % 10);
	while (v /= 10);
	while (n)
		*(*o)++ = t[--n];
}

static void req_id(char *buf, int32_t pid, uint32_t conn, uint32_t n)
{
	char *o = buf;

	if (pid < 0) {
		*o++ = '-';
		put_u(&o, (uint64_t) - (int64_t)pid);
	} else {
		put_u(&o, (uint64_t)pid);
	}
	*o++ = ':';
	put_u(&o, conn);
	*o++ = ':';
	put_u(&o, n);
	*o = '\0';
}

static void pend_free(struct kp_pend *p)
{
	free(p->req);
	free(p->runs);
	memset(p, 0, sizeof(*p));
}

/* Sends one waiting request (all of a pipelined read's) to the callback. */
static int pend_send(struct kp *kp, struct kp_pend *p)
{
	struct cp_request *r = p->req;
	const char *tags0 = NULL;
	const char *const *tags = r->tags;
	uint32_t nreq = p->nreq, runs = p->runs ? p->nruns : 1;
	char id[64];
	int err = 0;

	r->partial = overlaps_loss(kp, p->host, r->start_ns, r->end_ns);
	r->id = id;
	for (uint32_t k = 0; k < runs && !err; k++) {
		const char *name = p->runs ? p->runs[k].name : r->name;
		uint32_t n = p->runs ? p->runs[k].count : 1;

		/* every segment's second frame is the request's name */
		for (uint32_t i = 0; i < r->nsegs; i++)
			if (r->segs[i].nframes > 1)
				((const char **)r->segs[i].frames)[1] = name;
		r->name = name;
		for (uint32_t j = 0; j < n && !err; j++) {
			req_id(id, p->pid, p->conn, nreq++);
			kp->requests_out++;
			kp->requests_partial += r->partial;
			err = kp->emit ? kp->emit(kp->emit_arg, r) : 0;
			/* the response's status is the first request's */
			r->tags = &tags0;
		}
	}
	r->tags = tags;
	return err;
}

/* Sends the requests whose wait is over (all of them with all), oldest
 * first; early ones too while more than KP_PEND_MAX_BYTES wait. */
int kp__pend_flush(struct kp *kp, bool all)
{
	int err = 0;

	while (kp->pend_head < kp->npend) {
		struct kp_pend *p = &kp->pend[kp->pend_head];
		bool due = p->req->end_ns + KP_LOSS_LAG_NS <= kp->now;

		if (!all && !due && kp->pend_bytes <= KP_PEND_MAX_BYTES)
			break;
		if (!all && !due)
			kp->pend_early++;
		if (!err)
			err = pend_send(kp, p);
		kp->pend_bytes -= p->bytes;
		pend_free(p);
		kp->pend_head++;
	}
	if (kp->pend_head == kp->npend) {
		kp->pend_head = kp->npend = 0;
	} else if (kp->pend_head >= 1024 && kp->pend_head * 2 >= kp->npend) {
		memmove(kp->pend, kp->pend + kp->pend_head,
			(kp->npend - kp->pend_head) * sizeof(*kp->pend));
		kp->npend -= kp->pend_head;
		kp->pend_head = 0;
	}
	if (err && !kp->err)
		kp->err = err;
	return err;
}

void kp__pend_free(struct kp *kp)
{
	for (uint32_t i = kp->pend_head; i < kp->npend; i++)
		pend_free(&kp->pend[i]);
	free(kp->pend);
	kp->pend = NULL;
	kp->pend_head = kp->npend = kp->cappend = 0;
	kp->pend_bytes = 0;
}

/*
 * A deep copy of a kernel-path request in one block, strings included: the
 * same pointer repeats across segments (service, name, comm, cpu model), so
 * a small cache keyed by pointer copies each once. Two passes, sizing then
 * copying, see the same pointers in the same order and so agree on what the
 * cache holds. Cheaper than interning (no hashing of contents).
 */
#define PC_SLOTS 16

struct pcache {
	const char *src[PC_SLOTS];
	char *dst[PC_SLOTS];
};

static size_t al8(size_t n)
{
	return (n + 7) & ~(size_t)7;
}

static uint32_t pc_slot(const char *s)
{
	uintptr_t x = (uintptr_t)s;

	return (uint32_t)((x >> 3) ^ (x >> 9)) & (PC_SLOTS - 1);
}

/* Sizing pass: bytes a string adds (0 when cached). */
static size_t pc_size(struct pcache *c, const char *s)
{
	uint32_t j;

	if (!s)
		return 0;
	j = pc_slot(s);
	if (c->src[j] == s)
		return 0;
	c->src[j] = s;
	return strlen(s) + 1;
}

static const char *pc_copy(struct pcache *c, char **p, const char *s)
{
	uint32_t j;
	size_t n;

	if (!s)
		return NULL;
	j = pc_slot(s);
	if (c->src[j] == s)
		return c->dst[j];
	n = strlen(s) + 1;
	memcpy(*p, s, n);
	c->src[j] = s;
	c->dst[j] = *p;
	*p += n;
	return c->dst[j];
}

static size_t req_size(const struct cp_request *r, uint32_t ntags)
{
	struct pcache c = {0};
	size_t sz =
	    al8(sizeof(*r)) + al8(r->nsegs * sizeof(*r->segs)) + al8((ntags + 1) * sizeof(char *));

	for (uint32_t i = 0; i < r->nsegs; i++) {
		const struct cp_segment *g = &r->segs[i];

		sz += al8(g->nframes * sizeof(char *)) + al8(g->nculprits * sizeof(*g->culprits));
	}
	sz += pc_size(&c, r->service) + pc_size(&c, r->name) + pc_size(&c, r->host);
	for (uint32_t k = 0; k < ntags; k++)
		sz += pc_size(&c, r->tags[k]);
	for (uint32_t i = 0; i < r->nsegs; i++) {
		const struct cp_segment *g = &r->segs[i];

		for (uint32_t k = 0; k < g->nframes; k++)
			sz += pc_size(&c, g->frames[k]);
		sz += pc_size(&c, g->comm) + pc_size(&c, g->cpu_model) + pc_size(&c, g->sku) +
		      pc_size(&c, g->peer);
		for (uint32_t k = 0; k < g->nculprits; k++)
			sz += pc_size(&c, g->culprits[k].comm);
	}
	return sz;
}

/* Span-level fields (span_id, service, operation, spans) are not copied:
 * kernel requests have none. */
static struct cp_request *req_copy(const struct cp_request *r, uint64_t *bytes)
{
	uint32_t ntags = 0;
	size_t sz;
	struct pcache c = {0};
	struct cp_request *d;
	struct cp_segment *segs;
	const char **tags;
	char *p;

	while (r->tags && r->tags[ntags])
		ntags++;
	sz = req_size(r, ntags);
	d = malloc(sz);
	if (!d)
		return NULL;
	*bytes = sz;
	*d = *r;
	p = (char *)d + al8(sizeof(*d));
	segs = (struct cp_segment *)p;
	p += al8(r->nsegs * sizeof(*segs));
	tags = (const char **)p;
	p += al8((ntags + 1) * sizeof(char *));
	for (uint32_t i = 0; i < r->nsegs; i++) {
		segs[i] = r->segs[i];
		segs[i].frames = (const char *const *)p;
		p += al8(r->segs[i].nframes * sizeof(char *));
		segs[i].culprits = r->segs[i].nculprits ? (const struct cp_culprit *)p : NULL;
		if (r->segs[i].nculprits)
			memcpy(p, r->segs[i].culprits,
			       r->segs[i].nculprits * sizeof(*r->segs[i].culprits));
		p += al8(r->segs[i].nculprits * sizeof(*r->segs[i].culprits));
	}
	/* strings last, in the sizing pass's order */
	d->service = pc_copy(&c, &p, r->service);
	d->name = pc_copy(&c, &p, r->name);
	d->host = pc_copy(&c, &p, r->host);
	for (uint32_t k = 0; k < ntags; k++)
		tags[k] = pc_copy(&c, &p, r->tags[k]);
	tags[ntags] = NULL;
	d->tags = r->tags ? tags : NULL;
	for (uint32_t i = 0; i < r->nsegs; i++) {
		const struct cp_segment *g = &r->segs[i];
		struct cp_segment *s = &segs[i];

		for (uint32_t k = 0; k < g->nframes; k++)
			((const char **)s->frames)[k] = pc_copy(&c, &p, g->frames[k]);
		s->comm = pc_copy(&c, &p, g->comm);
		s->cpu_model = pc_copy(&c, &p, g->cpu_model);
		s->sku = pc_copy(&c, &p, g->sku);
		s->peer = pc_copy(&c, &p, g->peer);
		for (uint32_t k = 0; k < g->nculprits; k++)
			((struct cp_culprit *)s->culprits)[k].comm =
			    pc_copy(&c, &p, g->culprits[k].comm);
	}
	d->segs = segs;
	d->id = NULL;
	d->spans = NULL;
	d->nspans = 0;
	return d;
}

/* Copies the request (and the conn's pipelined names) to wait in the FIFO. */
static int pend_push(struct kp *kp, const struct kp_conn *c, const struct cp_request *r)
{
	struct kp_pend *p;

	if (kp__grow((void **)&kp->pend, &kp->cappend, kp->npend + 1, sizeof(*kp->pend)))
		return -ENOMEM;
	p = &kp->pend[kp->npend];
	memset(p, 0, sizeof(*p));
	p->req = req_copy(r, &p->bytes);
	if (!p->req)
		return -ENOMEM;
	if (c->req.nruns) {
		p->runs = malloc(c->req.nruns * sizeof(*p->runs));
		if (!p->runs) {
			free(p->req);
			return -ENOMEM;
		}
		memcpy(p->runs, c->runs, c->req.nruns * sizeof(*p->runs));
		p->nruns = c->req.nruns;
	}
	p->host = c->host;
	p->pid = c->proc != KP_NONE ? kp->pr[c->proc].pid : -1;
	p->conn = (uint32_t)(c - kp->cn);
	p->nreq = c->nreq;
	p->bytes += p->nruns * sizeof(*p->runs);
	kp->pend_bytes += p->bytes;
	kp->npend++;
	return 0;
}

/* The walk's segments (kp->ws) as a struct cp_request, into the FIFO. */
int kp__emit_request(struct kp *kp, uint32_t ci)
{
	const struct kp_conn *c = &kp->cn[ci];
	const struct kp_source *src = host_source(kp, c->host);
	char svc[KP_NAME_LEN], status[32];
	const char *tags[2] = {NULL, NULL};
	struct cp_request r;
	uint32_t n = kp->nws;
	uint32_t nfr = 0, fi = 0;

	/* frames: service, name, the downstream (if any), the probed calls */
	for (uint32_t i = 0; i < n; i++) {
		const struct kp_wseg *w = &kp->ws[i];

		nfr += 3;
		if (w->pev >= 0 && w->thread != KP_NONE) {
			const struct kp_thread *t = &kp->th[w->thread];

			nfr += t->pev[w->pev - (int64_t)t->pev_base].depth;
		}
	}
	if (kp__grow((void **)&kp->segs, &kp->capsegs, n, sizeof(*kp->segs)) ||
	    kp__grow((void **)&kp->frames, &kp->capframes, nfr, sizeof(*kp->frames)))
		return -ENOMEM;
	if (!kp->cn[ci].service[0])
		kp__proc_service(kp, c->proc, c->a.family == AF_UNIX ? KP_PORT_UNIX : c->a.lport,
				 kp->cn[ci].service, KP_NAME_LEN);
	memcpy(svc, c->service, sizeof(svc));
	for (uint32_t i = 0; i < n; i++) {
		const struct kp_wseg *w = &kp->ws[i];
		struct cp_segment *s = &kp->segs[i];
		const char **fr = &kp->frames[fi];

		memset(s, 0, sizeof(*s));
		s->start_ns = w->start;
		s->end_ns = w->end;
		s->category = (enum cp_category)w->cat;
		s->interference = w->interference;
		fr[0] = svc;
		fr[1] = c->req.name;
		s->nframes = 2;
		if (w->frame3 >= 0)
			fr[s->nframes++] = kp__str(kp, w->frame3);
		if (w->pev >= 0 && w->thread != KP_NONE) {
			const struct kp_thread *t = &kp->th[w->thread];
			const struct kp_probe_ev *pe = &t->pev[w->pev - (int64_t)t->pev_base];

			for (uint32_t k = 0; k < pe->depth; k++)
				fr[s->nframes++] = kp->probe_names[pe->stack[k]];
		}
		s->frames = fr;
		fi += s->nframes;
		s->pid = s->tid = s->cpu = -1;
		if (w->thread != KP_NONE) {
			const struct kp_thread *t = &kp->th[w->thread];

			s->pid = t->pid;
			s->tid = t->tid;
			s->comm = kp__thread_comm(kp, w->thread);
		}
		if (w->cpu >= 0) {
			s->cpu = w->cpu;
			if (src && src->cpu_model && (uint32_t)w->cpu < src->ncpus)
				s->cpu_model = src->cpu_model[w->cpu];
			s->sku = src ? src->sku : NULL;
		}
		s->peer = w->peer >= 0 ? kp__str(kp, w->peer) : NULL;
		s->culprits = w->ncul ? &kp->culs[w->cul_first] : NULL;
		s->nculprits = w->ncul;
	}
	memset(&r, 0, sizeof(r));
	r.id = ""; /* set when it goes out */
	r.service = svc;
	r.name = c->req.name;
	r.host = src ? src->host_name : NULL;
	r.start_ns = c->req.start;
	r.end_ns = c->req.end;
	r.segs = kp->segs;
	r.nsegs = n;
	r.realtime_offset_ns = kp->realtime_offset_ns;
	if (c->req.status) {
		snprintf(status, sizeof(status), "http.status=%d", c->req.status);
		tags[0] = status;
		r.tags = tags;
	}
	return pend_push(kp, c, &r);
}
